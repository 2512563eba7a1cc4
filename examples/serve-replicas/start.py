#!/usr/bin/env python3
"""Starts N `layerstream serve` replicas on 127.0.0.1 (each with its own
flags, e.g. the --vram/--ram `layerstream plan` suggests) and SGLang's router
in front of them, then waits; Ctrl-C (or SIGTERM) stops the router and drains
the replicas.

  examples/serve-replicas/start.py --cli build/ci/bin/layerstream --model M.gguf --replicas 2 \\
      --replica-args="--vram 2GiB --ram 4GiB --parallel 4" --policy cache_aware

Clients then talk to http://127.0.0.1:ROUTER_PORT/v1 (OpenAI API). Give
--replica-args once per replica to vary the budgets:
  --replica-args="--vram 2GiB" --replica-args="--vram 1GiB --ram 8GiB"
--setup only makes the gateways' virtual environment (build/replicas-venv).
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replicas as rp  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli")
    ap.add_argument("--model")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--replica-args", action="append", default=None,
                    help="flags of a replica (repeat: one per replica, reused round-robin)")
    ap.add_argument("--policy", default="cache_aware", choices=["round_robin", "cache_aware", "power_of_two", "random"])
    ap.add_argument("--base-port", type=int, default=8081)
    ap.add_argument("--router-port", type=int, default=30000)
    ap.add_argument("--venv", default=rp.DEFAULT_VENV)
    ap.add_argument("--setup", action="store_true")
    args = ap.parse_args()
    py = rp.setup_venv(args.venv)
    if args.setup:
        print(f"gateways installed in {args.venv}")
        return 0
    if not args.cli or not args.model:
        ap.error("--cli and --model are required")
    per_replica = [a.split() for a in (args.replica_args or ["--parallel 4"])]
    reps = rp.start_replicas(args.cli, args.model, args.replicas, args.base_port, per_replica)
    router = rp.SglangRouter(py, [r.url for r in reps], args.policy, args.router_port)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        router.wait_ready()
        for r in reps:
            print(f"replica {r.url} (log {r.log.name})")
        print(f"sglang-router {args.policy}: {router.url}/v1 (log {router.log.name}); Ctrl-C stops", flush=True)
        while not stop and router.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        router.stop()
        for r in reps:
            r.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
