# Sourced by bench/speculative-identity.sh and bench/speculative-draft-length.sh:
# the tools, the folders, and same-vocabulary drafts made by requantising.
# Env: BUILD (build/ci), MODELS (~/.cache/layerstream/models), WORK (scratch
#   folder for drafts and example models, default /tmp/layerstream-spec),
#   OUT (JSON reports, default WORK), THREADS (2).
BUILD=${BUILD:-build/ci}
MODELS=${MODELS:-$HOME/.cache/layerstream/models}
WORK=${WORK:-/tmp/layerstream-spec}
OUT=${OUT:-$WORK}
THREADS=${THREADS:-2}
LS=$BUILD/bin/layerstream
BENCH=$BUILD/bench/speculative/bench_speculative
for f in "$LS" "$BENCH"; do
  [[ -x $f ]] || { echo "no $f: cmake --build $BUILD --target layerstream_cli bench_speculative" >&2; exit 1; }
done
mkdir -p "$WORK" "$OUT"

# need_model FILE: stops the script when a real model is missing.
need_model() {
  [[ -f $1 ]] || { echo "no $1: run bench/peer/fetch-models.sh" >&2; exit 1; }
}

# draft_of MODEL: the path of MODEL requantised to Q4_0 (made once, in WORK).
draft_of() {
  local d
  d=$WORK/$(basename "${1%.gguf}").draft-q4_0.gguf
  [[ -f $d ]] || "$LS" quantize "$1" "$d" --type Q4_0 --allow-requantize >"$WORK/quantize.log" 2>&1 ||
    { tail -3 "$WORK/quantize.log" >&2; exit 1; }
  echo "$d"
}
