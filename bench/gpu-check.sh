#!/usr/bin/env bash
# The GPU check: the one command run on a lent GPU machine (run step). It
# builds nothing and installs nothing: it runs the binaries that
# bench/gpu/prepare.sh built here and carried in gpu-carry/ (see docs/GPU_CHECK.md
# for the exact device call):
#   1. the machine: nvidia-smi, the carried binaries' libraries (ldd; cuBLAS
#      is looked up in the machine's CUDA install), then the gate: the runtime
#      must see a CUDA device, else "FAIL: no CUDA device: <reason>", exit 2;
#   2. the GPU test suite (every gpu-labelled test binary); a skipped test is
#      a failure here;
#   3. cuda_cpu_agreement (every op and type, CUDA vs CPU kernels);
#   4. bench_cuda (H2D by chunk, D2D, matmul of every type vs memory bandwidth);
#   5. layerstream probe --quick: the box profile of this GPU box (link, disk,
#      device matmul rates, and the host site: RAM bandwidth and CPU matmul
#      rates; docs/BOX_PROFILE.md) -> probe.json; with it, the prediction for
#      a 70B-class Q4_K_M layer stack on a 24 GiB budget (bench --shape, in the
#      log and traces.tar.gz); then layerstream bench (serial/overlap/host/
#      planned/uvm, one runner at a time; hybrid execution: `host` computes the
#      streamed blocks on the CPU, `planned` picks each block's site) on a 1 GiB
#      example model with a 384 MiB --vram budget, with the profile's
#      prediction next to the measured medians.
# Rehearsals only (bench/gpu/dry-run.sh, or by hand on a build machine):
# LS_GPU_CHECK_BACKEND=host runs step 5 on the host backend and
# LS_GPU_CHECK_MODEL_SIZE (default 1GiB) sizes its example model.
# Hard deadline: LS_GPU_CHECK_DEADLINE_S (default 450 s = 7.5 min) for the
# whole run; every step runs under `timeout` with a limit cut to the time
# left (a step with under 5 s left is not started and counts as failed).
# Results go to $OUT as they are made (at most 8 files, the device tool's cap):
#   gpu-check.log  summary.json  agreement.json  bench-cuda.json  probe.json
#   stream-decode.json  stream-prefill.json  traces.tar.gz (also predict-70b-*.json)
# At the end, bench/gpu/summarize.py prints the figures as Markdown tables
# (when python3 is there). Exit status: 0 when every step passed; 2 no CUDA device; 3 a carried binary
# cannot load; 1 any other failure (summary.json lists them).
set -uo pipefail
START=$SECONDS
DEADLINE_S=${LS_GPU_CHECK_DEADLINE_S:-450}
RESERVE_S=10  # kept back for the summary and the traces tarball
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=${LS_GPU_CARRY:-$ROOT/gpu-carry}
OUT=${OUT:-$ROOT/out/gpu-check}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/layerstream-gpu-check.XXXXXX")
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu-check.log") 2>&1
trap 'rm -rf "$WORK"' EXIT

steps_json=()  # one JSON object per step
failures=()
gate="not reached"

json_str() {  # JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/ }
  s=${s//$'\t'/ }
  printf '"%s"' "$s"
}

write_summary() {
  local final=$1 steps
  steps=$(IFS=,; echo "${steps_json[*]}")
  local fl="" f
  for f in "${failures[@]}"; do fl+="${fl:+,}$(json_str "$f")"; done
  cat > "$OUT/summary.json.tmp" <<JSON
{"check": "layerstream bench/gpu-check.sh", "final": $final, "elapsed_s": $((SECONDS - START)),
 "deadline_s": $DEADLINE_S, "device_gate": $(json_str "$gate"),
 "carry": $(json_str "$(head -2 "$CARRY/MANIFEST.txt" 2>/dev/null | tr '\n' ' ')"),
 "steps": [${steps}],
 "failures": [${fl}]}
JSON
  mv "$OUT/summary.json.tmp" "$OUT/summary.json"
}

finish() {  # finish EXIT_CODE
  write_summary true
  if [ "$1" -le 1 ] && [ "$gate" != "not reached" ]; then
    echo "== results (bench/gpu/summarize.py)"
    if command -v python3 >/dev/null 2>&1; then
      timeout 20 python3 "$ROOT/bench/gpu/summarize.py" "$OUT" || echo "summarize: failed"
    else
      echo "python3 not found: read the JSON files under \$OUT"
    fi
  fi
  echo "== done in $((SECONDS - START))s (deadline ${DEADLINE_S}s); results under $OUT"
  if ((${#failures[@]})); then
    echo "FAILED steps:"
    printf '  %s\n' "${failures[@]}"
  fi
  exit "$1"
}

left() { echo $((DEADLINE_S - (SECONDS - START))); }

# run_step NAME MAX_S CMD... : CMD under timeout min(MAX_S, time left - reserve).
# Sets STEP_RC; records the step; a failure is added to `failures`.
run_step() {
  local name=$1 max=$2
  shift 2
  local avail=$(($(left) - RESERVE_S))
  local lim=$((max < avail ? max : avail))
  if ((lim < 5)); then
    echo "== $name: not started, the ${DEADLINE_S}s deadline is reached"
    failures+=("$name: not started (deadline)")
    steps_json+=("{\"step\": $(json_str "$name"), \"status\": \"not-started\", \"rc\": null, \"seconds\": 0}")
    STEP_RC=124
    write_summary false
    return 0
  fi
  echo "== $name (limit ${lim}s): $*"
  local t0=$SECONDS status
  timeout -k 5 "$lim" "$@"
  STEP_RC=$?
  case $STEP_RC in
    0) status=ok ;;
    124 | 137) status=timeout ;;
    *) status=failed ;;
  esac
  [ "$status" = ok ] || failures+=("$name: $status (rc $STEP_RC)")
  steps_json+=("{\"step\": $(json_str "$name"), \"status\": \"$status\", \"rc\": $STEP_RC, \"seconds\": $((SECONDS - t0))}")
  write_summary false
  return 0
}

echo "== layerstream GPU check: $(date -u +%FT%TZ), deadline ${DEADLINE_S}s, carry $CARRY"
if [ ! -f "$CARRY/MANIFEST.txt" ]; then
  failures+=("carry: $CARRY/MANIFEST.txt missing (run bench/gpu/prepare.sh here and carry gpu-carry)")
  echo "FAIL: no carried build at $CARRY"
  finish 3
fi
head -3 "$CARRY/MANIFEST.txt"
BIN=$CARRY/bin
chmod +x "$BIN"/* 2>/dev/null || true  # in case the copy to this machine dropped the mode bits

# ---- 1. the machine ---------------------------------------------------------
echo "== machine: $(uname -srm), $(nproc) cores"
# nvidia-smi is information only: the gate below is the runtime's own view.
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.max.sm,clocks.max.mem --format=csv ||
    echo "nvidia-smi: failed (rc $?)"
else
  echo "nvidia-smi: not on PATH"
fi

# cuBLAS / cuBLASLt come from the machine: the loader's cache, then the usual
# CUDA install folders, then the Python wheels' copies.
cublas_dir=""
if ! timeout 10 ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.13 '; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
    /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/cuda/lib /usr/local/cuda-13*/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/libcublas.so.13" ] && { cublas_dir=$d; break; }
  done
  if [ -z "$cublas_dir" ]; then
    f=$(timeout 20 find /opt /usr/local /usr/lib /root -maxdepth 11 -name 'libcublas.so.13' 2>/dev/null | head -1)
    [ -n "$f" ] && cublas_dir=$(dirname "$f")
  fi
fi
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do [ -d "$d" ] && cublas_dir+="${cublas_dir:+:}$d"; done
export LD_LIBRARY_PATH="$CARRY/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# Every carried binary must load: ldd reports "not found" for a missing
# library or a missing symbol version (an older libstdc++ than this build's:
# then the carried lib-runtime/ is put first and the check repeats).
missing_libs() {
  missing=()
  local b line
  for b in "$BIN"/*; do
    while read -r line; do missing+=("$(basename "$b"): $line"); done < <(timeout 10 ldd "$b" 2>&1 | grep 'not found')
  done
}
missing_libs
if ((${#missing[@]})) && printf '%s\n' "${missing[@]}" | grep -q 'version .* not found' && [ -d "$CARRY/lib-runtime" ]; then
  printf 'ldd: %s\n' "${missing[@]}"
  echo "libraries: this machine's C++ runtime is older than the build's; using the carried lib-runtime/"
  export LD_LIBRARY_PATH="$CARRY/lib-runtime:$LD_LIBRARY_PATH"
  missing_libs
fi
if ((${#missing[@]})); then
  printf 'FAIL: a carried binary cannot load: %s\n' "${missing[@]}"
  failures+=("libraries: ${missing[*]}")
  finish 3
fi
echo "libraries: every carried binary resolves (ldd)"

run_step version 20 "$BIN/layerstream" version
gate=$(timeout 20 "$BIN/layerstream" version 2>&1 | sed -n 's/^cuda device: *//p')
# LS_GPU_CHECK_REHEARSE=1 (bench/gpu/dry-run.sh only) goes on past a failed
# gate, to rehearse the later steps, their limits and the skip check on a
# machine without a GPU; the run still fails.
if [ "$gate" != "available" ] && [ "${LS_GPU_CHECK_REHEARSE:-0}" = 1 ]; then
  echo "REHEARSAL: ${gate}; going on past the gate (this run fails whatever happens)"
  failures+=("device: ${gate:-no CUDA device} (rehearsal)")
elif [ "$gate" != "available" ]; then
  echo "FAIL: ${gate:-no CUDA device: layerstream version printed no device line}"
  failures+=("device: ${gate:-no CUDA device}")
  finish 2
fi
echo "device: available"

# ---- 2. the GPU test suite ----------------------------------------------------
# Each binary's gtest summary must show tests passed, none failed, none skipped.
tests_total=0
while read -r t; do
  [ -n "$t" ] || continue
  run_step "test:$t" 150 bash -o pipefail -c "'$BIN/$t' --gtest_color=no 2>&1 | tee '$WORK/$t.txt'"
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$WORK/$t.txt" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$WORK/$t.txt" | tail -1)
  echo "-- $t: passed ${passed:-0}, skipped ${skipped:-0}, rc $STEP_RC"
  if [ "${skipped:-0}" != 0 ]; then failures+=("test:$t: ${skipped} GPU test(s) skipped on a GPU machine"); fi
  if [ "${passed:-0}" = 0 ] && [ "$STEP_RC" = 0 ]; then failures+=("test:$t: no test passed"); fi
  tests_total=$((tests_total + ${passed:-0}))
done < "$CARRY/tests.txt"
echo "-- GPU tests passed in total: $tests_total"
write_summary false

# ---- 3. CUDA vs CPU kernels ---------------------------------------------------
run_step agreement 60 "$BIN/cuda_cpu_agreement" --json "$OUT/agreement.json"

# ---- 4. device benchmarks -----------------------------------------------------
run_step bench-cuda 150 "$BIN/bench_cuda" --benchmark_min_time=0.03 --benchmark_counters_tabular=true \
  --benchmark_out="$OUT/bench-cuda.json" --benchmark_out_format=json

# ---- 5. the box and layer streaming -------------------------------------------
MODEL=$WORK/example-1g.gguf
BACKEND=${LS_GPU_CHECK_BACKEND:-cuda}
run_step probe 60 "$BIN/layerstream" probe --backend "$BACKEND" --quick --scratch-size 256MiB --types q8_0,q4_k,q6_k \
  --host-types q8_0,q4_k,q6_k --json "$OUT/probe.json"
if [ -s "$OUT/probe.json" ]; then
  for mode in decode prefill; do
    run_step "predict-70b-$mode" 20 "$BIN/layerstream" bench --shape llama-70b-q4_k_m --box "$OUT/probe.json" \
      --vram 24GiB --ram 64GiB --mode "$mode" --prompt-len 512 --strategies overlap,host,serial,planned \
      --json "$WORK/predict-70b-$mode.json"
  done
fi
run_step example-model 90 "$BIN/layerstream" example-model "$MODEL" --size "${LS_GPU_CHECK_MODEL_SIZE:-1GiB}" --dtype q8_0 --threads 8
if [ -s "$MODEL" ]; then
  box=()
  [ -s "$OUT/probe.json" ] && box=(--box "$OUT/probe.json")
  run_step stream-decode 100 "$BIN/layerstream" bench "$MODEL" --backend "$BACKEND" --vram 384MiB --ram 1GiB \
    --mode decode --ctx 256 --passes 5 --warmup 2 --strategies serial,overlap,host,planned,uvm --blocks "${box[@]}" \
    --json "$OUT/stream-decode.json" --trace "$WORK/trace-decode.json" --report "$WORK/report-decode.html"
  run_step stream-prefill 100 "$BIN/layerstream" bench "$MODEL" --backend "$BACKEND" --vram 384MiB --ram 1GiB \
    --mode prefill --prompt-len 256 --passes 3 --warmup 1 --strategies serial,overlap,host,planned,uvm --blocks "${box[@]}" \
    --json "$OUT/stream-prefill.json" --trace "$WORK/trace-prefill.json" --report "$WORK/report-prefill.html"
  rm -f "$MODEL"
fi
keep=$(cd "$WORK" && ls trace-*.json report-*.html predict-*.json 2>/dev/null | tr '\n' ' ')
if [ -n "$keep" ]; then
  # shellcheck disable=SC2086  # the names are ours, no spaces
  (cd "$WORK" && timeout 10 tar -czf "$OUT/traces.tar.gz" $keep) || true
fi

if ((${#failures[@]})); then finish 1; fi
finish 0
