#!/usr/bin/env bash
# Perplexity side by side: llama.cpp's llama-perplexity and `layerstream
# perplexity` on the same model file, text, context and number of windows,
# for both real models; layerstream resident (--vram above the model size)
# and streamed (--vram below it, layers read from disk each pass). Prints a
# markdown table: the two figures, their relative difference (must be within
# 2%) and whether the streamed figure equals the resident one exactly.
#
# Usage: bench/peer/perplexity.sh [TEXT]   (default /usr/share/common-licenses/GPL-3)
# Env: CTX (256), CHUNKS (4), BATCH (32: tokens per layerstream pass, the same
#      resident and streamed, so the arithmetic is the same), THREADS (nproc),
#      LAYERSTREAM (build/dev/bin/layerstream), LAYERSTREAM_PEER, LAYERSTREAM_MODELS.
# Needs bench/peer/llamacpp.sh and bench/peer/fetch-models.sh run first. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
TEXT=${1:-/usr/share/common-licenses/GPL-3}
source bench/peer/settings.sh  # CTX, CHUNKS, THREADS, PEER, MODELS
BATCH=${BATCH:-32}
LS=${LAYERSTREAM:-build/dev/bin/layerstream}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# model file, streamed --vram (below the file size) and strategy: gemma's tied
# head (token_embd, 170 MiB of its 241 MiB) leaves room for one slot only, so
# it streams with the serial strategy (one slot, load then compute).
runs=(
  "SmolLM2-135M-Instruct.Q4_1.gguf 80MiB planned"
  "gemma-3-270m-q4_k_m.gguf 220MiB serial"
)

echo "text: $TEXT ($(wc -c <"$TEXT") bytes), ctx $CTX, chunks $CHUNKS, layerstream $BATCH tokens per pass, $THREADS threads"
echo
echo "| model | file size | llama-perplexity | layerstream resident | layerstream streamed (--vram) | diff vs llama.cpp | streamed == resident |"
echo "|---|---|---|---|---|---|---|"
for r in "${runs[@]}"; do
  read -r name vram strategy <<<"$r"
  model="$MODELS/$name"
  size=$(stat -c %s "$model")
  # --no-repack: no AMX/repacked weight buffers (on this VM AMX tile setup
  # faults: ldtilecfg SIGSEGV); -b CTX: one window per batch.
  "$PEER/llama-perplexity" -m "$model" -f "$TEXT" -c "$CTX" -b "$CTX" --chunks "$CHUNKS" -t "$THREADS" --no-repack \
    >"$out/peer.txt" 2>&1 || { echo "llama-perplexity failed:" >&2; tail -5 "$out/peer.txt" >&2; exit 1; }
  peer=$(grep -o 'Final estimate: PPL = [0-9.]*' "$out/peer.txt" | awk '{print $5}')
  "$LS" perplexity "$model" -f "$TEXT" --ctx "$CTX" --chunks "$CHUNKS" --prefill-chunk "$BATCH" --host-threads "$THREADS" \
    --strategy resident --json "$out/res.json" >"$out/res.txt" 2>&1 || { tail -5 "$out/res.txt" >&2; exit 1; }
  "$LS" perplexity "$model" -f "$TEXT" --ctx "$CTX" --chunks "$CHUNKS" --prefill-chunk "$BATCH" --host-threads "$THREADS" \
    --vram "$vram" --strategy "$strategy" --json "$out/str.json" >"$out/str.txt" 2>&1 || { tail -5 "$out/str.txt" >&2; exit 1; }
  python3 - "$name" "$size" "$peer" "$out/res.json" "$out/str.json" "$vram $strategy" <<'PY'
import json, sys
name, size, peer, res, st, vram = sys.argv[1:]
r, s = json.load(open(res)), json.load(open(st))
peer = float(peer)
diff = (r["perplexity"] - peer) / peer * 100
same = "yes" if r["perplexity"] == s["perplexity"] else "NO"
print(f"| {name} | {int(size) / 2**20:.1f} MiB | {peer:.4f} | {r['perplexity']:.4f} | "
      f"{s['perplexity']:.4f} ({vram}, {s['streamed_bytes_per_pass'] / 2**20:.1f} MiB streamed per pass) | "
      f"{diff:+.2f}% | {same} |")
PY
done
