#!/usr/bin/env python3
"""Load test of `layerstream serve`: N concurrent streaming clients against
one client, side by side on one server, to 127.0.0.1 only, with a bounded
number of requests. Reports per phase the aggregate generated tokens/s, p50
and p99 request latency and time to first token, and the server's own
figures (/metrics: bytes streamed per token, overlap efficiency).

  bench/serve/load.py --cli build/dev/bin/layerstream --model /tmp/m768.gguf \\
      --server-args="--vram 256MiB --parallel 8" --clients 1,8 --max-tokens 32 --rounds 2

Every phase runs `rounds` times (alternating), preceded by a short warm-up of
each (the first passes of a batch size re-plan); figures are medians over the
rounds. With --url http://127.0.0.1:PORT it uses a running server instead.
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "serve"))
from serve_client import Server, metrics, stream  # noqa: E402


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def phase(port, clients, requests_per_client, max_tokens, seed0):
    """`clients` threads, each sending `requests_per_client` streaming
    completions one after another. Returns the phase's figures."""

    def client(c):
        out = []
        for r in range(requests_per_client):
            body = {"prompt": f"Client {c} request {r}: a story about layers that stream",
                    "max_tokens": max_tokens, "temperature": 0.7, "seed": seed0 + c * 1000 + r,
                    "stream": True, "stream_options": {"include_usage": True}}
            status, events, ttft, latency = stream(port, "/v1/completions", body, timeout=900)
            if status != 200:
                raise RuntimeError(f"client {c}: status {status}: {events}")
            usage = [e["usage"] for e in events if e.get("usage")]
            out.append((usage[0]["completion_tokens"], ttft, latency))
        return out

    m0 = metrics(port)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = [x for per in pool.map(client, range(clients)) for x in per]
    wall = time.monotonic() - t0
    m1 = metrics(port)
    tokens = sum(r[0] for r in results)
    d = {k: m1[k] - m0.get(k, 0) for k in ("layerstream_generated_tokens_total", "layerstream_passes_total",
                                            "layerstream_streamed_bytes_total")}
    return {
        "clients": clients, "requests": len(results), "tokens": tokens, "wall_s": wall,
        "tokens_per_s": tokens / wall,
        "latency_p50_s": percentile([r[2] for r in results], 50),
        "latency_p99_s": percentile([r[2] for r in results], 99),
        "ttft_p50_s": percentile([r[1] for r in results if r[1] is not None], 50),
        "ttft_p99_s": percentile([r[1] for r in results if r[1] is not None], 99),
        "passes": d["layerstream_passes_total"],
        "bytes_streamed_per_token": d["layerstream_streamed_bytes_total"] / max(1, d["layerstream_generated_tokens_total"]),
        "overlap_efficiency": m1["layerstream_overlap_efficiency"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", help="the layerstream executable (starts a server)")
    ap.add_argument("--model", help="GGUF model for the server it starts")
    ap.add_argument("--server-args", default="", help="extra `serve` flags, e.g. '--vram 256MiB --parallel 8'")
    ap.add_argument("--url", help="use a running server at http://127.0.0.1:PORT instead")
    ap.add_argument("--clients", default="1,8", help="comma-separated client counts (phases)")
    ap.add_argument("--requests-per-client", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", help="write all figures as JSON here")
    args = ap.parse_args()
    counts = [int(x) for x in args.clients.split(",")]
    if not 1 <= args.requests_per_client <= 100 or not 1 <= args.rounds <= 10 or max(counts) > 64:
        ap.error("bounded runs only: --requests-per-client 1..100, --rounds 1..10, at most 64 clients")

    server = None
    if args.url:
        u = urllib.parse.urlparse(args.url)
        if u.hostname not in ("127.0.0.1", "localhost"):
            ap.error("--url must be 127.0.0.1 or localhost")
        port = u.port
    else:
        if not args.cli or not args.model:
            ap.error("give --cli and --model (or --url)")
        server = Server(args.cli, args.model, *args.server_args.split(), "--queue", "256", timeout=600)
        port = server.port
    try:
        for n in counts:  # warm-up: each batch size once, briefly
            phase(port, n, 1, 4, seed0=7)
        runs = {n: [] for n in counts}
        for r in range(args.rounds):
            for n in counts:
                res = phase(port, n, args.requests_per_client, args.max_tokens, seed0=100 + r)
                runs[n].append(res)
                print(f"round {r + 1} clients {n}: {res['tokens']} tokens in {res['wall_s']:.1f} s = "
                      f"{res['tokens_per_s']:.2f} tokens/s", flush=True)
    finally:
        if server:
            code = server.stop()
            if code != 0:
                print(f"warning: the server exited {code}:\n{server.stderr()}", file=sys.stderr)
            os.unlink(server.log.name)

    summary = {}
    print(f"\n| clients | requests | tokens/s (aggregate) | x one client | latency p50 / p99 (s) | "
          f"TTFT p50 / p99 (s) | passes | bytes streamed / token | overlap eff. |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = statistics.median(r["tokens_per_s"] for r in runs[counts[0]])
    for n in counts:
        rs = runs[n]
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0] if isinstance(rs[0][k], (int, float))}
        med["x_first"] = med["tokens_per_s"] / base
        summary[n] = {"median": med, "rounds": rs}
        print(f"| {n} | {sum(r['requests'] for r in rs)} | {med['tokens_per_s']:.2f} | {med['x_first']:.2f}x | "
              f"{med['latency_p50_s']:.1f} / {med['latency_p99_s']:.1f} | {med['ttft_p50_s']:.2f} / "
              f"{med['ttft_p99_s']:.2f} | {med['passes']:.0f} | {med['bytes_streamed_per_token'] / 2**20:.1f} MiB | "
              f"{med['overlap_efficiency']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
