#!/usr/bin/env python3
"""Bounded load through a gateway in front of `layerstream serve` replicas,
on 127.0.0.1 only: for each gateway it starts fresh replicas and the gateway,
sends REQUESTS chat requests from CLIENTS threads, SIGTERMs one replica
after SIGTERM_AT of them, and reports client errors, each replica's finished
requests and prefix-cache hits (from its /metrics, polled until it exits),
and whether the drained replica's /health said 503 while it drained. Zero
client errors are expected: the gateway retries elsewhere and stops routing
to the replica whose /health failed.

The prompts come in GROUPS groups that share a long system prompt, asked in
rounds (each round every group once, in a shuffled order). Give the replicas
room for fewer groups than there are (--parallel + --cache-sequences KV
sequences each, e.g. 10 for 12 groups) but more than half of them: a gateway
that keeps each group on one replica then serves most prompts from that
replica's prefix cache, one that spreads them does not. Each replica serves
the model under its own id (a link STEM.rI.gguf), so every response names the
replica that answered; the report gives, before the SIGTERM, each group's
requests per replica, the affinity (the share of a group's requests on its
most-used replica, over all requests) and the /metrics prefix-cache hit rate.

  examples/serve-replicas/load.py --cli build/ci/bin/layerstream --model SmolLM2-135M-Instruct.Q4_1.gguf \\
      --replica-args="--parallel 4 --ctx 1024" --gateways sglang:round_robin,sglang:cache_aware,litellm:least-busy

--throughput instead measures aggregate generated tokens/s of one replica
(--single-replica-args) with CLIENTS clients against REPLICAS replicas behind
sglang round_robin.
Exit status 1 when any client request failed.
"""
import collections
import concurrent.futures
import json
import os
import random
import sys
import tempfile
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


def prompts(n, groups, rules, seed=1):
    """`n` (group, chat messages): group g's all begin with the same system
    prompt of `rules` rules; rounds of every group once, in shuffled order."""
    rng, order = random.Random(seed), []
    while len(order) < n:
        round_ = list(range(groups))
        rng.shuffle(round_)
        order += round_
    out = []
    for i, g in enumerate(order[:n]):
        preamble = f"You are assistant {g}. " + " ".join(f"Rule {g}.{k}: be brief and exact." for k in range(rules))
        out.append((g, [{"role": "system", "content": preamble},
                        {"role": "user", "content": f"Question {i}: name a colour and a number."}]))
    return out


def post_chat(url, model_id, messages, max_tokens, timeout=600):
    """(completion tokens, the id of the model that answered)."""
    body = json.dumps({"model": model_id, "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    req = urllib.request.Request(url + "/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        reply = json.loads(r.read())
        return reply["usage"]["completion_tokens"], reply.get("model", "")


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


class Sent:
    """What send_all saw: client errors, completion tokens, and per request
    sent before `fired` was set, its (group, the model id that answered)."""

    def __init__(self):
        self.errors, self.tokens, self.done, self.before = [], 0, 0, []
        self.fired = threading.Event()
        self.lock = threading.Lock()


def send_all(send, requests, clients, on_fire=None, fire_after=0):
    """Sends every (group, messages) from `clients` threads; calls `on_fire`
    once `fire_after` requests are done. (Sent, wall s)."""
    sent = Sent()

    def one(i):
        group, messages = requests[i]
        before = not sent.fired.is_set()
        try:
            n, served = send(messages)
            with sent.lock:
                sent.tokens += n
                if before:
                    sent.before.append((group, served))
        except Exception as e:  # noqa: BLE001 (every failure is a client error to report)
            with sent.lock:
                sent.errors.append(f"request {i}: {type(e).__name__}: {e}"[:300])
        with sent.lock:
            sent.done += 1
            fire = on_fire is not None and sent.done == fire_after
        if fire:
            on_fire()
            sent.fired.set()

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(len(requests))))
    return sent, time.monotonic() - t0


def which_replica(served, reps):
    """The index of the replica whose model id `served` names (LiteLLM may
    prefix it with its provider), or "?"."""
    for i, r in enumerate(reps):
        if served == r.model_id or served.endswith("/" + r.model_id):
            return i
    return "?"


def affinity(answered, reps):
    """Per group its requests on each replica, and the share of all requests
    that went to their group's most-used replica (1.0: every group stayed on
    one replica; 1/replicas: spread evenly)."""
    per_group = collections.defaultdict(collections.Counter)
    for group, served in answered:
        per_group[group][which_replica(served, reps)] += 1
    total = sum(sum(c.values()) for c in per_group.values())
    top = sum(max(c.values()) for c in per_group.values())
    table = {g: [per_group[g][i] for i in range(len(reps))] + ([per_group[g]["?"]] if per_group[g]["?"] else [])
             for g in sorted(per_group)}
    return (round(top / total, 3) if total else None), table


def hit_rate(metrics_by_url):
    """Prefix-cache hit tokens / queried tokens over the replicas' /metrics."""
    hits = sum(m.get("layerstream_prefix_cache_hits_total", 0) for m in metrics_by_url.values())
    queries = sum(m.get("layerstream_prefix_cache_queries_total", 0) for m in metrics_by_url.values())
    return round(hits / queries, 3) if queries else None


def gateway_sender(kind, policy, reps, model_id, args, port):
    """(send function, stop function) for one gateway in front of `reps`."""
    urls = [r.url for r in reps]
    if kind == "sglang":
        router = rp.SglangRouter(sys.executable, urls, policy, port)
        router.wait_ready()
        # No "model": each replica serves its own id and accepts a request without one.
        return (lambda msgs: post_chat(router.url, "", msgs, args.max_tokens)), router.stop
    if kind == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost-map download
        from litellm import Router

        router = Router(model_list=rp.litellm_model_list(urls, model_id, [r.model_id for r in reps]),
                        routing_strategy=policy, num_retries=5, retry_after=0, allowed_fails=0, cooldown_time=120)

        def send(msgs):
            r = router.completion(model=model_id, messages=msgs, max_tokens=args.max_tokens, temperature=0,
                                  timeout=600)
            return r.usage.completion_tokens, r.model or ""
        return send, lambda: None
    raise SystemExit(f"unknown gateway {kind!r} (sglang or litellm)")


def run_gateway(spec, args, port, links_dir):
    kind, _, policy = spec.partition(":")
    model_id = rp.model_id_of(args.model)
    models = rp.tagged_models(args.model, args.replicas, tempfile.mkdtemp(dir=links_dir))
    reps = rp.start_replicas(args.cli, args.model, args.replicas, args.base_port, [args.replica_args.split()],
                             models=models)
    watch = MetricsWatch(reps)
    victim, at_sigterm = reps[-1], {}

    def sigterm_victim():
        at_sigterm.update({r.url: rp.metrics(r.url) for r in reps})
        victim.sigterm()

    requests = prompts(args.requests, args.groups, args.rules)
    fire_after = int(args.requests * args.sigterm_at) if args.sigterm_one else 0
    try:
        send, stop_gateway = gateway_sender(kind, policy, reps, model_id, args, port)
        sent, wall = send_all(send, requests, args.clients, sigterm_victim if args.sigterm_one else None, fire_after)
        stop_gateway()
    finally:
        for r in reps:
            r.stop()
        watch.close()
    share, table = affinity(sent.before, reps)
    per = []
    for r in reps:
        m = watch.last.get(r.url, {})
        per.append({"url": r.url, "finished": m.get('layerstream_requests_total{outcome="finished"}', 0),
                    "cache_hit_tokens": m.get("layerstream_prefix_cache_hits_total", 0),
                    "cache_query_tokens": m.get("layerstream_prefix_cache_queries_total", 0)})
    return {"gateway": spec, "requests": args.requests, "clients": args.clients, "groups": args.groups,
            "errors": len(sent.errors), "error_samples": sent.errors[:3], "tokens": sent.tokens,
            "wall_s": round(wall, 2), "tokens_per_s": round(sent.tokens / wall, 2), "replicas": per,
            "before_sigterm": {"requests": len(sent.before), "affinity": share,
                               "prefix_hit_rate": hit_rate(at_sigterm) if args.sigterm_one else None,
                               "group_requests_per_replica": table},
            "prefix_hit_rate": hit_rate(watch.last),
            "sigterm": victim.url if args.sigterm_one else None,
            "drained_health_503": (victim.url in watch.saw_503) if args.sigterm_one else None}


def throughput(args):
    """One replica with CLIENTS clients, then REPLICAS replicas behind
    sglang round_robin with the same clients: aggregate tokens/s of each."""
    model_id = rp.model_id_of(args.model)
    msgs = [m for _, m in prompts(args.requests, args.groups, args.rules)]
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
            sent, wall = send_all(send, [(0, m) for m in msgs], args.clients)
            stop()
        finally:
            for r in reps:
                r.stop()
        out[f"{n} replica(s)" + ("" if n == 1 else " behind sglang round_robin")] = {
            "errors": len(sent.errors), "tokens": sent.tokens, "wall_s": round(wall, 2),
            "tokens_per_s": round(sent.tokens / wall, 2)}
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
    ap.add_argument("--groups", type=int, default=12, help="prompt groups sharing a system prompt")
    ap.add_argument("--rules", type=int, default=16, help="rules in each group's system prompt (its length)")
    ap.add_argument("--sigterm-at", type=float, default=0.75,
                    help="SIGTERM the last replica once this share of the requests is done")
    ap.add_argument("--no-sigterm", dest="sigterm_one", action="store_false",
                    help="do not SIGTERM a replica")
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
    with tempfile.TemporaryDirectory(prefix="replica-models-") as links_dir:
        for spec in args.gateways.split(","):
            result = run_gateway(spec, args, args.router_port, links_dir)
            print(json.dumps(result), flush=True)
            failed |= result["errors"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
