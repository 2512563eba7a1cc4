#!/usr/bin/env bash
# Renders a `layerstream bench --report` HTML file to a PNG with headless
# Chromium (Debian's `chromium` package), to check by eye that the report
# opens without network access and the timeline is readable. Run by hand; CI
# does not depend on chromium.
#   bench/report_screenshot.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]
set -euo pipefail
report=${1:?usage: $0 REPORT.html [OUT.png] [WIDTHxHEIGHT]}
out=${2:-${report%.html}.png}
size=${3:-1400x1800}
command -v chromium >/dev/null || { echo "chromium not found: apt-get install -y chromium" >&2; exit 77; }
[ -f "$report" ] || { echo "no such report: $report" >&2; exit 1; }
abs=$(realpath "$report")
out_abs=$(realpath -m "$out")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# --no-sandbox: runs as root in containers. The report needs no network; block it anyway.
timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$profile" --proxy-server="127.0.0.1:9" --proxy-bypass-list="<-loopback>" \
  --screenshot="$out_abs" --window-size="${size/x/,}" "file://$abs" 2>"$profile/chromium.log" || {
  cat "$profile/chromium.log" >&2
  exit 1
}
[ -s "$out_abs" ] || { echo "chromium wrote no screenshot" >&2; cat "$profile/chromium.log" >&2; exit 1; }
echo "wrote $out_abs"
