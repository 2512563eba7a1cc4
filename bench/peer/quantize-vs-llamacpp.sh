#!/usr/bin/env bash
# `layerstream quantize` against llama.cpp's llama-quantize, same inputs:
#  1. quality: SmolLM2-135M (the Q4_1 file requantised, as both tools allow
#     with --allow-requantize) and an F16 example model (32-aligned, so both
#     tools read it), each quantised by both tools to every TYPE; perplexity
#     of every result by `layerstream perplexity` on the same text and
#     settings, ours / theirs; and llama.cpp's own llama-perplexity on our
#     SmolLM2 files (they open in llama.cpp and score as its own do); then
#     the same with one importance matrix (llama-imatrix on 16 windows of
#     TEXT) given to both tools; then `layerstream imatrix` on the same
#     windows: its per-tensor difference from llama-imatrix's matrix, and the
#     same quantisations with it (both tools read it);
#  2. speed and memory: a larger F16 example model to Q4_K_M by both tools,
#     wall time and peak RSS (/usr/bin/time), same thread count.
# Prints markdown tables. Not part of CI.
#
# Usage: bench/peer/quantize-vs-llamacpp.sh [TEXT]   (default /usr/share/common-licenses/GPL-3)
# Env: TYPES ("Q4_K_M Q5_K_M Q3_K_M Q2_K Q6_K IQ4_XS"), CTX (256), CHUNKS (4),
#      IMATRIX (1: also with an importance matrix; needs llama-imatrix, built here if missing),
#      QUALITY (1; 0: the speed part only),
#      SPEED_SIZE (4GiB; 0 skips part 2), THREADS (nproc),
#      LAYERSTREAM (build/ci/bin/layerstream), LAYERSTREAM_PEER, LAYERSTREAM_MODELS,
#      WORK (a scratch folder with room for the speed model twice; default: mktemp under /var/tmp).
# Needs bench/peer/llamacpp.sh and bench/peer/fetch-models.sh run first.
set -euo pipefail
cd "$(dirname "$0")/../.."
TEXT=${1:-/usr/share/common-licenses/GPL-3}
TYPES=${TYPES:-"Q4_K_M Q5_K_M Q3_K_M Q2_K Q6_K IQ4_XS"}
source bench/peer/settings.sh  # CTX, CHUNKS, THREADS, PEER, MODELS
SPEED_SIZE=${SPEED_SIZE:-4GiB}
IMATRIX=${IMATRIX:-1}
QUALITY=${QUALITY:-1}
LS=${LAYERSTREAM:-build/ci/bin/layerstream}
WORK=${WORK:-$(mktemp -d /var/tmp/quantize-vs.XXXXXX)}
trap 'rm -rf "$WORK"' EXIT

ppl_ls() {  # model -> perplexity by layerstream
  "$LS" perplexity "$1" -f "$TEXT" --ctx "$CTX" --chunks "$CHUNKS" --host-threads "$THREADS" --strategy resident \
    --json "$WORK/p.json" >"$WORK/p.txt" 2>&1 || { tail -5 "$WORK/p.txt" >&2; return 1; }
  python3 -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["perplexity"])' "$WORK/p.json"
}
ppl_peer() {  # model -> perplexity by llama-perplexity
  "$PEER/llama-perplexity" -m "$1" -f "$TEXT" -c "$CTX" -b "$CTX" --chunks "$CHUNKS" -t "$THREADS" --no-repack \
    >"$WORK/pp.txt" 2>&1 || { tail -5 "$WORK/pp.txt" >&2; return 1; }
  grep -o 'Final estimate: PPL = [0-9.]*' "$WORK/pp.txt" | awk '{print $5}'
}

imatrix_diff() {  # ours.gguf theirs.gguf -> per-tensor relative L2 difference of in_sum2 / counts
  python3 - "$1" "$2" <<'PY'
import struct, sys, statistics
def read(path):
    b = open(path, "rb").read()
    pos = 24
    n_t, n_kv = struct.unpack_from("<QQ", b, 8)
    def string():
        nonlocal pos
        n, = struct.unpack_from("<Q", b, pos); pos += 8 + n
        return b[pos - n:pos].decode()
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def value(t):
        nonlocal pos
        if t == 8: return string()
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, pos); pos += 12
            return [value(et) for _ in range(n)]
        fmt = {4: "<I", 5: "<i", 10: "<Q"}.get(t)
        v = struct.unpack_from(fmt, b, pos)[0] if fmt else None
        pos += sizes[t]
        return v
    kv = {}
    for _ in range(n_kv):
        k = string(); t, = struct.unpack_from("<I", b, pos); pos += 4; kv[k] = value(t)
    infos = []
    for _ in range(n_t):
        name = string(); nd, = struct.unpack_from("<I", b, pos); pos += 4
        dims = struct.unpack_from("<%dQ" % nd, b, pos); pos += 8 * nd
        t, off = struct.unpack_from("<IQ", b, pos); pos += 12
        infos.append((name, dims, off))
    align = kv.get("general.alignment", 32)
    data = (pos + align - 1) // align * align
    out = {}
    for name, dims, off in infos:
        n = 1
        for d in dims: n *= d
        out[name] = struct.unpack_from("<%df" % n, b, data + off)
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
rel = {}
for name in sorted(k[:-8] for k in b if k.endswith(".in_sum2")):
    if name + ".in_sum2" not in a: print("missing in ours:", name); continue
    x = [v / a[name + ".counts"][0] for v in a[name + ".in_sum2"]]
    y = [v / b[name + ".counts"][0] for v in b[name + ".in_sum2"]]
    rel[name] = (sum((p - q) ** 2 for p, q in zip(x, y)) / sum(q * q for q in y)) ** 0.5
w = max(rel, key=rel.get)
print("in_sum2 / counts, ours vs llama-imatrix, %d tensors (%d in ours): relative L2 difference median %.4f, "
      "max %.4f (%s)" % (len(rel), sum(k.endswith(".in_sum2") for k in a), statistics.median(rel.values()), rel[w], w))
PY
}

quality() {  # label input extra-layerstream-flags extra-llama-flags peer-ppl?
  local label=$1 in=$2 lsflags=$3 lcflags=$4 peer=$5
  echo
  echo "### $label ($(du -h "$in" | cut -f1)), ctx $CTX, $CHUNKS chunks, \`layerstream perplexity\`"
  echo
  if [ "$peer" = yes ]; then
    echo "| type | ours | llama-quantize | ours / theirs | ours, by llama-perplexity | theirs, by llama-perplexity | ours size | theirs size |"
    echo "|---|---|---|---|---|---|---|---|"
  else
    echo "| type | ours | llama-quantize | ours / theirs | ours size | theirs size |"
    echo "|---|---|---|---|---|---|"
  fi
  for t in $TYPES; do
    "$LS" --log-level warn quantize "$in" "$WORK/ours.gguf" --type "$t" --align 32 --threads "$THREADS" $lsflags \
      >"$WORK/q.txt" 2>&1 || { tail -5 "$WORK/q.txt" >&2; exit 1; }
    "$PEER/llama-quantize" $lcflags "$in" "$WORK/theirs.gguf" "$t" "$THREADS" >"$WORK/lq.txt" 2>&1 ||
      { tail -5 "$WORK/lq.txt" >&2; exit 1; }
    local a b
    a=$(ppl_ls "$WORK/ours.gguf")
    b=$(ppl_ls "$WORK/theirs.gguf")
    local r
    r=$(python3 -c "print('%.4f' % ($a / $b))")
    local sa sb
    sa=$(du -h "$WORK/ours.gguf" | cut -f1)
    sb=$(du -h "$WORK/theirs.gguf" | cut -f1)
    if [ "$peer" = yes ]; then
      echo "| $t | $a | $b | $r | $(ppl_peer "$WORK/ours.gguf") | $(ppl_peer "$WORK/theirs.gguf") | $sa | $sb |"
    else
      echo "| $t | $a | $b | $r | $sa | $sb |"
    fi
    rm -f "$WORK/ours.gguf" "$WORK/theirs.gguf"
  done
}

echo "text: $TEXT, $THREADS threads, layerstream $("$LS" version | head -1)"
if [ "$QUALITY" = 1 ]; then
  quality "SmolLM2-135M-Instruct (from its Q4_1 file, requantised)" "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" \
    "--allow-requantize" "--allow-requantize" yes
  "$LS" --log-level warn example-model "$WORK/f16.gguf" --layers 8 --hidden 512 --ffn 1536 --heads 8 --kv-heads 2 \
    --vocab 2048 --dtype f16 --align 32 >/dev/null
  quality "F16 example model (8 layers, hidden 512)" "$WORK/f16.gguf" "" "" no

  if [ "$IMATRIX" = 1 ]; then
    if [ ! -x "$PEER/llama-imatrix" ]; then
      cmake --build "$PEER/.." -j "$(nproc)" --target llama-imatrix >/dev/null
    fi
    for m in "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf:smol" "$WORK/f16.gguf:example"; do
      "$PEER/llama-imatrix" -m "${m%%:*}" -f "$TEXT" -c "$CTX" --chunks 16 -t "$THREADS" --no-repack \
        -o "$WORK/imatrix-${m##*:}.gguf" >"$WORK/im.txt" 2>&1 || { tail -5 "$WORK/im.txt" >&2; exit 1; }
    done
    quality "SmolLM2-135M-Instruct, with an importance matrix (16 windows of $CTX tokens)" \
      "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" "--allow-requantize --imatrix $WORK/imatrix-smol.gguf" \
      "--allow-requantize --imatrix $WORK/imatrix-smol.gguf" yes
    quality "F16 example model, with an importance matrix" "$WORK/f16.gguf" "--imatrix $WORK/imatrix-example.gguf" \
      "--imatrix $WORK/imatrix-example.gguf" no
    # `layerstream imatrix` on the same windows, against llama-imatrix's, and given to both quantisers.
    "$LS" --log-level warn imatrix "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" -f "$TEXT" -c "$CTX" --chunks 16 \
      --host-threads "$THREADS" -o "$WORK/ours-imatrix-smol.gguf" >"$WORK/oi.txt" 2>&1 ||
      { tail -5 "$WORK/oi.txt" >&2; exit 1; }
    echo
    imatrix_diff "$WORK/ours-imatrix-smol.gguf" "$WORK/imatrix-smol.gguf"
    quality "SmolLM2-135M-Instruct, with layerstream's importance matrix (16 windows of $CTX tokens)" \
      "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" "--allow-requantize --imatrix $WORK/ours-imatrix-smol.gguf" \
      "--allow-requantize --imatrix $WORK/ours-imatrix-smol.gguf" yes
  fi
  rm -f "$WORK/f16.gguf"
fi

if [ "$SPEED_SIZE" != 0 ]; then
  "$LS" --log-level warn example-model "$WORK/big.gguf" --size "$SPEED_SIZE" --dtype f16 --align 32 >/dev/null
  echo
  echo "### Speed: $(du -h "$WORK/big.gguf" | cut -f1) F16 example model to Q4_K_M, $THREADS threads (input read once into the page cache before each)"
  echo
  echo "| tool | wall s | CPU s (user + sys) | peak RSS MiB | output |"
  echo "|---|---|---|---|---|"
  for tool in layerstream llama-quantize; do
    cat "$WORK/big.gguf" >/dev/null
    if [ $tool = layerstream ]; then
      cmd=("$LS" --log-level warn quantize "$WORK/big.gguf" "$WORK/big-q.gguf" --type Q4_K_M --align 32 --threads "$THREADS")
    else
      cmd=("$PEER/llama-quantize" "$WORK/big.gguf" "$WORK/big-q.gguf" Q4_K_M "$THREADS")
    fi
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/time.txt" "${cmd[@]}" >"$WORK/s.txt" 2>&1 || { tail -5 "$WORK/s.txt" >&2; exit 1; }
    read -r wall user sys rss <"$WORK/time.txt"
    echo "| $tool | $wall | $(python3 -c "print('%.1f' % ($user + $sys))") | $((rss / 1024)) | $(du -h "$WORK/big-q.gguf" | cut -f1) |"
    rm -f "$WORK/big-q.gguf"
  done
fi
