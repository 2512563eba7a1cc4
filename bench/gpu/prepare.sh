#!/usr/bin/env bash
# Prepare step of the GPU check (runs HERE, on a build machine with nvcc and
# the Debian dependencies; no GPU needed). Builds for the lent H200 (sm_90)
# and assembles gpu-carry/ (ignored by git), the only built files the device
# call carries:
#   gpu-carry/bin/    layerstream, bench_cuda, cuda_cpu_agreement, every
#                     gpu-labelled test binary (build/<dir>/gpu-tests.txt)
#   gpu-carry/lib/    the shared libraries those need that are neither the
#                     C/C++ runtime nor CUDA's (spdlog, fmt, liburing, Google
#                     Benchmark, the CUDA runtime libcudart)
#   gpu-carry/lib-runtime/  libstdc++ and libgcc_s of this build, used there only
#                     if the machine's are too old
#   gpu-carry/tests.txt, MANIFEST.txt
# cuBLAS/cuBLASLt (hundreds of MiB) and the driver come from the GPU machine,
# whose CUDA 13.0 matches the nvcc 13.0 used here.
# Prints the carried size and fails if the carry plus the git working tree
# would exceed the device tool's 64 MiB.
#   bench/gpu/prepare.sh            (LS_GPU_BUILD_DIR=build/gpu-carry by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${LS_GPU_BUILD_DIR:-build/gpu-carry}
CARRY=$ROOT/gpu-carry
LIMIT_BYTES=$((64 * 1024 * 1024))
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1

echo "== configure $BUILD (CUDA, sm_90)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAYERSTREAM_CUDA=ON \
  -DLAYERSTREAM_CUDA_ARCHS=90 -DLAYERSTREAM_BUILD_TESTS=ON -DLAYERSTREAM_BUILD_BENCH=ON \
  -DLAYERSTREAM_BUILD_EXAMPLES=ON >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 1; }
mapfile -t tests < "$BUILD/gpu-tests.txt"
[ "${#tests[@]}" -gt 0 ] || { echo "prepare: no gpu-labelled tests in $BUILD/gpu-tests.txt" >&2; exit 1; }
targets=(layerstream_cli bench_cuda cuda_cpu_agreement)
for t in "${tests[@]}"; do targets+=("$(basename "$t")"); done

echo "== build ${targets[*]}"
cmake --build "$BUILD" -j "${LS_BUILD_JOBS:-2}" --target "${targets[@]}"

echo "== assemble $CARRY"
rm -rf "$CARRY"
mkdir -p "$CARRY/bin" "$CARRY/lib"
bins=("$BUILD/bin/layerstream" "$BUILD/bench/gpu/bench_cuda" "$BUILD/bench/gpu/cuda_cpu_agreement" "${tests[@]}")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "prepare: $b was not built" >&2; exit 1; }
  strip -o "$CARRY/bin/$(basename "$b")" "$b"
done
for t in "${tests[@]}"; do basename "$t"; done > "$CARRY/tests.txt"

# Shared libraries: the C/C++ runtime and CUDA's libraries that the GPU
# machine has stay behind (bench/gpu/lib-policy.sh); everything else is copied.
. bench/gpu/lib-policy.sh
for b in "$CARRY"/bin/*; do
  while read -r name path; do
    [ -n "$path" ] || { echo "prepare: $(basename "$b") needs $name, not found here" >&2; exit 1; }
    case "$(lib_class "$name")" in
      runtime|device-cuda) ;;
      *) [ -e "$CARRY/lib/$name" ] || cp -L "$path" "$CARRY/lib/$name" ;;
    esac
  done < <(ldd "$b" | awk '/=>/ { p = ($3 ~ /^\//) ? $3 : ""; print $1, p }')
done

# A fallback C++ runtime, used there only if the machine's libstdc++ is older
# than this build needs (gpu-check.sh retries with it when ldd reports a
# missing GLIBCXX/CXXABI version).
mkdir -p "$CARRY/lib-runtime"
for name in libstdc++.so.6 libgcc_s.so.1; do
  path=$(ldd "$CARRY/bin/layerstream" | awk -v n="$name" '$1 == n { print $3 }')
  [ -n "$path" ] && cp -L "$path" "$CARRY/lib-runtime/$name"
done

{
  echo "layerstream GPU carry, built $(date -u +%FT%TZ) on $(uname -n)"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), archs 90, CMAKE_BUILD_TYPE RelWithDebInfo (stripped)"
  echo "files:"
  (cd "$CARRY" && find bin lib lib-runtime -type f -printf '  %p %s\n' | sort)
} > "$CARRY/MANIFEST.txt"

carry_bytes=$(du -sb "$CARRY" | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$((carry_bytes + tree_bytes))
printf 'carried: gpu-carry %.1f MiB + git working tree %.1f MiB = %.1f MiB (limit 64 MiB)\n' \
  "$(echo "$carry_bytes / 1048576" | bc -l)" "$(echo "$tree_bytes / 1048576" | bc -l)" "$(echo "$total / 1048576" | bc -l)"
if [ "$total" -ge "$LIMIT_BYTES" ]; then
  echo "prepare: the carry would exceed the device tool's 64 MiB; carry fewer binaries" >&2
  exit 1
fi
echo "ready: device call = command 'bash bench/gpu-check.sh', carry [\"gpu-carry\"]"
