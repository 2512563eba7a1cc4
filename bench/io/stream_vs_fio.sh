#!/usr/bin/env bash
# Streams a model from disk through the staging buffers (`bench --staging
# always --ram 0`: device memory only copies reach, as on a GPU) and reads the
# same file with fio (io_uring, O_DIRECT, 4 MiB blocks, iodepth 16) in the same
# run, alternating, page cache dropped before each; prints the median disk
# GB/s of both (the bench's `disk_gbps`: bytes read / time the disk was busy),
# the ratio, and the most reads the bench had in flight.
#
# Usage: bench/io/stream_vs_fio.sh [LAYERSTREAM] [MODEL] [VRAM]
#   LAYERSTREAM  default build/dev/bin/layerstream
#   MODEL        default /tmp/m768.gguf (made with `layerstream example-model
#                /tmp/m768.gguf --size 768MiB --dtype q8_0` when missing)
#   VRAM         default 320MiB (most layers stream)
# Needs fio and jq; root to drop the page cache (O_DIRECT bypasses it anyway).
set -euo pipefail
LS=${1:-build/dev/bin/layerstream}
MODEL=${2:-/tmp/m768.gguf}
VRAM=${3:-320MiB}
RUNS=${RUNS:-3}
OUT=${OUT_DIR:-$(mktemp -d)}
command -v fio >/dev/null || { echo "fio not found" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq not found" >&2; exit 1; }
[[ -x $LS ]] || { echo "$LS not found (build target layerstream_cli)" >&2; exit 1; }
[[ -f $MODEL ]] || "$LS" example-model "$MODEL" --size 768MiB --dtype q8_0

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }

fio_bw=(); our_bw=(); inflight=()
for i in $(seq "$RUNS"); do
  drop_caches
  out=$(fio --name=r --filename="$MODEL" --ioengine=io_uring --direct=1 --rw=read --bs=4M --iodepth=16 \
            --readonly --output-format=json)
  fio_bw+=("$(jq '.jobs[0].read.bw_bytes / 1e9' <<<"$out")")
  drop_caches
  "$LS" bench "$MODEL" --vram "$VRAM" --ram 0 --staging always --strategies planned --passes 3 --warmup 1 \
        --json "$OUT/bench$i.json" --trace "$OUT/trace$i.json" >/dev/null 2>&1
  our_bw+=("$(jq '.disk_gbps' "$OUT/bench$i.json")")
  inflight+=("$(jq '.strategies[0].max_reads_in_flight' "$OUT/bench$i.json")")
  echo "run $i/$RUNS: fio ${fio_bw[-1]} GB/s, bench disk_gbps ${our_bw[-1]} GB/s, ${inflight[-1]} reads in flight"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
f=$(median "${fio_bw[@]}"); o=$(median "${our_bw[@]}"); q=$(median "${inflight[@]}")
awk -v f="$f" -v o="$o" -v q="$q" -v out="$OUT" 'BEGIN {
  printf "fio io_uring 4 MiB qd 16:        %.3f GB/s (median)\n", f;
  printf "bench --staging always disk_gbps: %.3f GB/s (median)\n", o;
  printf "ratio bench/fio:                  %.3f (must be >= 0.90)\n", o / f;
  printf "reads in flight (median of max):  %d (must be >= 16); JSON and traces in %s\n", q, out;
}'
