#!/usr/bin/env bash
# Issue 17 check: `layerstream plan` predictions against `layerstream run`.
#   bench/plan-vs-run.sh LAYERSTREAM MODEL [extra flags for both, e.g. --backend host]
# Prints a Markdown table: per budget of the plan, predicted and measured
# decode tokens/s and their ratio; then the minimum budget and one byte less.
set -euo pipefail
ls_bin=$1 model=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$ls_bin" plan "$model" "$@" --json "$out/plan.json" > "$out/plan.txt" 2> "$out/plan.err"
cat "$out/plan.txt"
python3 - "$ls_bin" "$model" "$out" "$@" <<'PY'
import json, subprocess, sys
ls_bin, model, out, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
plan = json.load(open(f"{out}/plan.json"))
# --ram goes to run from the plan's rows (the same value); the rest as given.
run_extra = [a for i, a in enumerate(extra) if a != "--ram" and (i == 0 or extra[i - 1] != "--ram")]
print("\n| vram budget (bytes) | placement (resident/ram/disk) | predicted decode tok/s | measured: 1 / mean decode pass | ratio | run's decode tok/s (incl. re-plans) | re-plans |")
print("|---|---|---|---|---|---|---|")
for b in plan["budgets"]:
    if not b["fits"]:
        continue
    j = f"{out}/run.json"
    r = subprocess.run([ls_bin, "run", model, "-p", "Once upon a time", "-n", "48", "--temp", "0",
                        "--vram", str(b["vram_bytes"]), "--ram", str(b["ram_bytes"]), "--json", j] + run_extra,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"| {b['vram_bytes']} | run failed: {r.stderr.strip().splitlines()[-1]} | | | | | |")
        continue
    res = json.load(open(j))
    m = res["batch"] * 1000.0 / res["mean_decode_pass_ms"]
    p = b["predicted_decode_tokens_per_s"]
    l = b["layers"]
    print(f"| {b['vram_bytes']} | {l['resident']}/{l['ram']}/{l['disk']} | {p:.2f} | {m:.2f} | {m / p:.2f} | "
          f"{res['decode_tokens_per_s']:.2f} | {res['replans']} |")
lo = plan["min_vram_bytes"]
for v in (lo - 1, lo):
    r = subprocess.run([ls_bin, "run", model, "-p", "Hello", "-n", "2", "--vram", str(v)] + run_extra,
                       capture_output=True, text=True)
    last = (r.stderr.strip().splitlines() or [""])[-1]
    print(f"\nrun --vram {v}: exit {r.returncode}" + (f": {last}" if r.returncode else ""))
PY
