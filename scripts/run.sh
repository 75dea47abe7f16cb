#!/usr/bin/env bash
# Installs missing dependencies, builds, and runs diffattn's main job with the given arguments.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/build.sh >/dev/null
exec "build/${PRESET:-default}/bin/diffattn" "$@"
