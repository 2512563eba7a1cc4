#!/usr/bin/env bash
# File interop with llama.cpp (issue 13, must-show 2; not part of CI): makes
# a 32-aligned F16 example model, quantises it with llama.cpp's own
# llama-quantize to each type layerstream reads (Q5_0, Q5_1, Q2_K, Q3_K_S/M,
# Q4_K_S/M, Q5_K_S/M, Q6_K, IQ4_NL, IQ4_XS), and checks that layerstream
# inspects and runs every file and that its logits match the float64 forward
# pass of the file's decoded weights (test_llama_runner's Interop test, which
# decodes with the tests' own spec decoders). Then the other way: files of
# each type written by layerstream's own encoder, decoded by llama.cpp
# (llama-quantize --allow-requantize to F32), must hold exactly the values
# layerstream decodes. Prints one line per file.
# Usage: bench/peer/interop.sh [BUILD_DIR]   (default build/dev; needs the
# layerstream_cli and test_llama_runner targets built there)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/dev}
BIN=$BUILD/bin/layerstream
TEST=$BUILD/tests/llama/test_llama_runner
[ -x "$BIN" ] && [ -x "$TEST" ] || { echo "build layerstream_cli and test_llama_runner in $BUILD first" >&2; exit 1; }
PEER=$(bench/peer/llamacpp.sh)
QUANTIZE=$PEER/llama-quantize
W=$(mktemp -d /tmp/layerstream-interop.XXXXXX)
trap 'rm -rf "$W"' EXIT

# Widths multiples of 256 so every K type is used (llama-quantize falls back
# from 256-element blocks for other rows); llama-quantize writes data at 32 bytes.
"$BIN" example-model "$W/f16.gguf" --layers 4 --hidden 256 --ffn 768 --heads 4 --kv-heads 2 --vocab 512 \
  --dtype f16 --align 32 --seed 7 >/dev/null

TYPES=(Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS)
files=()
printf '%-8s %-7s %-6s %s\n' type inspect run "tensor types (llama-quantize's choice)"
for t in "${TYPES[@]}"; do
  f="$W/$t.gguf"
  if ! "$QUANTIZE" "$W/f16.gguf" "$f" "$t" >"$W/$t.quantize.log" 2>&1; then
    echo "$t: llama-quantize failed (see below)"; tail -5 "$W/$t.quantize.log"; continue
  fi
  ins=fail; run=fail
  if "$BIN" inspect "$f" >"$W/$t.inspect.txt" 2>&1; then ins=ok; fi
  if "$BIN" run "$f" --tokens 1,15,27,300 -n 4 --temp 0 --backend host >"$W/$t.run.txt" 2>&1; then run=ok; fi
  types=$(sed -n 's/^tensor types: *//p' "$W/$t.inspect.txt")
  printf '%-8s %-7s %-6s %s\n' "$t" "$ins" "$run" "$types"
  [ "$run" = ok ] || tail -3 "$W/$t.run.txt"
  files+=("$f")
done

echo
echo "logits against the float64 forward pass (tolerance 2e-3 * (1 + max |logit|)):"
IFS=:; list="${files[*]}"; unset IFS
LAYERSTREAM_INTEROP_FILES="$list" "$TEST" --gtest_filter='Interop.*' 2>&1 |
  sed -n 's|^interop: '"$W"'/\(.*\)\.gguf: |\1: |p; /FAILED\|PASSED/p'

echo
echo "layerstream-encoded files decoded by llama.cpp (requantised to F32) against our decoding:"
OWN=(q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs q4_k_m q5_k_m q3_k_m)
pairs=()
for t in "${OWN[@]}"; do
  "$BIN" example-model "$W/own-$t.gguf" --layers 2 --hidden 256 --ffn 768 --heads 4 --kv-heads 2 --vocab 512 \
    --dtype "$t" --align 32 --seed 11 >/dev/null
  if "$QUANTIZE" --allow-requantize "$W/own-$t.gguf" "$W/own-$t.f32.gguf" F32 >"$W/own-$t.log" 2>&1; then
    pairs+=("$W/own-$t.gguf=$W/own-$t.f32.gguf")
  else
    echo "$t: llama-quantize could not read our file:"; tail -5 "$W/own-$t.log"
  fi
done
IFS=:; plist="${pairs[*]}"; unset IFS
LAYERSTREAM_INTEROP_PAIRS="$plist" "$TEST" --gtest_filter='Interop.LlamaCppDecodesOurFilesAsWeDo' 2>&1 |
  sed -n 's|^interop pair: '"$W"'/own-\(.*\)\.gguf: |\1: |p; /FAILED\|PASSED/p'
