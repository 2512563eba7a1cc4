#!/usr/bin/env bash
# `layerstream run` decode tokens/s against `layerstream bench` decode on the
# same model, budget and threads (issue 14, must-show 2: run within 5% of
# bench). Rounds interleave the two (the order alternates each round); prints
# each round's figures, the medians and run / bench.
#
# What each side measures:
#   run:   Stats::decode_tokens_per_s = generated tokens after the first /
#          wall time of the decode calls (each LlamaRunner::decode call whole:
#          embedding, the pass, its synchronisation) plus sampling, text
#          decoding and the token callback, i.e. what a user of `run` sees.
#   bench: tokens / median pass time, the pass timed by the executor's events
#          (first layer's start to the head's end), --strategies resident;
#          also printed: tokens over the mean pass (a loaded machine's slow
#          passes count there, as they do in run's figure).
# Both decode one sequence from position ~0 to ~TOKENS (run: after a short
# prompt), so attention covers the same context. Also printed: run's wall
# time per decoded token over the mean pass time its own executor measured
# in the same run (the per-token overhead of run; the load cancels there).
#
# Usage: bench/peer/run-vs-bench.sh [--rounds N] [--tokens N] [--threads T] [--exact] MODEL.gguf
#   LAYERSTREAM=path/to/layerstream (default build/dev/bin/layerstream).
# Not part of CI: it wants a quiet machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=5
TOKENS=64
THREADS=2
EXACT=""
MODEL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --exact) EXACT="--exact"; shift ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) MODEL=$1; shift ;;
  esac
done
[ -n "$MODEL" ] || { echo "error: no model given (see --help)" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "error: $MODEL not found" >&2; exit 1; }
LS=${LAYERSTREAM:-$ROOT/build/dev/bin/layerstream}
[ -x "$LS" ] || { echo "error: $LS not found (build the layerstream_cli target or set LAYERSTREAM)" >&2; exit 1; }

exec python3 - "$LS" "$MODEL" "$ROUNDS" "$TOKENS" "$THREADS" "$EXACT" <<'EOF'
import json, os, statistics, subprocess, sys, tempfile

ls, model, rounds, tokens, threads, exact = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
vram = str(2 * os.path.getsize(model) + (512 << 20))
ctx = str(int(tokens) + 64)
common = ["--vram", vram, "--host-threads", threads, "--ctx", ctx] + ([exact] if exact else [])

def run_json(cmd):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        out = subprocess.run(cmd + ["--json", f.name], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} failed (exit {out.returncode}): "
                     f"{(out.stderr.strip() or 'no message').splitlines()[-1]}")
        return json.load(open(f.name))

bench_mean = []  # per bench run: tokens/s over the mean pass (one token per pass)
overheads = []  # per run: wall time per decoded token / the executor's mean pass time - 1

def run_side():
    # -n TOKENS + 1: the first generated token comes from the prefill, the
    # TOKENS after it from decode passes.
    j = run_json([ls, "run", model, "-p", "Once upon a time", "-n", str(int(tokens) + 1), "--ignore-eog",
                  "--strategy", "resident", "--temp", "0"] + common)
    tps, pass_ms = float(j["decode_tokens_per_s"]), float(j["mean_decode_pass_ms"])
    if tps > 0 and pass_ms > 0:
        overheads.append(1000.0 / tps / pass_ms - 1)
    return tps

def bench_side():
    j = run_json([ls, "bench", model, "--strategies", "resident", "--mode", "decode", "--passes", tokens,
                  "--warmup", "1"] + common)
    s = [x for x in j["strategies"] if x["name"] == "resident"][0]
    if s.get("skipped"):
        sys.exit("error: bench skipped the resident strategy")
    ms = [p["pass_ms"] for p in s.get("passes", [])]
    if ms:  # tokens over the mean pass: all the passes' time, as run counts it
        bench_mean.append(1000.0 / statistics.mean(ms))
    return float(s["tokens_per_s"])

r, b = [], []
for i in range(rounds):
    order = [("run", run_side, r), ("bench", bench_side, b)]
    if i % 2 == 1:
        order.reverse()
    for _, fn, acc in order:
        acc.append(fn())
    print(f"round {i + 1}: run {r[-1]:.1f} tok/s, bench {b[-1]:.1f} tok/s", flush=True)
mr, mb = statistics.median(r), statistics.median(b)
print(f"{os.path.basename(model)} decode, {threads} threads, {tokens} tokens, medians of {rounds} interleaved rounds: "
      f"run {mr:.1f} tok/s, bench {mb:.1f} tok/s, run / bench = {mr / mb:.3f}")
if bench_mean:
    mm = statistics.median(bench_mean)
    print(f"bench over its mean pass (all passes, as run counts its time): {mm:.1f} tok/s, run / that = {mr / mm:.3f}")
if overheads:
    # Within one run, so the machine's load cancels: what run spends per token
    # beyond the executor's pass (embedding, sampling, text, synchronisation).
    print(f"run's per-token overhead over its own passes (median of {len(overheads)}): "
          f"{100 * statistics.median(overheads):.1f}%  (per round: "
          + ", ".join(f"{100 * o:.1f}%" for o in overheads) + ")")
EOF
