#!/usr/bin/env bash
# Builds llama.cpp's command-line tools (llama-quantize, llama-perplexity,
# llama-bench, llama-tokenize) from the llama-cpp-python source
# distribution on PyPI (folder vendor/llama.cpp), for side-by-side checks of
# speed, perplexity, tokenizer and file interop. The peer is built outside the
# tree and nothing of it goes into layerstream. Not part of CI.
# Usage: bench/peer/llamacpp.sh [DIR]   (default: ~/.cache/layerstream/llama.cpp)
# Prints the folder holding the binaries.
set -euo pipefail
DIR=${1:-${LAYERSTREAM_PEER:-$HOME/.cache/layerstream/llama.cpp}}
TOOLS=(llama-quantize llama-perplexity llama-bench llama-tokenize)
mkdir -p "$DIR"
SRC=$("$(dirname "$0")/llamacpp-source.sh" "$DIR")
if [ ! -x "$DIR/build/bin/llama-bench" ]; then
  echo "building ${TOOLS[*]} (CPU, native) ..." >&2
  cmake -S "$SRC" -B "$DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$DIR/build" -j "$(nproc)" --target "${TOOLS[@]}" >/dev/null
fi
echo "$DIR/build/bin"
