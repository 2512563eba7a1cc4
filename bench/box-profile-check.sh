#!/usr/bin/env bash
# Issue 16, box profiles: the commands behind bench/RESULTS.md "Box profiles and the H200 prediction".
#   1. this machine's box profile (`probe`, ~30 s);
#   2. the check: the must-show-2 decode cell (host backend, 768 MiB Q8_0 example model,
#      --vram 256MiB --ram 1GiB --sim-link 2) measured with the profile's prediction beside it
#      (the "prediction from box file" table: pred/meas per strategy, predicted sites);
#   3. the hand-written H200 + PCIe 5 + 8-channel DDR5 profile's prediction for a 70B-class
#      Q4_K_M layer stack on a 24 GiB budget, decode and 512-token prefill (nothing runs),
#      and `plan` of the same.
# Usage: bench/box-profile-check.sh [BUILD_DIR (build/dev)] [MODEL (/tmp/m768.gguf; made if missing)]
# Writes JSON under $OUT (default /tmp/box-profile-check) and prints pred/meas at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/dev}/bin/layerstream
M=${2:-/tmp/m768.gguf}
OUT=${OUT:-/tmp/box-profile-check}
H200=bench/boxes/h200-pcie5-ddr5.json
mkdir -p "$OUT"
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -s "$M" ] || "$B" example-model "$M" --size 768MiB --dtype q8_0
echo "== 1. probe"
"$B" probe --json "$OUT/this-box.json"
echo "== 2. bench with this machine's profile"
"$B" bench "$M" --vram 256MiB --ram 1GiB --sim-link 2 --mode decode --strategies overlap,host,serial,planned \
  --host-factor 1 --box "$OUT/this-box.json" --json "$OUT/check-decode.json"
echo "== 3. H200 profile, 70B-class Q4_K_M, 24 GiB"
for mode in decode prefill; do
  "$B" bench --shape llama-70b-q4_k_m --box "$H200" --vram 24GiB --ram 64GiB --mode "$mode" --prompt-len 512 \
    --strategies overlap,host,serial,planned --json "$OUT/h200-70b-$mode.json"
done
"$B" plan --shape llama-70b-q4_k_m --box "$H200" --vram 24GiB --ram 64GiB --ctx 512 --prefill-chunk 512
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$OUT/check-decode.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("check (predicted from the profile / measured median, ms):")
for s in d["prediction"]["strategies"]:
    if "measured_median_s" in s:
        print(f"  {s['name']:<8} {1e3 * s['predicted_pass_s']:9.2f} / {1e3 * s['measured_median_s']:9.2f}"
              f"  = {s['predicted_pass_s'] / s['measured_median_s']:.2f}  sites {s['sites']}")
PY
fi
