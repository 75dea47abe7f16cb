#!/usr/bin/env bash
# Installs missing dependencies (pinned), configures and builds. PRESET=cpu forces a CPU-only build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
preset="${PRESET:-default}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" "$@"
