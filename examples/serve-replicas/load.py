#!/usr/bin/env python3
"""Bounded load through a gateway in front of `layerstream serve` replicas,
on 127.0.0.1 only: for each gateway it starts fresh replicas and the gateway,
sends REQUESTS chat requests from CLIENTS threads (prompts in groups that
share a long preamble, so cache_aware has something to keep together),
SIGTERMs one replica half-way, and reports client errors, each replica's
finished requests and prefix-cache hits (from its /metrics, polled until it
exits), and whether the drained replica's /health said 503 while it drained.
Zero client errors are expected: the gateway retries elsewhere and stops
routing to the replica whose /health failed.

  examples/serve-replicas/load.py --cli build/ci/bin/layerstream --model SmolLM2-135M-Instruct.Q4_1.gguf \\
      --replica-args="--parallel 4 --ctx 1024" --gateways sglang:round_robin,sglang:cache_aware,litellm:least-busy

--throughput instead measures aggregate generated tokens/s of one replica
(--single-replica-args) with CLIENTS clients against REPLICAS replicas behind
sglang round_robin.
Exit status 1 when any client request failed.
"""
import concurrent.futures
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replicas as rp  # noqa: E402


def reexec_in_venv(venv):
    py = rp.setup_venv(venv)
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(py, [py, *sys.argv])


def prompts(n, groups=10):
    """`n` chat requests: group g's all begin with the same long preamble."""
    out = []
    for i in range(n):
        g = i % groups
        preamble = f"You are assistant {g}. " + " ".join(f"Rule {g}.{k}: be brief and exact." for k in range(12))
        out.append([{"role": "system", "content": preamble},
                    {"role": "user", "content": f"Question {i}: name a colour and a number."}])
    return out


def post_chat(url, model_id, messages, max_tokens, timeout=600):
    body = json.dumps({"model": model_id, "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    req = urllib.request.Request(url + "/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


class MetricsWatch:
    """Polls each replica's /metrics and /health; keeps the last figures seen
    (a drained replica's counters outlive its exit) and whether /health was
    ever 503 while its process still ran."""

    def __init__(self, replicas):
        self.replicas, self.last, self.saw_503 = replicas, {}, set()
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            for r in self.replicas:
                m = rp.metrics(r.url)
                if m:
                    self.last[r.url] = m
                if r.proc.poll() is None and rp.get(r.url + "/health", timeout=2)[0] == 503:
                    self.saw_503.add(r.url)
            time.sleep(0.1)

    def close(self):
        self.stop_flag.set()
        self.thread.join()


def send_all(send, messages, clients, on_half=None):
    """Sends every request from `clients` threads; (errors, completion tokens, wall s)."""
    errors, tokens, done = [], [0], [0]
    lock = threading.Lock()

    def one(i):
        try:
            n = send(messages[i])
            with lock:
                tokens[0] += n
        except Exception as e:  # noqa: BLE001 (every failure is a client error to report)
            with lock:
                errors.append(f"request {i}: {type(e).__name__}: {e}"[:300])
        with lock:
            done[0] += 1
            fire = on_half is not None and done[0] == len(messages) // 2
        if fire:
            on_half()

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(len(messages))))
    return errors, tokens[0], time.monotonic() - t0


def gateway_sender(kind, policy, reps, model_id, args, port):
    """(send function, stop function) for one gateway in front of `reps`."""
    urls = [r.url for r in reps]
    if kind == "sglang":
        router = rp.SglangRouter(sys.executable, urls, policy, port)
        router.wait_ready()
        return (lambda msgs: post_chat(router.url, model_id, msgs, args.max_tokens)), router.stop
    if kind == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost-map download
        from litellm import Router

        router = Router(model_list=rp.litellm_model_list(urls, model_id), routing_strategy=policy,
                        num_retries=5, retry_after=0, allowed_fails=0, cooldown_time=120)

        def send(msgs):
            r = router.completion(model=model_id, messages=msgs, max_tokens=args.max_tokens, temperature=0,
                                  timeout=600)
            return r.usage.completion_tokens
        return send, lambda: None
    raise SystemExit(f"unknown gateway {kind!r} (sglang or litellm)")


def run_gateway(spec, args, port):
    kind, _, policy = spec.partition(":")
    model_id = rp.model_id_of(args.model)
    reps = rp.start_replicas(args.cli, args.model, args.replicas, args.base_port, [args.replica_args.split()])
    watch = MetricsWatch(reps)
    try:
        send, stop_gateway = gateway_sender(kind, policy, reps, model_id, args, port)
        victim = reps[-1]
        on_half = victim.sigterm if args.sigterm_one else None
        errors, tokens, wall = send_all(send, prompts(args.requests), args.clients, on_half)
        stop_gateway()
    finally:
        for r in reps:
            r.stop()
        watch.close()
    per = []
    for r in reps:
        m = watch.last.get(r.url, {})
        per.append({"url": r.url, "finished": m.get('layerstream_requests_total{outcome="finished"}', 0),
                    "cache_hit_tokens": m.get("layerstream_prefix_cache_hits_total", 0),
                    "cache_query_tokens": m.get("layerstream_prefix_cache_queries_total", 0)})
    return {"gateway": spec, "requests": args.requests, "clients": args.clients, "errors": len(errors),
            "error_samples": errors[:3], "tokens": tokens, "wall_s": round(wall, 2),
            "tokens_per_s": round(tokens / wall, 2), "replicas": per,
            "sigterm": victim.url if args.sigterm_one else None,
            "drained_health_503": (victim.url in watch.saw_503) if args.sigterm_one else None}


def throughput(args):
    """One replica with CLIENTS clients, then REPLICAS replicas behind
    sglang round_robin with the same clients: aggregate tokens/s of each."""
    model_id = rp.model_id_of(args.model)
    msgs = prompts(args.requests)
    out = {}
    for n in (1, args.replicas):
        flags = (args.single_replica_args or args.replica_args) if n == 1 else args.replica_args
        reps = rp.start_replicas(args.cli, args.model, n, args.base_port, [flags.split()])
        try:
            if n == 1:
                send = lambda m: post_chat(reps[0].url, model_id, m, args.max_tokens)  # noqa: E731
                stop = lambda: None  # noqa: E731
            else:
                send, stop = gateway_sender("sglang", "round_robin", reps, model_id, args, args.router_port)
            send(msgs[0])  # warm-up
            errors, tokens, wall = send_all(send, msgs, args.clients)
            stop()
        finally:
            for r in reps:
                r.stop()
        out[f"{n} replica(s)" + ("" if n == 1 else " behind sglang round_robin")] = {
            "errors": len(errors), "tokens": tokens, "wall_s": round(wall, 2), "tokens_per_s": round(tokens / wall, 2)}
    return out


def main():
    ap = rp.parser_with_cli_and_model(__doc__)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--replica-args", default="--parallel 4", help="flags of every replica (--vram, --ram, ...)")
    ap.add_argument("--gateways", default="sglang:round_robin,sglang:cache_aware,sglang:power_of_two,litellm:least-busy")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--base-port", type=int, default=18100)
    ap.add_argument("--router-port", type=int, default=18190)
    ap.add_argument("--no-sigterm", dest="sigterm_one", action="store_false",
                    help="do not SIGTERM a replica half-way")
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--single-replica-args", default=None,
                    help="--throughput: flags of the lone replica (default --replica-args; give it the cores "
                         "and sequences of all replicas for a fair comparison)")
    ap.add_argument("--venv", default=rp.DEFAULT_VENV)
    args = ap.parse_args()
    reexec_in_venv(args.venv)
    if args.throughput:
        print(json.dumps(throughput(args), indent=1))
        return 0
    failed = False
    for spec in args.gateways.split(","):
        result = run_gateway(spec, args, args.router_port)
        print(json.dumps(result), flush=True)
        failed |= result["errors"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
