#!/usr/bin/env bash
# Issue 16, must-show 2: `planned` against `overlap`, `host` and `serial` on
# the host backend, 768 MiB example model, --vram 256MiB --ram 1GiB, with the
# link throttled to 0.5, 2 and 16 GB/s, decode (1 token) and prefill (512
# tokens), at `bench`'s default settings (no --host-factor: `planned` chooses
# sites from its own cost predictions and measurements), two warm-up passes.
# Six `layerstream bench` runs (four strategies side by side each),
# then one Markdown table: each strategy's median pass, planned / best of the
# others (must be <= 1.05), planned's sites (R resident, S streamed,
# H host site, X split by rows) and the measured per-block costs that explain
# them (device compute, host compute, link time of one block).
#
# Usage: bench/hybrid-cells.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR: where the `layerstream` binary is (default build/dev)
#   OUT_DIR:   JSON and text output per cell (default /tmp/hybrid-cells)
# Environment: MODEL (default /tmp/m768.gguf, made with
#   `layerstream example-model /tmp/m768.gguf --size 768MiB --dtype q8_0` when missing),
#   LINKS (default "0.5 2 16"), MODES (default "decode prefill"),
#   DECODE_PASSES/DECODE_WARMUP (5/2), PREFILL_PASSES/PREFILL_WARMUP (2/2), PROMPT_LEN (512).
# Time: ~15 minutes on an idle 2-core box (prefill-512 dominates: ~0.8 TFLOP
# per pass; 4 strategies x 4 passes x 3 links).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/dev}
OUT=${2:-/tmp/hybrid-cells}
BIN=$BUILD/bin/layerstream
[[ -x $BIN ]] || BIN=$(find "$BUILD" -name layerstream -type f -perm -u+x | head -1)
[[ -x $BIN ]] || { echo "no layerstream binary under $BUILD (cmake --build $BUILD --target layerstream_cli)" >&2; exit 1; }
MODEL=${MODEL:-/tmp/m768.gguf}
LINKS=${LINKS:-0.5 2 16}
MODES=${MODES:-decode prefill}
PROMPT_LEN=${PROMPT_LEN:-512}
mkdir -p "$OUT"
if [[ ! -f $MODEL ]]; then
  "$BIN" example-model "$MODEL" --size 768MiB --dtype q8_0
fi

for mode in $MODES; do
  for link in $LINKS; do
    if [[ $mode == decode ]]; then
      extra=(--passes "${DECODE_PASSES:-5}" --warmup "${DECODE_WARMUP:-2}")
    else
      extra=(--prompt-len "$PROMPT_LEN" --passes "${PREFILL_PASSES:-2}" --warmup "${PREFILL_WARMUP:-2}")
    fi
    cell=$OUT/$mode-$link
    echo "== $mode, link $link GB/s ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    "$BIN" bench "$MODEL" --vram 256MiB --ram 1GiB --sim-link "$link" --mode "$mode" \
      --strategies overlap,host,serial,planned "${extra[@]}" --json "$cell.json" \
      | tee "$cell.txt" >&2
  done
done

python3 - "$OUT" $MODES -- $LINKS <<'EOF'
import json, sys
out = sys.argv[1]
sep = sys.argv.index("--")
modes, links = sys.argv[2:sep], sys.argv[sep + 1:]
def sites(s):
    m = {"host": "H", "split": "X"}
    return "".join(m.get(l["site"], "R" if l["tier"] == "resident" else "S") for l in s["layers"])
print("| mode | link GB/s | overlap ms | host ms | serial ms | planned ms | planned / best of others | planned's sites | costs planned measured |")
print("|---|---|---|---|---|---|---|---|---|")
for mode in modes:
    for link in links:
        r = json.load(open(f"{out}/{mode}-{link}.json"))
        by = {s["name"]: s for s in r["strategies"] if not s.get("skipped")}
        med = {n: by[n]["pass_ms"]["median"] for n in by}
        others = [med[n] for n in ("overlap", "host", "serial") if n in med]
        ratio = med["planned"] / min(others) if others and "planned" in med else float("nan")
        costs = by["planned"]["plan"].split("costs ", 1)[-1].split(";")[0] if "planned" in by else ""
        cell = lambda n: f"{med[n]:.1f}" if n in med else "skipped"
        print(f"| {mode} | {link} | {cell('overlap')} | {cell('host')} | {cell('serial')} | {cell('planned')} | "
              f"{ratio:.2f}{'' if ratio <= 1.05 else ' (over 1.05)'} | {sites(by['planned']) if 'planned' in by else ''} | {costs} |")
EOF
