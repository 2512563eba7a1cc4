#!/usr/bin/env python3
"""Time to first token of the same prompt sent several times to one
`layerstream serve` (started here on 127.0.0.1): the first prefills it
whole, the later ones find it in the prefix cache and prefill only its last
token. Prints per request the TTFT, prompt tokens and cached tokens.

  examples/serve-replicas/repeat_prompt.py --cli build/ci/bin/layerstream \\
      --model ~/.cache/layerstream/models/SmolLM2-135M-Instruct.Q4_1.gguf --tokens 470 --times 3
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "serve"))
from serve_client import Server, stream  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replicas as rp  # noqa: E402


def prompt_of(port, tokens):
    """A prose prompt of about `tokens` tokens (measured by the server)."""
    words = "the layers of a model stream from disk to the device while the last layer computes".split()
    text = " ".join(words[i % len(words)] for i in range(tokens))
    for _ in range(6):  # refine the length from the server's count
        _, events, _, _ = stream(port, "/v1/completions", {"prompt": text, "max_tokens": 1, "stream": True,
                                                           "stream_options": {"include_usage": True}})
        n = [e["usage"]["prompt_tokens"] for e in events if e.get("usage")][0]
        if n == tokens:
            break
        have = text.split()
        text = " ".join(have[:len(have) + tokens - n] if n > tokens else
                        have + [words[i % len(words)] for i in range(tokens - n)])
    return text


def main():
    ap = rp.parser_with_cli_and_model(__doc__)
    ap.add_argument("--tokens", type=int, default=470)
    ap.add_argument("--times", type=int, default=3)
    ap.add_argument("--server-args", default="--parallel 2 --ctx 1024")
    args = ap.parse_args()
    with Server(args.cli, args.model, *args.server_args.split()) as s:
        prompt = prompt_of(s.port, args.tokens)
    # A fresh server: the first timed request finds nothing in the cache.
    with Server(args.cli, args.model, *args.server_args.split()) as s:
        first = None
        for i in range(args.times):
            _, events, ttft, _ = stream(s.port, "/v1/completions", {
                "prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}})
            usage = [e["usage"] for e in events if e.get("usage")][0]
            first = first or ttft
            print(f"request {i + 1}: time to first token {ttft:.3f} s ({ttft / first:.2f}x the first), "
                  f"prompt {usage['prompt_tokens']} tokens, cached {usage['prompt_tokens_details']['cached_tokens']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
