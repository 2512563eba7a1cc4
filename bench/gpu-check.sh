#!/usr/bin/env bash
# The one script to run on a lent GPU machine (see bench/RESULTS.md for what it
# showed): builds with CUDA for the local card, prints the device, runs the
# gpu-labelled tests and the benchmarks, and writes logs under $OUT.
# Budget: under 8 minutes on a 16-core box with a warm apt cache.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
deadline=$((SECONDS + 460))
left() { echo $((deadline - SECONDS)); }

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv || true

echo "== deps + build (CUDA, native arch)"
tests/install-deps.sh
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAYERSTREAM_CUDA=ON \
  -DLAYERSTREAM_CUDA_ARCHS=native -DLAYERSTREAM_BUILD_BENCH=ON || exit 1
cmake --build build/gpu -j "$(nproc)" || exit 1
BIN=build/gpu/bin/layerstream

echo "== gpu tests"
timeout "$(left)" ctest --test-dir build/gpu -L gpu --output-on-failure -j 4 | tee "$OUT/gpu-tests.txt"

echo "== device + kernel benchmarks"
for b in build/gpu/bench/*/bench_*; do
  [ -x "$b" ] && [ -f "$b" ] || continue
  timeout 90 "$b" --benchmark_min_time=0.2 --benchmark_format=console \
    --benchmark_out="$OUT/$(basename "$b").json" --benchmark_out_format=json || true
done

if "$BIN" --help 2>/dev/null | grep -q bench; then
  echo "== probe + overlap benchmark on the example model"
  # Results go into one tarball: $OUT brings back at most 8 files.
  B=$(mktemp -d /tmp/layerstream-gpu-check.XXXXXX)
  MODEL=$B/example-4g.gguf
  timeout 120 "$BIN" example-model "$MODEL" --size 4GiB --dtype q8_0 || true
  timeout 90 "$BIN" probe --backend cuda --disk "$MODEL" --disk-bytes 2GiB --json "$B/probe.json" | tee "$B/probe.txt" || true
  box=(); [ -s "$B/probe.json" ] && box=(--box "$B/probe.json")
  for mode in decode prefill; do
    timeout "$(( $(left) > 40 ? $(left) / 2 : 40 ))" "$BIN" bench "$MODEL" --backend cuda --vram 1GiB --ram 2GiB \
      --mode "$mode" --prompt-len 512 --passes 5 --warmup 2 "${box[@]}" --json "$B/bench-$mode.json" \
      --trace "$B/trace-$mode.json" --report "$B/report-$mode.html" | tee "$B/bench-$mode.txt" || true
  done
  rm -f "$MODEL"
  tar -czf "$OUT/bench-results.tar.gz" -C "$B" . || true
fi
echo "== done in ${SECONDS}s; results under $OUT"
