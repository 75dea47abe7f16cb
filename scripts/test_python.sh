#!/usr/bin/env bash
# The Python package's tests on the CPU, in a fresh virtual environment (pinned test requirements from
# PyPI): first against the libdiffattn.so that the main build made, then, unless PIP_INSTALL_CHECK=0,
# `pip install .` into that environment and the same tests against the installed package from outside
# the tree. The torch and diffusers tests run on the CPU; their CUDA cases report as skipped here.
#   scripts/test_python.sh [PRESET]      (after scripts/build.sh; default preset: default)
# The install is the README's command with one setting more, -C build-dir=build/PRESET: scikit-build-core
# configures the preset's build folder with pyproject.toml's settings and builds the wheel's targets there,
# which the main build has compiled already, so the library is not compiled a second time (the preset's
# configuration is restored afterwards). PIP_INSTALL_CHECK=fresh builds the wheel from nothing instead
# (pyproject.toml's build/wheel, CPU-only), as a first install on a clean clone does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
preset="${1:-${PRESET:-default}}"
library="$root/build/$preset/src/libdiffattn.so"
[ -f "$library" ] || { echo "no $library: run scripts/build.sh first (PRESET=$preset)" >&2; exit 1; }
venv="$root/build/py-venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
# PyTorch and diffusers (python/requirements-torch.txt, all pinned, --no-deps) for the torch.compile and
# diffusers tests on the CPU; TORCH_TESTS=0 leaves them out (those tests then report as skipped).
if [ "${TORCH_TESTS:-1}" != 0 ]; then
  start=$(date +%s)
  if "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r python/requirements-torch.txt &&
     "$venv/bin/python" -c 'import torch, diffusers; print("torch", torch.__version__, "and diffusers", diffusers.__version__, "import")'; then
    echo "torch and diffusers installed in $(( $(date +%s) - start )) s"
  else
    echo "WARNING: torch or diffusers did not install or import here; their tests report as skipped" >&2
  fi
fi

echo "== Python API tests against build/$preset/src/libdiffattn.so"
DIFFATTN_LIBRARY="$library" DIFFATTN_CLI="$root/build/$preset/bin/diffattn" PYTHONPATH="$root/python" \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs python/tests

check="${PIP_INSTALL_CHECK:-1}"
if [ "$check" != 0 ]; then
  if [ "$check" = fresh ]; then
    echo "== pip install . (CPU-only, built from nothing in build/wheel) and the tests against the installed package"
    settings=(-C cmake.define.DIFFATTN_ENABLE_CUDA=OFF)
  else
    echo "== pip install . (built in build/$preset) and the tests against the installed package"
    settings=(-C "build-dir=build/$preset")
  fi
  # scikit-build-core empties a build folder (cache and objects) whose record names another isolated
  # build environment, which every pip install makes anew; the preset's folder is the main build's, so
  # its record goes before and after the install.
  record="build/$preset/.skbuild-info.json"
  [ "$check" = fresh ] || rm -f "$record"
  start=$(date +%s)
  status=0
  "$venv/bin/python" -m pip install -q --disable-pip-version-check . "${settings[@]}" || status=$?
  # pyproject.toml's configuration turned the preset's tests and benchmarks off; the preset turns them on again.
  [ "$check" = fresh ] || { rm -f "$record"; cmake --preset "$preset" >/dev/null; }
  [ "$status" = 0 ] || exit "$status"
  echo "pip install took $(( $(date +%s) - start )) s"
  cd "$(mktemp -d)"
  "$venv/bin/python" -c 'import diffattn, sys; assert "site-packages" in diffattn.__file__, diffattn.__file__; print("installed:", diffattn.__file__)'
  # The tool too is the installed one (the wheel puts it on the environment's PATH).
  env -u DIFFATTN_CLI "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$root/python/tests"
fi
