#!/usr/bin/env bash
# Renders a run's report.html to a PNG in a real headless browser, to look at what users see:
#   tests/runner/render_report.sh DIR/report.html [OUT.png]
# Installs Debian's chromium when no browser is present (needs root and the package mirror).
set -euo pipefail
html="$(realpath "$1")"
png="${2:-${html%.html}.png}"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  apt-get install -y --no-install-recommends chromium >/dev/null
  browser="$(command -v chromium)"
fi
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1300,1700 \
  --screenshot="$png" "file://$html" 2>/dev/null
echo "$png"
