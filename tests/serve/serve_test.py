"""End-to-end tests of `layerstream serve` on a small example model, over
127.0.0.1 only. One case per run (ctest registers each):

  openai_client  the official openai client: models, a streamed chat
                 completion, plain completions, stop strings, seeds, usage
  bad_requests   every kind of bad request gets its 4xx JSON error, then a
                 good request still succeeds
  busy           all sequences busy and the queue full: 503 with a JSON error
  disconnect     a streaming client that goes away frees its sequence
  api_key        --api-key: 401 without the key or with a wrong one
  load           200 requests from 8 concurrent clients, none fails
  shutdown       SIGTERM: the running stream finishes, the server exits 0
  prefix_cache   the same prompt again prefills only its last token; each
                 chat turn prefills only its new tokens; outputs are those of
                 --no-prefix-cache, also when 2 sequences hold 10 prompts
  sampling       the official client: logprobs with top_logprobs=5 (sorted,
                 the token among them at temperature 0), n=3 (streamed and
                 not), echo with logprobs, penalties and logit_bias change
                 the text as they should, /tokenize and /detokenize
  router         /health, /load, /get_load, the vllm:* metrics (counters
                 rise), /health fast while 8 clients stream, 503 while
                 draining; --cors-origin headers and OPTIONS preflights

usage: serve_test.py CASE --cli LAYERSTREAM --model MODEL.gguf [--venv DIR]
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import venv_exec  # noqa: E402

venv_exec.reexec_in_venv()
from serve_client import Server, metrics, request, stream  # noqa: E402

ARGS = None


def model_id():
    return os.path.splitext(os.path.basename(ARGS.model))[0]


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def case_openai_client():
    import openai

    with Server(ARGS.cli, ARGS.model, "--parallel", "2") as s:
        client = openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        ids = [m.id for m in client.models.list().data]
        check(ids == [model_id()], f"models: {ids}")

        messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}]
        chunks = list(client.chat.completions.create(model=model_id(), messages=messages, max_tokens=12,
                                                     temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        content = [c.choices[0].delta.content or "" for c in chunks if c.choices]
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        usage = [c.usage for c in chunks if c.usage]
        streamed = "".join(content)
        check(chunks[0].choices[0].delta.role == "assistant", "the first delta names the assistant role")
        check(reasons in (["length"], ["stop"]), f"one finish_reason at the end: {reasons}")
        check(len(usage) == 1 and usage[0].completion_tokens >= 1 and usage[0].prompt_tokens > 5,
              f"usage: {usage}")
        check(reasons != ["length"] or usage[0].completion_tokens == 12, "length means max_tokens were generated")
        # The same request without streaming, greedy: the same text.
        whole = client.chat.completions.create(model=model_id(), messages=messages, max_tokens=12, temperature=0)
        check(whole.choices[0].message.content == streamed,
              f"greedy chat: streamed {streamed!r} but whole {whole.choices[0].message.content!r}")
        check(whole.choices[0].message.role == "assistant", "assistant message")
        check(whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens, "usage sums")

        # Plain completion, and max_tokens.
        c = client.completions.create(model=model_id(), prompt="Once upon a time", max_tokens=16, temperature=0)
        text = c.choices[0].text
        check(c.object == "text_completion" and c.usage.prompt_tokens >= 2, f"completion: {c}")
        check(c.usage.completion_tokens <= 16 and len(text) > 0, f"completion text {text!r}, usage {c.usage}")
        # Streaming the same completion gives the same text.
        pieces = [e.choices[0].text for e in client.completions.create(
            model=model_id(), prompt="Once upon a time", max_tokens=16, temperature=0, stream=True)]
        check("".join(pieces) == text, f"streamed completion {''.join(pieces)!r} vs {text!r}")
        # A stop string from the middle of that text ends generation just before it.
        stop = text[len(text) // 2:len(text) // 2 + 2]
        if stop.strip():
            cut = client.completions.create(model=model_id(), prompt="Once upon a time", max_tokens=16,
                                            temperature=0, stop=[stop])
            check(cut.choices[0].text == text[:text.index(stop)] and cut.choices[0].finish_reason == "stop",
                  f"stop {stop!r}: got {cut.choices[0].text!r} ({cut.choices[0].finish_reason}) from {text!r}")
        # Sampling: the same seed gives the same text.
        a, b = (client.completions.create(model=model_id(), prompt="The", max_tokens=10, temperature=1.0,
                                          top_p=0.9, seed=42).choices[0].text for _ in range(2))
        check(a == b, f"seed 42 twice: {a!r} vs {b!r}")
    print("openai client: models, streamed chat, completion, stop, seed ok")


def expect_error(port, body, status, param=None, code=None, path="/v1/completions", raw=None):
    got, data = request(port, "POST", path, body=raw if raw is not None else body)
    check(got == status, f"{body if raw is None else raw[:60]!r}: status {got}, want {status}: {data}")
    check(isinstance(data, dict) and isinstance(data.get("error"), dict) and data["error"].get("message"),
          f"a JSON error object: {data}")
    if param is not None:
        check(data["error"]["param"] == param, f"param {data['error']['param']!r}, want {param!r}")
    if code is not None:
        check(data["error"]["code"] == code, f"code {data['error']['code']!r}, want {code!r}")
    return data


def case_bad_requests():
    with Server(ARGS.cli, ARGS.model, "--parallel", "2", "--ctx", "64", "--max-body", "4096") as s:
        p = s.port
        expect_error(p, None, 400, raw="{not json")
        expect_error(p, None, 400, raw="[1, 2]")
        expect_error(p, {"max_tokens": 4}, 400, param="prompt")
        expect_error(p, {"prompt": 12}, 400, param="prompt")
        expect_error(p, {"prompt": "hi", "max_tokens": "four"}, 400, param="max_tokens")
        expect_error(p, {"prompt": "hi", "max_tokens": -1}, 400, param="max_tokens")
        expect_error(p, {"prompt": "hi", "temperature": "hot"}, 400, param="temperature")
        expect_error(p, {"prompt": "hi", "temperature": 7}, 400, param="temperature")
        expect_error(p, {"prompt": "hi", "top_p": 1.5}, 400, param="top_p")
        expect_error(p, {"prompt": "hi", "stream": "yes"}, 400, param="stream")
        expect_error(p, {"prompt": "hi", "stop": 5}, 400, param="stop")
        expect_error(p, {"prompt": "hi", "seed": 1.5}, 400, param="seed")
        expect_error(p, {"prompt": "hi", "n": 3}, 400, param="n")  # more than --parallel 2
        expect_error(p, {"prompt": "hi", "frobnicate": 1}, 400, param="frobnicate")
        expect_error(p, {"prompt": "hi", "logit_bias": [1]}, 400, param="logit_bias")
        expect_error(p, {"prompt": "hi", "max_tokens": 500}, 400, param="max_tokens")  # past --ctx 64
        expect_error(p, {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}},
                     400, param="response_format", path="/v1/chat/completions")
        expect_error(p, {"messages": "hi"}, 400, param="messages", path="/v1/chat/completions")
        expect_error(p, {"messages": [{"role": "user", "content": 5}]}, 400, param="messages[0].content",
                     path="/v1/chat/completions")
        expect_error(p, {"messages": [{"role": "wizard", "content": "x"}]}, 400, param="messages[0].role",
                     path="/v1/chat/completions")
        long_prompt = " ".join(["word"] * 200)  # far more than --ctx 64 positions
        expect_error(p, {"prompt": long_prompt, "max_tokens": 4}, 400, code="context_length_exceeded")
        expect_error(p, {"prompt": "hi", "model": "no-such-model"}, 404, param="model", code="model_not_found")
        expect_error(p, {"prompt": "x" * 8000}, 413)
        got, data = request(p, "GET", "/v1/nothing-here")
        check(got == 404 and "error" in data, f"unknown route: {got} {data}")
        # The server still serves.
        got, data = request(p, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 4, "model": model_id()})
        check(got == 200 and data["usage"]["completion_tokens"] >= 1, f"good request after bad ones: {got} {data}")
        got, data = request(p, "GET", "/health")
        check(got == 200 and data == {"status": "ok"}, f"health: {data}")
    print("bad requests: each got its 4xx JSON error; a good request still succeeded")


def case_busy():
    # One sequence, a queue of one: a third concurrent request is refused.
    with Server(ARGS.cli, ARGS.model, "--parallel", "1", "--queue", "1") as s:
        long_body = {"prompt": "Tell me a story", "max_tokens": 400, "stream": True}
        conns = []
        for _ in range(2):  # one runs, one waits
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            c.request("POST", "/v1/completions", body=json.dumps(long_body), headers={"Content-Type": "application/json"})
            conns.append(c)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = metrics(s.port)
            if m["layerstream_active_sequences"] == 1 and m["layerstream_queue_length"] == 1:
                break
            time.sleep(0.05)
        check(m["layerstream_queue_length"] == 1, f"one request queued: {m}")
        data = expect_error(s.port, {"prompt": "hi", "max_tokens": 2}, 503, code="server_busy")
        check("--parallel" in data["error"]["message"], "the error says what would help")
        check(metrics(s.port)['layerstream_requests_total{outcome="rejected"}'] == 1, "counted as rejected")
        for c in conns:
            c.close()  # both go away: their sequence and queue place are freed
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got, data = request(s.port, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
            if got == 200:
                break
            time.sleep(0.2)
        check(got == 200, f"after the clients left, a request succeeds: {got} {data}")
    print("busy: 503 with a JSON error when the queue is full; served again once free")


def case_disconnect():
    with Server(ARGS.cli, ARGS.model, "--parallel", "2") as s:
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Go on", "max_tokens": 1500, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        check(r.status == 200, f"stream status {r.status}")
        r.readline()  # the first event arrived: the sequence is generating
        check(metrics(s.port)["layerstream_active_sequences"] == 1, "one active sequence")
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = metrics(s.port)
            if m["layerstream_active_sequences"] == 0:
                break
            time.sleep(0.05)
        check(m["layerstream_active_sequences"] == 0, f"the sequence was freed: {m}")
        check(m['layerstream_requests_total{outcome="cancelled"}'] == 1, f"counted as cancelled: {m}")
        check(m["layerstream_generated_tokens_total"] < 1500, "it stopped long before max_tokens")
    print(f"disconnect: sequence freed after {m['layerstream_generated_tokens_total']:.0f} tokens")


def case_api_key():
    import openai

    with Server(ARGS.cli, ARGS.model, "--api-key", "s3cret") as s:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            for method, path, body in (("GET", "/v1/models", None), ("POST", "/v1/completions", {"prompt": "hi"}),
                                       ("POST", "/v1/chat/completions", {"messages": []}), ("GET", "/metrics", None)):
                got, data = request(s.port, method, path, body, headers={"Content-Type": "application/json", **headers})
                check(got == 401 and data["error"]["code"] == "invalid_api_key", f"{path} {headers}: {got} {data}")
        check(request(s.port, "GET", "/health", headers={})[0] == 200, "/health needs no key")
        bad = openai.OpenAI(base_url=s.base + "/v1", api_key="wrong", max_retries=0)
        try:
            bad.completions.create(model=model_id(), prompt="hi", max_tokens=2)
            check(False, "a wrong key must fail")
        except openai.AuthenticationError as e:
            check(e.status_code == 401, f"status {e.status_code}")
        good = openai.OpenAI(base_url=s.base + "/v1", api_key="s3cret", max_retries=0)
        c = good.completions.create(model=model_id(), prompt="hi", max_tokens=2)
        check(c.usage.completion_tokens >= 1, "the right key works")
    print("api key: 401 without it or with a wrong one; served with it")


def case_load():
    n, workers = 200, 8
    with Server(ARGS.cli, ARGS.model, "--parallel", "8", "--queue", "64") as s:

        def one(i):
            chat = i % 2 == 0
            path = "/v1/chat/completions" if chat else "/v1/completions"
            body = {"max_tokens": 3 + i % 5, "temperature": 0.7, "seed": i, "model": model_id()}
            if chat:
                body["messages"] = [{"role": "user", "content": f"Request {i}: say something."}]
            else:
                body["prompt"] = f"Request {i} says"
            if i % 3 == 0:
                body["stream"] = True
                status, events, _, _ = stream(s.port, path, body)
                return status, len(events)
            status, data = request(s.port, "POST", path, body)
            return status, data

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(one, range(n)))
        bad = [(i, r) for i, r in enumerate(results) if r[0] != 200]
        check(not bad, f"{len(bad)} of {n} requests failed: {bad[:5]}")
        m = metrics(s.port)
        check(m['layerstream_requests_total{outcome="finished"}'] == n, f"all {n} finished: {m}")
        check(m["layerstream_active_sequences"] == 0 and m["layerstream_queue_length"] == 0, "idle at the end")
        # Sequences shared passes: fewer passes than generated tokens.
        check(m["layerstream_passes_total"] < m["layerstream_generated_tokens_total"],
              f"passes {m['layerstream_passes_total']} < tokens {m['layerstream_generated_tokens_total']}")
    print(f"load: {n} requests from {workers} clients, no error; "
          f"{m['layerstream_generated_tokens_total']:.0f} tokens in {m['layerstream_passes_total']:.0f} passes")


def case_shutdown():
    s = Server(ARGS.cli, ARGS.model, "--parallel", "2")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": "Go", "max_tokens": 40, "stream": True}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.readline()
    s.proc.send_signal(signal.SIGTERM)
    lines = [raw.decode("utf-8", errors="replace").strip() for raw in r]
    check("data: [DONE]" in lines, f"the running stream finished: {lines[-3:]}")
    finishes = [json.loads(x[6:])["choices"][0]["finish_reason"] for x in lines
                if x.startswith("data: {") and "choices" in x]
    check(finishes and finishes[-1] == "length", f"it ran to max_tokens: {finishes[-3:]} {lines[-6:]}")
    code = s.proc.wait(60)
    check(code == 0, f"exit status {code}:\n{s.stderr()}")
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        check(False, "the port still accepts after exit")
    except OSError:
        pass
    os.unlink(s.log.name)
    print("shutdown: SIGTERM finished the running stream and exited 0")


def completion(port, prompt, max_tokens=8, **extra):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "model": model_id(), **extra}
    status, data = request(port, "POST", "/v1/completions", body)
    check(status == 200, f"completion: {status} {data}")
    return data


def prefilled_by(port, send):
    """(send()'s result, prompt tokens the server decoded for it)."""
    before = metrics(port)["layerstream_prefill_tokens_total"]
    out = send()
    return out, metrics(port)["layerstream_prefill_tokens_total"] - before


def chat_turns(port, turns):
    """A conversation of `turns` turns; per turn (usage, prefilled tokens)."""
    messages, out = [{"role": "system", "content": "You answer in one short sentence."}], []
    for t in range(turns):
        messages.append({"role": "user", "content": f"Question {t}: what comes after {t} when counting?"})
        body = {"messages": messages, "max_tokens": 6, "temperature": 0, "model": model_id()}
        (status, data), prefilled = prefilled_by(port, lambda: request(port, "POST", "/v1/chat/completions", body))
        check(status == 200, f"turn {t}: {status} {data}")
        messages.append({"role": "assistant", "content": data["choices"][0]["message"]["content"]})
        out.append((data["usage"], prefilled, data["choices"][0]["message"]["content"]))
    return out


def distinct_prompts():
    shared = "A long shared preamble that every second prompt begins with, " * 3
    return [(shared if i % 2 == 0 else "") + f"prompt number {i} asks about topic {i * 7}" for i in range(10)]


def case_prefix_cache():
    # The default (int8) path: a chat's later turns reuse the KV its answers'
    # one-token passes wrote, which the batch-invariant kernels make equal to
    # a prefill's rows (the chats pass 128 positions, where one-token
    # attention splits), so greedy outputs match a cache-off server even on
    # this random-weight model's near-tied logits.
    prompt = " ".join(f"word{i}" for i in range(60))
    with Server(ARGS.cli, ARGS.model, "--parallel", "2") as s:
        runs = [prefilled_by(s.port, lambda: completion(s.port, prompt)) for _ in range(3)]
        n = runs[0][0]["usage"]["prompt_tokens"]
        cached = [r[0]["usage"]["prompt_tokens_details"]["cached_tokens"] for r in runs]
        check(cached == [0, n - 1, n - 1], f"cached_tokens {cached} for a {n}-token prompt sent 3 times")
        check([r[1] for r in runs] == [n, 1, 1], f"prefilled {[r[1] for r in runs]} of {n}")
        texts = [r[0]["choices"][0]["text"] for r in runs]
        check(texts[1:] == texts[:2], f"greedy outputs differ across the cache: {texts}")
        turns = chat_turns(s.port, 6)
        for t in range(1, len(turns)):
            usage, prefilled, _ = turns[t]
            prev = turns[t - 1][0]
            cached_t = usage["prompt_tokens_details"]["cached_tokens"]
            check(prefilled == usage["prompt_tokens"] - cached_t, f"turn {t}: prefilled {prefilled}, usage {usage}")
            # What the last turn decoded (prompt and answer) is reused: only the
            # new user message and the template's turn marks are prefilled.
            check(cached_t >= prev["prompt_tokens"], f"turn {t}: cached {cached_t} < previous prompt {prev}")
        m = metrics(s.port)
        check(m[f'vllm:prefix_cache_hits_total{{model_name="{model_id()}"}}'] == m["layerstream_prefix_cache_hits_total"]
              > 0, "hits counted under both names")
        chat_on = [t[2] for t in turns]
        news = [t[0]["prompt_tokens"] - turns[i - 1][0]["prompt_tokens"] if i else t[0]["prompt_tokens"]
                for i, t in enumerate(turns)]
        print(f"prefix cache: {n}-token prompt x3 prefilled {[r[1] for r in runs]}; chat turns prefilled "
              f"{[t[1] for t in turns]} (prompt growth {news})")
    with Server(ARGS.cli, ARGS.model, "--parallel", "2", "--no-prefix-cache") as s:
        plain = completion(s.port, prompt)
        check(plain["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "no cache: nothing cached")
        check(plain["choices"][0]["text"] == texts[0], f"cache off {plain['choices'][0]['text']!r} vs on {texts[0]!r}")
        chat_off = [t[2] for t in chat_turns(s.port, 6)]
        check(chat_off == chat_on, f"chat with the cache off {chat_off} vs on {chat_on}")
        reference = [completion(s.port, p, max_tokens=6)["choices"][0]["text"] for p in distinct_prompts()]
    # A pool of 2 sequences (1 decoding, 1 cache entry) for 10 prompts, twice.
    with Server(ARGS.cli, ARGS.model, "--parallel", "1", "--cache-sequences", "1") as s:
        for r in range(2):
            got = [completion(s.port, p, max_tokens=6)["choices"][0]["text"] for p in distinct_prompts()]
            check(got == reference, f"round {r} with eviction: {got} vs {reference}")
        m = metrics(s.port)
        check(m["layerstream_prefix_cache_hits_total"] > 0, "the shared preamble was reused")
    print("prefix cache: outputs equal with the cache off, and under eviction (2 sequences, 10 prompts)")


def vllm(m, name, labels=""):
    key = f'{name}{{model_name="{model_id()}"{"," + labels if labels else ""}}}'
    check(key in m, f"{key} missing from /metrics")
    return m[key]


def case_sampling():
    import openai

    with Server(ARGS.cli, ARGS.model, "--parallel", "3") as s:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="unused")
        messages = [{"role": "user", "content": "Tell me a story"}]
        r = client.chat.completions.create(model=model_id(), messages=messages, max_tokens=8, temperature=0,
                                           logprobs=True, top_logprobs=5)
        content = r.choices[0].logprobs.content
        check(len(content) == r.usage.completion_tokens, f"a logprob per token: {len(content)}")
        for t in content:
            tops = [x.logprob for x in t.top_logprobs]
            check(len(tops) == 5 and tops == sorted(tops, reverse=True), f"5 sorted alternatives: {tops}")
            check(abs(tops[0] - t.logprob) < 1e-6 and t.logprob <= 0, "greedy: the token is the most likely")
        # n=3, streamed and not: three choices, each ending with a reason.
        many = client.completions.create(model=model_id(), prompt="Once upon a time", max_tokens=6, n=3,
                                         temperature=1.0, seed=5)
        check(sorted(c.index for c in many.choices) == [0, 1, 2], "three choices")
        again = client.completions.create(model=model_id(), prompt="Once upon a time", max_tokens=6, n=3,
                                          temperature=1.0, seed=5)
        check([c.text for c in many.choices] == [c.text for c in again.choices], "a seed repeats every choice")
        ended = {}
        for chunk in client.completions.create(model=model_id(), prompt="Once upon a time", max_tokens=6, n=3,
                                               stream=True):
            for c in chunk.choices:
                if c.finish_reason:
                    ended[c.index] = c.finish_reason
        check(sorted(ended) == [0, 1, 2], f"every streamed choice ended: {ended}")
        # echo + logprobs: the prompt's tokens first, the first without a logprob.
        e = client.completions.create(model=model_id(), prompt="Once upon a time", max_tokens=0, echo=True,
                                      logprobs=2)
        lp = e.choices[0].logprobs
        check(e.choices[0].text == "Once upon a time", f"echo: {e.choices[0].text!r}")
        check(lp.token_logprobs[0] is None and all(v <= 0 for v in lp.token_logprobs[1:]), "prompt logprobs")
        _, toks = request(s.port, "POST", "/tokenize", {"prompt": "Once upon a time"})
        check(len(lp.tokens) == toks["count"], f"one logprob per prompt token: {len(lp.tokens)} {toks}")
        _, text = request(s.port, "POST", "/detokenize", {"tokens": toks["tokens"]})
        check("Once upon a time" in text["prompt"], f"detokenize: {text}")
        # logit_bias bans the greedy first token; a strong presence penalty
        # against a repeating greedy text makes fewer repeats.
        plain = client.completions.create(model=model_id(), prompt="la la la la la", max_tokens=12, temperature=0,
                                          logprobs=0)
        first = plain.choices[0].logprobs.tokens[0]
        _, ids = request(s.port, "POST", "/tokenize", {"prompt": first, "add_special_tokens": False})
        if len(ids["tokens"]) == 1:
            banned = client.completions.create(model=model_id(), prompt="la la la la la", max_tokens=1,
                                               temperature=0, logit_bias={str(ids["tokens"][0]): -100}, logprobs=0)
            check(banned.choices[0].logprobs.tokens[0] != first, "logit_bias -100 bans the greedy token")
        def distinct(text):
            return len(set(text.split()))
        penalised = client.completions.create(model=model_id(), prompt="la la la la la", max_tokens=12,
                                              temperature=0, presence_penalty=2.0, frequency_penalty=2.0)
        check(distinct(penalised.choices[0].text) >= distinct(plain.choices[0].text),
              f"penalties: {penalised.choices[0].text!r} vs {plain.choices[0].text!r}")
    print("sampling: logprobs, n=3, echo, logit_bias, penalties, tokenize")


def case_router():
    with Server(ARGS.cli, ARGS.model, "--parallel", "4", "--queue", "16") as s:
        p = s.port
        check(request(p, "GET", "/health") == (200, {"status": "ok"}), "health ok")
        check(request(p, "GET", "/load") == (200, {"server_load": 0}), "idle /load")
        check(request(p, "GET", "/get_load") == (200, {"load": 0}), "idle /get_load")
        before = metrics(p)
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                     "vllm:gpu_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                     "vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count"):
            vllm(before, name)
        completion(p, "Count to ten: " + " ".join(str(i) for i in range(30)), max_tokens=6)
        completion(p, "Count to ten: " + " ".join(str(i) for i in range(30)), max_tokens=6)
        after = metrics(p)
        succeeded = sum(vllm(after, "vllm:request_success_total", f'finished_reason="{r}"') for r in ("stop", "length"))
        check(succeeded == 2, f"2 successes: {succeeded}")
        for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                     "vllm:time_to_first_token_seconds_count"):
            check(vllm(after, name) > vllm(before, name), f"{name} rose: {vllm(before, name)} -> {vllm(after, name)}")
        check(vllm(after, "vllm:time_to_first_token_seconds_bucket", 'le="+Inf"') == 2, "2 first tokens")

        # 8 streaming clients: /health and /load answer off the compute thread.
        body = {"prompt": "Tell a long story", "max_tokens": 300, "stream": True, "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            streams = [pool.submit(stream, p, "/v1/completions", body) for _ in range(8)]
            deadline, seen = time.monotonic() + 60, 0
            while time.monotonic() < deadline and seen < 8:
                seen = max(seen, request(p, "GET", "/load")[1]["server_load"], request(p, "GET", "/get_load")[1]["load"])
                time.sleep(0.02)
            check(seen >= 5, f"load while 8 stream (4 run, 4 wait): at most {seen}")
            # Admitted requests count as running from their first pass: poll (a sanitizer build is slow).
            deadline = time.monotonic() + 60
            while True:
                m = metrics(p)
                busy = vllm(m, "vllm:num_requests_running") >= 1 and vllm(m, "vllm:kv_cache_usage_perc") > 0
                if busy or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            check(busy, f"running and KV use while streaming: {m}")
            worst = 0.0
            for _ in range(20):
                t0 = time.monotonic()
                check(request(p, "GET", "/health")[0] == 200, "health under load")
                worst = max(worst, time.monotonic() - t0)
            check(worst < 1.0, f"/health took {worst:.3f} s under load")
            check(all(f.result()[0] == 200 for f in streams), "every stream succeeded")
        print(f"router: vllm:* metrics present and rising; /health under 8 streams: worst {worst * 1000:.1f} ms")

        # Draining: a running request (long enough to outlast the checks)
        # finishes; /health and new requests get 503 meanwhile.
        c = http.client.HTTPConnection("127.0.0.1", p, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({**body, "max_tokens": 1500}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.readline()
        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and request(p, "GET", "/health")[0] == 200:
            time.sleep(0.01)
        check(request(p, "GET", "/health") == (503, {"status": "draining"}), "health 503 while draining")
        got, data = request(p, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
        check(got == 503, f"a new request while draining: {got} {data}")
        lines = [raw.decode("utf-8", errors="replace").strip() for raw in r]
        check("data: [DONE]" in lines, "the running stream finished during the drain")
        check(s.proc.wait(60) == 0, "exit 0")
    print("router: /health 503 and new requests 503 while draining; the running stream finished")

    origin = "http://ui.example"
    with Server(ARGS.cli, ARGS.model, "--cors-origin", origin, "--api-key", "k") as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        conn.request("OPTIONS", "/v1/chat/completions", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        r = conn.getresponse()
        r.read()
        check(r.status == 204, f"preflight status {r.status} (no key needed)")
        check(r.getheader("Access-Control-Allow-Origin") == origin, "preflight origin")
        check("POST" in r.getheader("Access-Control-Allow-Methods", ""), "preflight methods")
        check("authorization" in r.getheader("Access-Control-Allow-Headers", "").lower(), "preflight headers")
        conn.request("GET", "/v1/models", headers={"Origin": origin, "Authorization": "Bearer k"})
        r = conn.getresponse()
        r.read()
        check(r.status == 200 and r.getheader("Access-Control-Allow-Origin") == origin, "CORS on a response")
        conn.close()
    with Server(ARGS.cli, ARGS.model) as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        conn.request("OPTIONS", "/v1/models", headers={"Origin": origin})
        r = conn.getresponse()
        r.read()
        check(r.status == 404 and r.getheader("Access-Control-Allow-Origin") is None, "no CORS unless asked")
    print("router: CORS headers and OPTIONS preflight with --cors-origin, none without")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ARGS = ap.parse_args()
    fn = globals().get("case_" + ARGS.case)
    if fn is None:
        print(f"unknown case {ARGS.case}", file=sys.stderr)
        return 2
    fn()
    return 0


if __name__ == "__main__":
    sys.exit(main())
