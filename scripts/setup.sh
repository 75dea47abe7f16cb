#!/usr/bin/env bash
# Installs what diffattn needs to build and test, pinned, when it is missing. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages: name=version.
debs=(
  cmake=3.25.1-1
  ninja-build=1.11.1-2~deb12u1
  g++=4:12.2.0-3
  nlohmann-json3-dev=3.11.2-2
  libdlpack-dev=0.6-1+b1
  libgtest-dev=1.12.1-0.2
  libgmock-dev=1.12.1-0.2
  libopenblas-dev=0.3.21+ds-4
  clang-14=1:14.0.6-12
  libclang-rt-14-dev=1:14.0.6-12
)
# The Python tests build a fresh virtual environment: python3 needs venv with ensurepip.
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  debs+=(python3-venv=3.11.2-1+b1)
fi
missing=()
for spec in "${debs[@]}"; do
  name="${spec%%=*}"; want="${spec#*=}"
  have="$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null || true)"
  [ "$have" = "$want" ] || missing+=("$spec")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends --allow-downgrades "${missing[@]}"
fi

# Python wheels that carry C++ headers, only needed when the CUDA part is built.
if command -v nvcc >/dev/null 2>&1; then
  pydeps="$here/build/_deps/py"
  stamp="$pydeps/.stamp-cudnn-frontend-1.32.0"
  if [ ! -f "$stamp" ]; then
    echo "setup: installing nvidia-cudnn-frontend==1.32.0 headers into $pydeps"
    rm -rf "$pydeps" && mkdir -p "$pydeps"
    python3 -m pip install -q --no-deps --no-compile --target "$pydeps" nvidia-cudnn-frontend==1.32.0
    touch "$stamp"
  fi
fi
