#!/usr/bin/env python3
"""Prints the GPU check's results (the files bench/gpu-check.sh leaves in $OUT)
as Markdown tables, ready for bench/RESULTS.md:

    python3 bench/gpu/summarize.py OUT_DIR

Reads summary.json, bench-cuda.json, agreement.json, probe.json (the box
profile: link, disk, device and host-site rates), stream-decode.json and
stream-prefill.json (measured strategies, and the profile's prediction next
to them), and predict-70b-*.json inside traces.tar.gz (the 70B-class
prediction from this box's profile); a missing or unreadable file is
reported and skipped. Standard library only (runs on the GPU machine too)."""
import json
import os
import sys
import tarfile


def load(out, name):
    path = os.path.join(out, name)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        print(f"_{name}: not produced_\n")
    except (OSError, ValueError) as e:
        print(f"_{name}: unreadable ({e})_\n")
    return None


def steps(s):
    print(f"GPU check: {s.get('elapsed_s')} s of {s.get('deadline_s')} s; device: {s.get('device_gate')}\n")
    print("| step | status | s |\n|---|---|---|")
    for st in s.get("steps", []):
        print(f"| {st['step']} | {st['status']} | {st['seconds']} |")
    for f in s.get("failures", []):
        print(f"\nFAILED: {f}")
    print()


def bench_cuda(b):
    ctx = b.get("context", {})
    print(f"Device: {ctx.get('device', '?')}; D2D reference {float(ctx.get('d2d_GBps_reference', 0)):.0f} GB/s "
          "(bytes read + written)\n")
    h2d, mm = {}, {}
    for r in b.get("benchmarks", []):
        name = r.get("name", "")
        if r.get("error_occurred"):
            print(f"- {name}: error: {r.get('error_message')}")
            continue
        if name.startswith("d2d"):
            print(f"- D2D copy of 1 GiB: {r.get('GBps', 0):.0f} GB/s")
        elif name.startswith("h2d/"):
            kind, chunk = name.split("/")[1], name.split("chunk_kib:")[1].split("/")[0]
            h2d.setdefault(int(chunk), {})[kind] = r.get("GBps", 0)
        elif name.startswith("matmul/"):
            _, typ, tok = name.split("/")[:3]
            mm.setdefault(typ, {})[tok.split(":")[1]] = r
    if h2d:
        print("\n| H2D chunk | pinned GB/s | pageable GB/s |\n|---|---|---|")
        for chunk in sorted(h2d):
            v = h2d[chunk]
            print(f"| {chunk} KiB | {v.get('pinned', 0):.1f} | {v.get('pageable', 0):.1f} |")
    if mm:
        print("\n| matmul 32768x8192 | 1 token: weight GB/s (% of D2D) | 8 tokens | 512 tokens: TFLOP/s |\n|---|---|---|---|")
        for typ, v in mm.items():
            def bw(t):
                r = v.get(t)
                return f"{r['weight_GBps']:.0f} ({r.get('pct_of_d2d', 0):.0f}%)" if r else "-"
            r512 = v.get("512")
            print(f"| {typ} | {bw('1')} | {bw('8')} | {r512['TFLOPs']:.1f} |" if r512 else f"| {typ} | {bw('1')} | {bw('8')} | - |")
    print()


def agreement(a):
    bad = [c for c in a.get("cases", []) if not c.get("ok")]
    print(f"CUDA vs CPU kernels: {a.get('cases_total')} cases, {a.get('cases_disagreeing')} disagree "
          f"(seed {a.get('seed')})")
    worst = {}
    for c in a.get("cases", []):
        key = c["op"]
        if c.get("tol", 0) > 0 and c.get("err", 0) >= 0:
            worst[key] = max(worst.get(key, 0), c["err"] / c["tol"])
    if worst:
        print("worst error / tolerance per op: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    mm = [c for c in a.get("cases", []) if "err_cuda_vs_cpu" in c]
    if mm:
        print(f"matmul: worst CUDA vs CPU {max(c['err_cuda_vs_cpu'] for c in mm):.3g}, "
              f"worst CPU vs float64 {max(c['err_cpu_vs_f64'] for c in mm):.3g} (of sum |w x|)")
    for c in bad:
        print(f"- DISAGREE {c['op']} {c['type']} {c['shape']}: err {c['err']:.3g} tol {c['tol']:.3g} {c.get('error', '')}")
    print()


def probe(p):
    box = p.get("box", {})
    print(f"Box profile (probe.json): {box.get('device')} ({box.get('backend')}); link {p.get('link_gbps', 0):.1f} GB/s "
          f"pinned H2D, disk {p.get('disk_gbps', 0):.2f} GB/s\n")
    if p.get("compute"):
        print("| device matmul | shape | tokens | weight GB/s | GFLOP/s |\n|---|---|---|---|---|")
        for c in p["compute"]:
            print(f"| {c['type']} | {c['shape']} | {c.get('n_tokens')} | {c.get('weight_gbps', 0):.0f} | {c.get('gflops', 0):.0f} |")
    h = p.get("host")
    if h:
        print(f"\nHost site: {h.get('cpu')}, {h.get('threads')} threads, RAM read {h.get('ram_read_gbps', 0):.1f} GB/s\n")
        print("| host matmul | shape | tokens | weight GB/s | GMAC/s |\n|---|---|---|---|---|")
        for c in h.get("compute", []):
            print(f"| {c['type']} | {c['shape']} | {c.get('n_tokens')} | {c.get('weight_gbps', 0):.1f} | {c.get('gmacs', 0):.1f} |")
    print()


def prediction(title, pr):
    m, w, b = pr.get("model", {}), pr.get("workload", {}), pr.get("budgets", {})
    box = pr.get("box", {})
    print(f"{title}: {m.get('source')}, {m.get('layers')} layers, {m.get('weight_bytes', 0) / 2**30:.2f} GiB; "
          f"VRAM {b.get('vram_bytes', 0) / 2**30:.2f} GiB, RAM {b.get('ram_bytes', 0) / 2**30:.2f} GiB; "
          f"{w.get('mode')}, {w.get('tokens_per_pass')} token(s) per pass; link {box.get('link_gbps', 0):.1f} GB/s, "
          f"host RAM {box.get('ram_read_gbps', 0):.1f} GB/s\n")
    print("| strategy | predicted ms | tokens/s | measured ms | resident | streamed | host | split | sites |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for s in pr.get("strategies", []):
        if "error" in s:
            print(f"| {s['name']} | does not run: {s['error']} | | | | | | | |")
            continue
        meas = f"{1e3 * s['measured_median_s']:.2f}" if "measured_median_s" in s else "-"
        print(f"| {s['name']} | {1e3 * s['predicted_pass_s']:.2f} | {s['tokens_per_s']:.2f} | {meas} | {s['resident']} | "
              f"{s['streamed']} | {s['host']} | {s.get('split', 0)} | `{s['sites']}` |")
    print()


def stream(mode, d):
    m = d.get("model", {})
    bud = d.get("budget", {})
    print(f"layerstream bench, {mode}: {m.get('bytes', 0) / 2**20:.0f} MiB {m.get('dtype')} model, "
          f"vram {bud.get('vram_bytes', 0) / 2**20:.0f} MiB, ram {bud.get('ram_bytes', 0) / 2**20:.0f} MiB; "
          f"link {d.get('box', {}).get('link_gbps', 0):.1f} GB/s; best {d.get('best')}\n")
    print("| strategy | median ms | tokens/s | stall ms | streamed MiB | bound ms | efficiency |\n|---|---|---|---|---|---|---|")
    for s in d.get("strategies", []):
        if s.get("skipped"):
            print(f"| {s['name']} | skipped | | | | | |")
            continue
        print(f"| {s['name']} | {s['pass_ms']['median']:.2f} | {s['tokens_per_s']:.1f} | {s['stall_ms']:.2f} | "
              f"{s['streamed_bytes'] / 2**20:.0f} | {s['lower_bound_ms']:.2f} | {100 * s['overlap_efficiency']:.0f}% |")
    print()
    for s in d.get("strategies", []):
        if not s.get("skipped") and ("host site" in s.get("plan", "") or "split" in s.get("plan", "")):
            print(f"- {s['name']} plan: {s['plan']}")
    print()
    if d.get("prediction"):
        prediction(f"Prediction from the box profile, {mode}", d["prediction"])


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    out = sys.argv[1]
    for name, section in (("summary.json", steps), ("bench-cuda.json", bench_cuda), ("agreement.json", agreement),
                          ("probe.json", probe)):
        d = load(out, name)
        if d:
            section(d)
    try:
        with tarfile.open(os.path.join(out, "traces.tar.gz")) as tar:
            for mode in ("decode", "prefill"):
                try:
                    pr = json.load(tar.extractfile(f"predict-70b-{mode}.json"))
                    prediction(f"70B-class Q4_K_M on this box's profile, {mode}", pr.get("prediction", {}))
                except (KeyError, AttributeError, ValueError) as e:
                    print(f"_predict-70b-{mode}.json: not in traces.tar.gz ({e})_\n")
    except (OSError, tarfile.TarError) as e:
        print(f"_traces.tar.gz: unreadable ({e})_\n")
    for mode in ("decode", "prefill"):
        d = load(out, f"stream-{mode}.json")
        if d:
            stream(mode, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
