#!/usr/bin/env bash
# Installs missing dependencies, builds, and runs diffattn's main job with the given arguments
# (none: `diffattn run` on its embedded default). The build's output goes to a log, shown on failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${PRESET:-default}"
mkdir -p build
log="build/run-${preset}-build.log"
echo "run.sh: setting up and building (preset ${preset}; the first build takes minutes; log: ${log})" >&2
if ! scripts/build.sh >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "run.sh: the build failed; the full log is ${log}" >&2
  exit 1
fi
exec "build/${preset}/bin/diffattn" "$@"
