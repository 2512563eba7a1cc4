#!/usr/bin/env bash
# Decode time at a long context against a short one (issue 14, must-show 3):
# `layerstream bench --mode decode --decode-pos N` on the same model and
# budget, N = 64 and N = 2048 interleaved (64, 2048, 64, 2048, ...), every
# layer resident, 2 host threads, F32 KV cache (the default). Each run times
# PASSES decode passes at that position after a warm-up; the script prints
# each run's min / median, then the ratio 2048 / 64 of the medians of the
# per-run medians and of the minimums (target: <= 1.3).
#
# Usage: bench/decode-context.sh [MODEL]   (default /tmp/m768.gguf; made by
#   layerstream example-model /tmp/m768.gguf --size 768MiB --dtype q8_0)
# Env: ROUNDS (5), PASSES (10), THREADS (2), KV (f32), LAYERSTREAM (build/dev/bin/layerstream).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-/tmp/m768.gguf}
ROUNDS=${ROUNDS:-5}
PASSES=${PASSES:-10}
THREADS=${THREADS:-2}
KV=${KV:-f32}
LS=${LAYERSTREAM:-build/dev/bin/layerstream}
[[ -f $MODEL ]] || { echo "no $MODEL: make it with $LS example-model $MODEL --size 768MiB --dtype q8_0" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "model $MODEL, $ROUNDS rounds x (pos 64, pos 2048), $PASSES passes each, $THREADS threads, KV $KV; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for pos in 64 2048; do
    "$LS" bench "$MODEL" --strategies resident --mode decode --decode-pos "$pos" --passes "$PASSES" --warmup 1 \
      --host-threads "$THREADS" --vram 2GiB --kv-type "$KV" --json "$out/r$r-$pos.json" >"$out/log" 2>&1 ||
      { tail -5 "$out/log" >&2; exit 1; }
  done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
med = {64: [], 2048: []}
mins = {64: [], 2048: []}
for r in range(1, rounds + 1):
    row = []
    for pos in (64, 2048):
        p = json.load(open(f"{out}/r{r}-{pos}.json"))["strategies"][0]["pass_ms"]
        med[pos].append(p["median"]); mins[pos].append(p["min"])
        row.append(f"pos {pos:4d}: min {p['min']:7.2f} median {p['median']:7.2f} ms")
    print(f"round {r}: " + "   ".join(row) + f"   ratio of medians {med[2048][-1] / med[64][-1]:.3f}")
m64, m2k = statistics.median(med[64]), statistics.median(med[2048])
print(f"median of medians: pos 64 {m64:.2f} ms, pos 2048 {m2k:.2f} ms, ratio {m2k / m64:.3f}")
print(f"minimum:           pos 64 {min(mins[64]):.2f} ms, pos 2048 {min(mins[2048]):.2f} ms, ratio {min(mins[2048]) / min(mins[64]):.3f}")
PY
