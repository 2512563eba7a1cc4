#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer test vectors: the vocabulary-only files
# models/ggml-vocab-*.gguf with their .inp (test strings) and .out (expected
# token ids) files, as llama.cpp's test-tokenizer-0 uses them, from the
# llama.cpp source in llama-cpp-python's sdist (a pinned release, so the
# vectors do not change under the tests). Copies them into DIR once.
# Usage: bench/peer/fetch-vocabs.sh [DIR]   (default: ~/.cache/layerstream/vocabs)
# tests/run.sh (CI) runs it and sets LAYERSTREAM_VOCABS for
# tests/tokenizer/vocab_vectors_test.cpp; without the variable that suite skips.
set -euo pipefail
DIR=${1:-${LAYERSTREAM_VOCABS:-$HOME/.cache/layerstream/vocabs}}
PIN=0.3.36
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -f "$DIR/SOURCE" ] && [ "$(cat "$DIR/SOURCE")" = "llama-cpp-python $PIN" ]; then
  echo "$DIR"
  exit 0
fi
# Reuse the peer's source when it is the pinned release (bench/peer/llamacpp.sh).
peer=${LAYERSTREAM_PEER:-$HOME/.cache/layerstream/llama.cpp}
tmp=""
if [ -f "$peer/src/PKG-INFO" ] && grep -qx "Version: $PIN" "$peer/src/PKG-INFO" && [ -d "$peer/src/vendor/llama.cpp/models" ]; then
  src=$peer/src/vendor/llama.cpp
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  src=$("$HERE/llamacpp-source.sh" "$tmp" "$PIN")
fi
mkdir -p "$DIR"
rm -f "$DIR"/ggml-vocab-* "$DIR/SOURCE"
cp "$src"/models/ggml-vocab-*.gguf* "$DIR"/
echo "llama-cpp-python $PIN" > "$DIR/SOURCE"
echo "$DIR"
