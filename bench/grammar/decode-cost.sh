#!/usr/bin/env bash
# What a JSON-schema constraint costs decode, end to end: `layerstream run`
# with and without `--json-schema`, alternating round by round in one
# invocation of this script (the order flips each round), greedy, the same
# prompt and token budget; each row is the median of the rounds' decode
# tokens/s (`run --json`'s decode_tokens_per_s) and the ratio. The schema
# holds one string of at least 2,000 characters, so the constrained run
# decodes the whole token budget, as the free one does, and every token pays
# the mask. Not part of CI: it wants a
# quiet machine (other work on the cores moves single runs by 2-3x).
#
# Usage: bench/grammar/decode-cost.sh [--rounds N] LAYERSTREAM_BIN MODEL
# Environment: TOKENS (128), THREADS (2).
set -euo pipefail
ROUNDS=15
if [ "${1:-}" = "--rounds" ]; then ROUNDS=$2; shift 2; fi
[ $# -eq 2 ] || { sed -n 2,12p "$0"; exit 2; }
BIN=$1 MODEL=$2
[ -x "$BIN" ] || { echo "error: $BIN is not an executable" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "error: no model at $MODEL (bench/peer/fetch-models.sh fetches the test models)" >&2; exit 1; }
exec python3 - "$BIN" "$MODEL" "$ROUNDS" "${TOKENS:-128}" "${THREADS:-2}" <<'EOF'
import json, os, statistics, subprocess, sys, tempfile

bin_, model, rounds, tokens, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
tmp = tempfile.mkdtemp(prefix="ls-grammar-cost-")
schema = os.path.join(tmp, "schema.json")
with open(schema, "w") as f:
    json.dump({"type": "object", "properties": {"story": {"type": "string", "minLength": 2000}}, "required": ["story"]}, f)
prompt = "Write a long story about a lighthouse keeper, as JSON with one key, story."


def run(constrained):
    out = os.path.join(tmp, "run.json")
    args = [bin_, "run", model, "-p", prompt, "-n", tokens, "--temp", "0", "--host-threads", threads,
            "--json", out]
    if constrained:
        args += ["--json-schema", schema]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    return r["decode_tokens_per_s"], len(r["generated_tokens"])


rates = {False: [], True: []}
counts = {False: [], True: []}
for i in range(rounds):
    for constrained in ((False, True) if i % 2 == 0 else (True, False)):
        rate, n = run(constrained)
        rates[constrained].append(rate)
        counts[constrained].append(n)
    print(f"round {i + 1}/{rounds}: free {rates[False][-1]:.1f}, schema {rates[True][-1]:.1f} tokens/s",
          file=sys.stderr)
free, constrained = statistics.median(rates[False]), statistics.median(rates[True])
print(f"| model | free tokens/s | with the schema | schema / free | tokens per run (free, schema) |")
print(f"|---|---:|---:|---:|---|")
print(f"| {os.path.basename(model)} | {free:.1f} | {constrained:.1f} | {constrained / free:.3f} | "
      f"{statistics.median(counts[False])}, {statistics.median(counts[True])} |")
EOF
