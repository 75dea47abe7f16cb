#!/usr/bin/env bash
# The Python package's tests on the CPU, in a fresh virtual environment (pinned test requirements from
# PyPI): first against the libdiffattn.so that the main build made (no second compile), then, unless
# PIP_INSTALL_CHECK=0, `pip install .` CPU-only into that environment and the same tests against the
# installed package from outside the tree. The torch and diffusers tests report as skipped here.
#   scripts/test_python.sh [PRESET]      (after scripts/build.sh; default preset: default)
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

echo "== Python API tests against build/$preset/src/libdiffattn.so"
DIFFATTN_LIBRARY="$library" DIFFATTN_CLI="$root/build/$preset/bin/diffattn" PYTHONPATH="$root/python" \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs python/tests

if [ "${PIP_INSTALL_CHECK:-1}" = 1 ]; then
  echo "== pip install . (CPU-only) and the tests against the installed package"
  start=$(date +%s)
  "$venv/bin/python" -m pip install -q --disable-pip-version-check . -C cmake.define.DIFFATTN_ENABLE_CUDA=OFF
  echo "pip install took $(( $(date +%s) - start )) s"
  cd "$(mktemp -d)"
  "$venv/bin/python" -c 'import diffattn, sys; assert "site-packages" in diffattn.__file__, diffattn.__file__; print("installed:", diffattn.__file__)'
  # The tool too is the installed one (the wheel puts it on the environment's PATH).
  env -u DIFFATTN_CLI "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$root/python/tests"
fi
