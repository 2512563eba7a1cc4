#!/usr/bin/env bash
# Reads one 2 GiB file with fio (io_uring, O_DIRECT, 1 MiB blocks, iodepth 16)
# and with layerstream's io_uring path (1 MiB chunks, qd 16) in the same run,
# and prints both GB/s, the ratio, and our CPU seconds per GiB.
#
# Usage: bench/io/io_vs_fio.sh [BENCH_BINARY] [FILE]
#   BENCH_BINARY  default build-io/bench/io/bench_io
#   FILE          default $TMPDIR/layerstream-io-2g.bin (created when missing)
# Needs fio and jq. Each tool runs 3 times, alternating; medians are reported.
set -euo pipefail
BENCH=${1:-build-io/bench/io/bench_io}
FILE=${2:-${TMPDIR:-/tmp}/layerstream-io-2g.bin}
BYTES=$((2 * 1024 * 1024 * 1024))
RUNS=${RUNS:-3}
command -v fio >/dev/null || { echo "fio not found" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq not found" >&2; exit 1; }
[[ -x $BENCH ]] || { echo "bench binary $BENCH not found (build target bench_io)" >&2; exit 1; }

drop_caches() {
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
    echo "  (page cache dropped)"
  else
    echo "  (could not drop the page cache: not root; O_DIRECT reads bypass it anyway)"
  fi
}

# The bench creates the file (incompressible data) when missing or of another size.
"$BENCH" --file="$FILE" --bytes=$BYTES --benchmark_filter=NONE >/dev/null 2>&1 || true
[[ $(stat -c %s "$FILE") -eq $BYTES ]] || { echo "could not create $FILE" >&2; exit 1; }

fio_bw=()
our_bw=()
our_cpu=()
for i in $(seq "$RUNS"); do
  echo "run $i/$RUNS: fio"
  drop_caches
  out=$(fio --name=r --filename="$FILE" --ioengine=io_uring --direct=1 --rw=read --bs=1M --iodepth=16 \
            --readonly --output-format=json)
  fio_bw+=("$(jq '.jobs[0].read.bw_bytes' <<<"$out")")
  echo "run $i/$RUNS: layerstream io_uring"
  drop_caches
  out=$("$BENCH" --file="$FILE" --bytes=$BYTES --benchmark_filter='read/uring/chunk_kib:1024/qd:16/' \
            --benchmark_min_time=0 --benchmark_format=json 2>/dev/null)
  our_bw+=("$(jq '.benchmarks[0].bytes_per_second' <<<"$out")")
  our_cpu+=("$(jq '.benchmarks[0].cpu_s_per_GiB' <<<"$out")")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
f=$(median "${fio_bw[@]}")
o=$(median "${our_bw[@]}")
c=$(median "${our_cpu[@]}")
awk -v f="$f" -v o="$o" -v c="$c" -v fa="${fio_bw[*]}" -v oa="${our_bw[*]}" 'BEGIN {
  printf "file: 2 GiB, sequential, 1 MiB blocks, depth 16, O_DIRECT\n";
  printf "fio io_uring:         %.3f GB/s (median; runs in B/s: %s)\n", f / 1e9, fa;
  printf "layerstream io_uring: %.3f GB/s (median; runs in B/s: %s)\n", o / 1e9, oa;
  printf "ratio ours/fio:       %.3f (must be >= 0.90)\n", o / f;
  gibps = o / 1073741824;
  printf "our CPU:              %.4f s per GiB = %.1f%% of one core at %.3f GiB/s (must be < 15%%)\n", c, 100 * c * gibps, gibps;
}'
