#!/usr/bin/env bash
# The draft length chosen from measured costs against the best fixed length
# (issue 29, must-show 5): SmolLM2-135M Q4_1 streamed through --vram 72MiB
# from a RAM tier over a simulated link of 0.5, 2 and 16 GB/s, drafts from
# SmolLM2 requantised to Q4_0. At each link, one process
# (bench_speculative lengths) generates greedily with plain decoding, each
# fixed draft length of the sweep and the adaptive choice, rounds
# interleaved (rotated each round) so a busy machine slows them alike; the
# medians over rounds are compared. The target: adaptive within 10% of the
# best fixed length's tokens/s.
#
# The sweep is 1, 2, 4, 7: a verification pass carries at most
# kMaxDraftTokens = 7 drafts today (runtime/include/layerstream/speculative.h:
# the kernels compute a pass of up to 8 tokens bit for bit as one-token
# passes), so the issue's 8, 16 and 32 cannot be asked for.
#
# Usage: bench/speculative-draft-length.sh [LINKS]   (default "0.5 2 16")
# Env: as bench/speculative-common.sh (BUILD, MODELS, WORK, OUT, THREADS), and
#   ROUNDS (3), TOKENS (32), LENGTHS (1,2,4,7).
#   Exit 1 when adaptive misses the 10% bound at some link.
set -euo pipefail
cd "$(dirname "$0")/.."
LINKS=${1:-0.5 2 16}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-32}
LENGTHS=${LENGTHS:-1,2,4,7}
source bench/speculative-common.sh
target=$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf
need_model "$target"
draft=$(draft_of "$target")

echo "draft length: SmolLM2 Q4_1 at --vram 72MiB (RAM tier 1 GiB), draft Q4_0, lengths $LENGTHS and adaptive," \
  "$ROUNDS rounds x $TOKENS tokens, $THREADS threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
for link in $LINKS; do
  json=$OUT/draft-length-link$link.json
  rm -f "$json"
  "$BENCH" lengths "$target" --draft "$draft" --vram $((72 << 20)) --ram $((1 << 30)) --sim-link "$link" \
    --lengths "$LENGTHS" --rounds "$ROUNDS" --tokens "$TOKENS" --threads "$THREADS" --json "$json" \
    >"$OUT/draft-length-link$link.log" 2>&1 || { status=1; tail -5 "$OUT/draft-length-link$link.log" >&2; continue; }
  python3 - "$json" <<'PY' || status=1
import json, sys
j = json.load(open(sys.argv[1]))
cells = []
for s in j["settings"]:
    extra = f" (mean length {s['mean_draft_length']:.1f})" if s["name"] == "adaptive" else ""
    cells.append(f"{s['name']} {s['median']:.1f}{extra}{'' if s['identical'] else ' DIFFERENT TOKENS'}")
ratio = j["adaptive_vs_best"]
ok = ratio >= 0.9 and all(s["identical"] for s in j["settings"])
print(f"link {j['sim_link_gbps']:>4} GB/s: tokens/s " + ", ".join(cells) +
      f"; best fixed: {j['best_fixed']}; adaptive / best {ratio:.2f}" + ("" if ok else "  MISSES 10%"))
sys.exit(0 if ok else 1)
PY
done
exit $status
