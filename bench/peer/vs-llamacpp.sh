#!/usr/bin/env bash
# Host compute side by side with llama.cpp on this CPU: for each model,
# decode, prefill of 32 and prefill of 512 tokens, llama.cpp's llama-bench
# against `layerstream bench --strategies resident`, same file, same thread
# count, runs interleaved (the order alternates each round), medians of the
# rounds. Prints one Markdown table (tokens/s and layerstream / llama.cpp).
# Not part of CI: it takes minutes and wants a quiet machine.
#
# Usage: bench/peer/vs-llamacpp.sh [--rounds N] [--threads T] [--exact] [--tests decode,pp32,pp512] [MODEL.gguf ...]
#   default models: SmolLM2-135M-Instruct Q4_1 and gemma-3-270m Q4_K_M from
#   ~/.cache/layerstream/models (bench/peer/fetch-models.sh) and the 768 MiB
#   Q8_0 example model (/tmp/m768.gguf, made with `layerstream example-model`
#   when missing). A model layerstream cannot run gets a row saying why.
#   LAYERSTREAM=path/to/layerstream (default build/dev/bin/layerstream).
#   llama-bench comes from bench/peer/llamacpp.sh (built there once, cached).
# Each round: llama-bench -r 1 (one measured run after its warm-up), then
# layerstream bench with 1 warm-up pass and --passes measured passes (decode:
# 32 tokens, prefill: 2 passes); a round's figure is that run's tokens/s.
# llama.cpp runs with OMP_WAIT_POLICY=passive unless the environment sets it:
# its default (spinning OpenMP barriers) collapses when the machine has more
# runnable threads than cores (0.3 tokens/s measured on the shared 2-core
# box). Where llama-bench fails with its defaults (its AMX kernels raised
# SIGILL here), the row is re-run with --repack 0 and says so.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=5
THREADS=2
EXACT=""
TESTS="decode,pp32,pp512"
MODELS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --exact) EXACT="--exact"; shift ;;
    --tests) TESTS=$2; shift 2 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) MODELS+=("$1"); shift ;;
  esac
done
LS=${LAYERSTREAM:-$ROOT/build/dev/bin/layerstream}
[ -x "$LS" ] || { echo "error: $LS not found (build the layerstream_cli target or set LAYERSTREAM)" >&2; exit 1; }
PEER=$("$ROOT/bench/peer/llamacpp.sh" | tail -1)
[ -x "$PEER/llama-bench" ] || { echo "error: no llama-bench in $PEER" >&2; exit 1; }
if [ ${#MODELS[@]} -eq 0 ]; then
  CACHE=$HOME/.cache/layerstream/models
  [ -f /tmp/m768.gguf ] || "$LS" example-model /tmp/m768.gguf --size 768MiB --dtype q8_0 >&2
  MODELS=("$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf" /tmp/m768.gguf "$CACHE/gemma-3-270m-q4_k_m.gguf")
fi

export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec python3 - "$LS" "$PEER/llama-bench" "$ROUNDS" "$THREADS" "$EXACT" "$TESTS" "${MODELS[@]}" <<'EOF'
import json, os, statistics, subprocess, sys, tempfile

ls, llama_bench, rounds, threads, exact = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
wanted = sys.argv[6].split(",")
models = sys.argv[7:]
tests = [("decode", ["-p", "0", "-n", "32"], ["--mode", "decode", "--passes", "32"]),
         ("prefill 32", ["-p", "32", "-n", "0"], ["--mode", "prefill", "--prompt-len", "32", "--passes", "2"]),
         ("prefill 512", ["-p", "512", "-n", "0"], ["--mode", "prefill", "--prompt-len", "512", "--passes", "2"])]
tests = [t for t, key in zip(tests, ["decode", "pp32", "pp512"]) if key in wanted]

peer_extra = {}  # model -> extra llama-bench flags after a failure with the defaults

def run_llama(model, args):
    for extra in ([peer_extra[model]] if peer_extra.get(model) else [[], ["--repack", "0"]]):
        out = subprocess.run([llama_bench, "-m", model, "-t", threads, "-r", "1", "-o", "json"] + args + extra,
                             capture_output=True, text=True)
        if out.returncode == 0:
            if extra:
                peer_extra[model] = extra  # later tests of this model go straight to the working flags
            return float(json.loads(out.stdout)[0]["avg_ts"])
        print(f"llama-bench {' '.join(args + extra)} on {model}: exit {out.returncode}", file=sys.stderr)
    raise RuntimeError(f"llama-bench failed (exit {out.returncode})")

def run_ls(model, args):
    vram = 2 * os.path.getsize(model) + (512 << 20)
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [ls, "bench", model, "--strategies", "resident", "--host-threads", threads, "--vram", str(vram),
               "--warmup", "1", "--json", f.name] + args + ([exact] if exact else [])
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            lines = (out.stderr.strip() or "failed").splitlines()
            raise RuntimeError("layerstream: " + lines[-1])
        res = json.load(open(f.name))
    s = [x for x in res["strategies"] if x["name"] == "resident"][0]
    if s.get("skipped"):
        raise RuntimeError("layerstream: resident skipped")
    return float(s["tokens_per_s"])

rows = []
for model in models:
    name = os.path.basename(model)
    if not os.path.exists(model):
        rows.append((name, "-", None, None, "file missing"))
        continue
    for test, largs, sargs in tests:
        peer, ours, note = [], [], ""
        try:
            for r in range(rounds):
                order = [("peer", largs), ("ours", sargs)]
                if r % 2 == 1:
                    order.reverse()
                for who, a in order:
                    if who == "peer":
                        peer.append(run_llama(model, a))
                    else:
                        ours.append(run_ls(model, a))
        except RuntimeError as e:
            note = str(e)
        p = statistics.median(peer) if peer and not note else None
        o = statistics.median(ours) if ours and not note else None
        if not note and peer_extra.get(model) and test != "decode":
            note = "llama.cpp " + " ".join(peer_extra[model])
        rows.append((name, test, p, o, note))
        print(f"{name} {test}: llama.cpp {peer} layerstream {ours} {note}", file=sys.stderr, flush=True)

print(f"| model | test | llama.cpp t/s | layerstream t/s | layerstream / llama.cpp | note |")
print(f"|---|---|---:|---:|---:|---|")
for name, test, p, o, note in rows:
    if p is None or o is None:
        print(f"| {name} | {test} | - | - | - | {note} |")
    else:
        print(f"| {name} | {test} | {p:.1f} | {o:.1f} | {o / p:.2f}x | {note} |")
print(f"\n{threads} threads, medians of {rounds} interleaved rounds; layerstream {'--exact' if exact else 'fast path'}, "
      f"bench --strategies resident; llama.cpp llama-bench -t {threads} -r 1, "
      f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}.")
EOF
