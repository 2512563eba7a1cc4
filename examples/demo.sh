#!/usr/bin/env bash
# The main job in one command: build layerstream, make the example model,
# and run it on a memory budget smaller than the model, streaming layers
# from disk and pinned RAM. Prints generated text and a summary.
#
#   examples/demo.sh                 # 768 MiB model, 256 MiB "VRAM" budget, 128 MiB pinned RAM
#   SIZE=4GiB VRAM=1GiB examples/demo.sh
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
"$BIN" run "$MODEL" -p "Once upon a time" -n 24 --vram "$VRAM" --ram "$RAM" --ctx 256 --temp 0
