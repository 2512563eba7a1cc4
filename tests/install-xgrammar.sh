#!/usr/bin/env bash
# Fetches xgrammar's C++ core (Apache-2.0; the engine behind structured output,
# runtime/grammar) and builds it once, as a static library, into DIR:
#   DIR/include/xgrammar/*.h, DIR/include/dlpack/, DIR/lib/libxgrammar.a,
#   DIR/LICENSE, DIR/NOTICE, DIR/VERSION (the pin it was built from).
# The source is the pinned release's source distribution on PyPI (checked
# against its SHA-256); only the C++ library is built (no Python bindings, no
# link-time optimisation, so any compiler of the build can link it), through
# ccache when present. A DIR that already holds the pinned build is kept.
# The project's CMake finds DIR (LAYERSTREAM_XGRAMMAR_ROOT, default below);
# without it the build goes on without structured output.
# Usage: tests/install-xgrammar.sh [DIR]   (default: ~/.cache/layerstream/xgrammar)
# tests/run.sh (CI) runs it before configuring. JOBS sets the build's parallelism.
set -euo pipefail
VERSION=0.2.8
SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
DIR=${1:-${LAYERSTREAM_XGRAMMAR_ROOT:-$HOME/.cache/layerstream/xgrammar}}
PIN="xgrammar $VERSION sha256:$SHA256"
if [ -f "$DIR/VERSION" ] && [ "$(cat "$DIR/VERSION")" = "$PIN" ] && [ -f "$DIR/lib/libxgrammar.a" ]; then
  echo "$DIR"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetching the xgrammar $VERSION source distribution ..." >&2
# --no-binary for xgrammar alone: its build backend comes as wheels (pip reads
# the sdist's metadata with it); nothing is built or installed here.
python3 -m pip download -q --no-deps --no-binary xgrammar -d "$work/dl" "xgrammar==$VERSION"
sdist="$work/dl/xgrammar-$VERSION.tar.gz"
got=$(sha256sum "$sdist" | awk '{print $1}')
if [ "$got" != "$SHA256" ]; then
  echo "xgrammar-$VERSION.tar.gz: SHA-256 $got does not match the pinned $SHA256" >&2
  exit 1
fi
mkdir -p "$work/src" "$work/build"
tar -xzf "$sdist" -C "$work/src" --strip-components=1

# The sdist's cmake/config.cmake turns the Python bindings on; a config.cmake
# in the build folder is read first and keeps to the C++ core.
cat > "$work/build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Its CMakeLists adds -flto=auto -Werror: LTO objects would tie the archive to
# this compiler (the sanitizer builds link it with clang), and a newer
# compiler's new warning must not fail the build. Flags given here come last.
cmake -S "$work/src" -B "$work/build" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" \
  -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
echo "building xgrammar $VERSION (C++ core, static) ..." >&2
# Paths relative to the scratch folder, so ccache hits whatever mktemp named it.
CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1 cmake --build "$work/build" -j "${JOBS:-$(nproc)}" >/dev/null
cmake --install "$work/build" >/dev/null
test -f "$work/prefix/lib/libxgrammar.a" || { echo "xgrammar: the build installed no lib/libxgrammar.a" >&2; exit 1; }
cp "$work/src/LICENSE" "$work/src/NOTICE" "$work/prefix/"
echo "$PIN" > "$work/prefix/VERSION"
mkdir -p "$(dirname "$DIR")"
rm -rf "$DIR"
mv "$work/prefix" "$DIR"
echo "$DIR"
