#!/usr/bin/env bash
# Issue 17 check: `layerstream plan` predictions against `layerstream run`.
#   bench/plan-vs-run.sh LAYERSTREAM MODEL [extra flags for both, e.g. --backend host [--ram 1GiB]]
# Environment: N (tokens run generates, default 48), BUDGETS (plan rows, default 8),
# PROMPT (default "Once upon a time"), PAUSE (seconds of idle disk before each row
# that reads from disk, default 0).
# Disk-tier rows print the disk rate run measured beside the plan's figure: a
# prediction can only be as right as the disk rate it was made with, and a
# shared or virtual disk is not steady (the build VM of bench/RESULTS.md reads
# O_DIRECT at 1.7-3.3 GB/s from one 2 s window to the next, and once fell to
# 0.7 GB/s for a minute). PAUSE gives the disk a rest before each disk row.
set -euo pipefail
ls_bin=$1 model=$2
shift 2
n=${N:-48} budgets=${BUDGETS:-8} prompt=${PROMPT:-Once upon a time} pause=${PAUSE:-0}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# run's extra flags: all but --ram (run takes it from the plan's rows).
run_extra=()
skip=0
for a in "$@"; do
  if ((skip)); then skip=0; continue; fi
  if [[ $a == --ram ]]; then skip=1; continue; fi
  run_extra+=("$a")
done
# The prompt's token count, from a one-token run at the all-resident default.
"$ls_bin" run "$model" -p "$prompt" -n 1 --temp 0 --json "$out/p.json" "${run_extra[@]}" > /dev/null 2>&1 || true
prompt_tokens=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["prompt_tokens"]; print(len(t) if isinstance(t, list) else t)' "$out/p.json" 2>/dev/null || echo 5)
pos=$((prompt_tokens + n / 2))
echo "plan: --decode-pos $pos (prompt $prompt_tokens tokens + $n / 2), $budgets budgets; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$ls_bin" plan "$model" "$@" --budgets "$budgets" --decode-pos "$pos" --json "$out/plan.json" > "$out/plan.txt" 2> "$out/plan.err"
cat "$out/plan.txt"
python3 - "$ls_bin" "$model" "$out" "$n" "$prompt" "$pause" "${run_extra[@]}" <<'PY'
import json, subprocess, sys, time
ls_bin, model, out, n, prompt, pause = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])
run_extra = sys.argv[7:]
plan = json.load(open(f"{out}/plan.json"))
print(f"\nplan's disk figure: {plan['figures']['disk_gbps']:.2f} GB/s" + (f"; {pause:.0f} s idle before each disk row" if pause else ""))
print("\n| vram budget (bytes) | placement (resident/ram/disk) | predicted decode tok/s | measured: 1 / mean decode pass | measured / predicted | run's decode tok/s (incl. re-plans) | re-plans | run's disk GB/s |")
print("|---|---|---|---|---|---|---|---|")
rows = within = 0
for b in plan["budgets"]:
    if not b["fits"]:
        continue
    if pause and b["layers"]["disk"]:
        time.sleep(pause)
    j = f"{out}/run.json"
    r = subprocess.run([ls_bin, "run", model, "-p", prompt, "-n", n, "--temp", "0", "--ignore-eog",
                        "--vram", str(b["vram_bytes"]), "--ram", str(b["ram_bytes"]), "--json", j] + run_extra,
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"| {b['vram_bytes']} | run failed: {r.stderr.strip().splitlines()[-1]} | | | | | | |")
        continue
    res = json.load(open(j))
    m = res["batch"] * 1000.0 / res["mean_decode_pass_ms"]
    p = b["predicted_decode_tokens_per_s"]
    l = b["layers"]
    ratio = m / p
    rows += 1
    within += abs(ratio - 1) <= 0.15
    print(f"| {b['vram_bytes']} | {l['resident']}/{l['ram']}/{l['disk']} | {p:.2f} | {m:.2f} | {ratio:.2f} | "
          f"{res['decode_tokens_per_s']:.2f} | {res['replans']} | " +
          (f"{res['disk_gbps']:.2f}" if res.get('disk_gbps') else "") + " |", flush=True)
print(f"\nwithin 15%: {within} of {rows} rows")
lo = plan["min_vram_bytes"]
for v in (lo - 1, lo):
    r = subprocess.run([ls_bin, "run", model, "-p", "Hello", "-n", "2", "--vram", str(v)] + run_extra,
                       capture_output=True, text=True)
    last = (r.stderr.strip().splitlines() or [""])[-1]
    print(f"\nrun --vram {v}: exit {r.returncode}" + (f": {last}" if r.returncode else ""))
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
