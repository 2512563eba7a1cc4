#!/usr/bin/env bash
# Greedy identity of speculative decoding (issue 29, must-show 1): over 64
# prompts, the tokens with each draft kind equal plain greedy tokens, with
# every layer resident and with the layers streamed through a small budget,
# on SmolLM2-135M Q4_1 and gemma-3-270m Q4_K_M (bench/peer/fetch-models.sh)
# and on an example model with a random draft sharing its vocabulary, where
# almost no draft is kept: still identical, and its decode time no more than
# 1.1x plain decoding's, measured side by side (plain and speculative
# generations alternate in one process: bench_speculative identity).
#
# Draft kinds: lookup (n-gram prompt lookup) and chain (a draft model's
# greedy chain: the target requantised to Q4_0 for the real models, the
# random model for the example). A new kind (a tree) joins by its name once
# bench_speculative knows it: bench/speculative-identity.sh lookup,chain,tree
#
# Usage: bench/speculative-identity.sh [KINDS]   (default lookup,chain)
# Env: as bench/speculative-common.sh (BUILD, MODELS, WORK, OUT, THREADS), and
#   PROMPTS (64), TOKENS (24), RAM (pinned RAM tier in bytes, 1 GiB: streamed
#   layers come from RAM rather than the disk). Exit 1 when any prompt
#   differs or the random draft costs more than 1.1x.
set -euo pipefail
cd "$(dirname "$0")/.."
KINDS=${1:-lookup,chain}
PROMPTS=${PROMPTS:-64}
TOKENS=${TOKENS:-24}
RAM=${RAM:-$((1 << 30))}
source bench/speculative-common.sh
smol=$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf
gemma=$MODELS/gemma-3-270m-q4_k_m.gguf
need_model "$smol"
need_model "$gemma"

# Same-vocabulary drafts: each real model requantised lower (draft_of); an
# example target and a small random model of the same vocabulary (other seed).
example=$WORK/example-target.gguf
random=$WORK/example-random-draft.gguf
[[ -f $example ]] || "$LS" example-model "$example" --layers 12 --hidden 768 --ffn 2048 --dtype q4_1 --seed 11 >/dev/null
[[ -f $random ]] || "$LS" example-model "$random" --layers 1 --hidden 64 --ffn 128 --dtype q8_0 --seed 12 >/dev/null

echo "speculative identity: kinds $KINDS, $PROMPTS prompts x $TOKENS tokens, $THREADS threads; load $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
# name  model  draft  streamed-budget (bytes; the resident run uses 0)
while read -r name model draft budget; do
  for vram in 0 "$budget"; do
    placement=$([[ $vram == 0 ]] && echo resident || echo streamed)
    json=$OUT/identity-$name-$placement.json
    rm -f "$json"
    "$BENCH" identity "$model" --kinds "$KINDS" --draft "$draft" --vram "$vram" --prompts "$PROMPTS" \
      --ram "$RAM" --tokens "$TOKENS" --threads "$THREADS" --json "$json" >"$OUT/identity-$name-$placement.log" 2>&1 ||
      { status=1; grep -v '\[info\]' "$OUT/identity-$name-$placement.log" | tail -5 >&2; }
    [[ -f $json ]] || { echo "$name $placement: no report" >&2; status=1; continue; }
    python3 - "$json" "$name" "$placement" <<'PY' || status=1
import json, sys
j, name, placement = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
ok = True
for kind, k in sorted(j["kinds"].items()):
    kept = k["accepted"] / k["drafted"] if k["drafted"] else 0
    line = (f"{name:8} {placement:9} {kind:7} differing prompts {k['differing_prompts']:2}/{j['prompts']}  "
            f"tokens/pass {k['tokens_per_pass']:.2f}  kept {kept:6.1%}  decode time vs plain {k['time_vs_plain']:.2f}x")
    # The random draft: nearly every draft rejected, at most 1.1x the time.
    if name == "example" and kind == "chain" and k["time_vs_plain"] > 1.1:
        line += "  SLOWER THAN 1.1x"
        ok = False
    ok = ok and k["differing_prompts"] == 0
    print(line + f"  (streamed {j['bytes_streamed_per_pass'] / 2**20:.1f} MiB/pass)")
sys.exit(0 if ok else 1)
PY
  done
done <<EOF
smollm2 $smol $(draft_of "$smol") $((72 << 20))
gemma3 $gemma $(draft_of "$gemma") $((200 << 20))
example $example $random $((32 << 20))
EOF
exit $status
