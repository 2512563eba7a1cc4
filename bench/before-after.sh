#!/usr/bin/env bash
# Speed of two builds of layerstream side by side, in one run: the cells of
# bench/peer/vs-llamacpp.sh (host compute, `bench --strategies resident`:
# decode, prefill 32, prefill 512 on SmolLM2, gemma-3 and the 768 MiB example)
# and of bench/hybrid-cells.sh (overlap / host / serial / planned on the
# 768 MiB example, --vram 256MiB --ram 1GiB, links 0.5, 2 and 16 GB/s, decode
# and prefill). Each round runs every cell with both binaries, the order
# alternating per round; a row is the median of the rounds, before and after,
# and their ratio. For a refactoring that must not change speed (rows within
# 3%). Not part of CI: it takes ~20 minutes and wants a quiet machine.
#
# Usage: bench/before-after.sh [--rounds N] [--only resident|hybrid] BEFORE_BIN AFTER_BIN
# Environment: THREADS (2), PROMPT_LEN for the hybrid prefill cells (512),
#   LINKS ("0.5 2 16"); models as vs-llamacpp.sh (~/.cache/layerstream/models,
#   /tmp/m768.gguf made with AFTER_BIN example-model when missing).
set -euo pipefail
ROUNDS=5
ONLY=""
while [ $# -gt 2 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 2 ] || { sed -n 2,17p "$0"; exit 2; }
BEFORE=$1 AFTER=$2
for b in "$BEFORE" "$AFTER"; do [ -x "$b" ] || { echo "error: $b is not an executable" >&2; exit 1; }; done
CACHE=$HOME/.cache/layerstream/models
M768=/tmp/m768.gguf
[ -f "$M768" ] || "$AFTER" example-model "$M768" --size 768MiB --dtype q8_0 >&2
exec python3 - "$BEFORE" "$AFTER" "$ROUNDS" "${ONLY}" "${THREADS:-2}" "${PROMPT_LEN:-512}" "${LINKS:-0.5 2 16}" \
  "$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf" "$CACHE/gemma-3-270m-q4_k_m.gguf" "$M768" <<'EOF'
import json, os, statistics, subprocess, sys, tempfile

before, after, rounds, only, threads, prompt_len, links = sys.argv[1:8]
rounds = int(rounds)
smol, gemma, m768 = sys.argv[8:11]

# A cell: (label, model, bench arguments). Resident cells report tokens/s of
# `resident`; hybrid cells the median pass of each of the four strategies.
cells = []
if only in ("", "resident"):
    for model in (smol, gemma, m768):
        if not os.path.exists(model):
            print(f"skipping {model}: missing (bench/peer/fetch-models.sh)", file=sys.stderr)
            continue
        vram = str(2 * os.path.getsize(model) + (512 << 20))
        base = ["--strategies", "resident", "--host-threads", threads, "--vram", vram, "--warmup", "1"]
        for test, args in (("decode", ["--mode", "decode", "--passes", "32"]),
                           ("prefill 32", ["--mode", "prefill", "--prompt-len", "32", "--passes", "2"]),
                           ("prefill 512", ["--mode", "prefill", "--prompt-len", "512", "--passes", "2"])):
            cells.append((f"{os.path.basename(model)} {test}", model, base + args))
if only in ("", "hybrid"):
    for mode in ("decode", "prefill"):
        for link in links.split():
            extra = (["--passes", "5", "--warmup", "3"] if mode == "decode"
                     else ["--prompt-len", prompt_len, "--passes", "2", "--warmup", "1"])
            cells.append((f"hybrid {mode} link {link}", m768,
                          ["--vram", "256MiB", "--ram", "1GiB", "--sim-link", link, "--mode", mode,
                           "--strategies", "overlap,host,serial,planned", "--host-factor", "1",
                           "--host-threads", threads] + extra))

def run(binary, model, args):
    """{row name: figure} of one bench run: tokens/s (resident) or median pass ms (others)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        out = subprocess.run([binary, "bench", model, "--json", f.name] + args, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{binary} bench {' '.join(args)}: " + (out.stderr.strip().splitlines() or ["failed"])[-1])
        res = json.load(open(f.name))
    rows = {}
    for s in res["strategies"]:
        if s.get("skipped"):
            continue
        if s["name"] == "resident":
            rows["resident tokens/s"] = float(s["tokens_per_s"])
        else:
            rows[f"{s['name']} pass ms"] = float(s["pass_ms"]["median"])
    return rows

figures = {}  # (cell, row) -> {"before": [...], "after": [...]}
for r in range(rounds):
    for label, model, args in cells:
        order = [("before", before), ("after", after)]
        if r % 2 == 1:
            order.reverse()
        for who, binary in order:
            for row, v in run(binary, model, args).items():
                figures.setdefault((label, row), {"before": [], "after": []})[who].append(v)
    print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)

print("| cell | figure | before | after | after / before | within 3% |")
print("|---|---|---:|---:|---:|---|")
worst = 0.0
for (label, row), f in figures.items():
    b, a = statistics.median(f["before"]), statistics.median(f["after"])
    ratio = a / b if b else float("nan")
    # tokens/s: higher is better; pass ms: lower is better. "Slower" is the worse side.
    slower = (1 / ratio if row.endswith("tokens/s") else ratio) - 1
    worst = max(worst, slower)
    print(f"| {label} | {row} | {b:.2f} | {a:.2f} | {ratio:.3f} | {'yes' if abs(ratio - 1) <= 0.03 else 'no'} |")
print(f"\nmedians of {rounds} interleaved rounds, {threads} threads; before: {before}; after: {after}; "
      f"worst slowdown {worst * 100:.1f}%")
EOF
