#!/usr/bin/env bash
# Fetches llama.cpp's source as the llama-cpp-python source distribution on
# PyPI carries it (folder vendor/llama.cpp), unpacked into DIR/src once, and
# prints the path of that llama.cpp folder. With VERSION, that release of
# llama-cpp-python is fetched (a DIR holding another version is refetched);
# without, the newest one (whatever DIR holds is kept).
# Used by bench/peer/llamacpp.sh (the peer's tools) and
# bench/peer/fetch-vocabs.sh (its tokenizer test vectors).
# Usage: bench/peer/llamacpp-source.sh DIR [VERSION]
set -euo pipefail
DIR=$1
VERSION=${2:-}
have=""
if [ -f "$DIR/src/PKG-INFO" ]; then have=$(sed -n 's/^Version: //p' "$DIR/src/PKG-INFO" | head -1); fi
if [ ! -d "$DIR/src/vendor/llama.cpp" ] || { [ -n "$VERSION" ] && [ "$have" != "$VERSION" ]; }; then
  dl=$(mktemp -d)
  trap 'rm -rf "$dl"' EXIT
  spec=llama-cpp-python${VERSION:+==$VERSION}
  echo "fetching the $spec source distribution ..." >&2
  python3 -m pip download -q --no-deps --no-binary :all: -d "$dl" "$spec"
  mkdir -p "$dl/x"
  tar -xzf "$dl"/llama_cpp_python-*.tar.gz -C "$dl/x" --strip-components=1
  mkdir -p "$DIR"
  rm -rf "$DIR/src"
  mv "$dl/x" "$DIR/src"
fi
echo "$DIR/src/vendor/llama.cpp"
