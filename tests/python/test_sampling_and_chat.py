"""Sampling options checked by the library, the library's seeds, stop
strings, finish reasons, logprobs (Context and create_completion's OpenAI
shape) and create_chat_completion with the file's chat template and tool
calls, on the tiny example model."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

import layerstream as ls
from layerstream.chat import ChatCall

PROMPT = "Once upon a time"
GREEDY = dict(temperature=0.0, stop_at_eog=False)
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                                  "parameters": {"type": "object",
                                                                 "properties": {"city": {"type": "string"}}}}}


@pytest.fixture()
def model(tiny_model):
    return ls.Model(tiny_model, backend=ls.Backend.HOST)


@pytest.fixture()
def long_model(tiny_model):
    """The tiny model with room for a prompt that lists tools (its tokens are short)."""
    return ls.Model(tiny_model, backend=ls.Backend.HOST, context=2048)


@pytest.mark.parametrize("field, value", [("top_p", 0.0), ("typical_p", 1.5), ("temperature", -1.0),
                                          ("presence_penalty", math.inf)])
def test_sampling_values_are_checked_by_the_library(model, field, value):
    with model.create_context() as ctx:
        with pytest.raises(ValueError, match=field) as e:
            ctx.complete(PROMPT, max_tokens=2, **{field: value})
        assert isinstance(e.value, ls.InvalidArgumentError)
    with pytest.raises(ValueError, match=field):
        ls.SamplerChain(**{field: value})
    with pytest.raises(ValueError, match=field):
        model.create_completion(PROMPT, max_tokens=2, **{field: value})


def test_a_refused_stream_leaves_the_models_sequence_free(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=1)
    with pytest.raises(ValueError, match="top_p") as refused:
        model.create_completion(PROMPT, max_tokens=2, top_p=0.0, stream=True)
    with pytest.raises(ValueError, match="min_p"):
        model.create_chat_completion(MESSAGES, max_tokens=2, min_p=2.0, stream=True)
    assert refused.value is not None  # the traceback (and its frames) still alive here
    assert model.create_completion(PROMPT, max_tokens=2, temperature=0)["usage"]["completion_tokens"] <= 2
    model.close()


def test_logit_bias_token_ids_are_checked_against_the_vocabulary(model):
    with model.create_context() as ctx, pytest.raises(ValueError, match=str(model.n_vocab)):
        ctx.complete(PROMPT, max_tokens=2, logit_bias={model.n_vocab: 1.0})


def test_a_random_seed_is_the_librarys_and_reported(model):
    with model.create_context() as ctx:
        first = ctx.complete(PROMPT, max_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                             stop_at_eog=False)
        ctx.clear()
        again = ctx.complete(PROMPT, max_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                             stop_at_eog=False, seed=first.seeds[0])
    assert again.seeds == first.seeds and again.generated == first.generated
    chain = ls.SamplerChain(temperature=1.0)
    assert ls.SamplerChain(temperature=1.0).seed != chain.seed  # a fresh draw per chain
    row = np.linspace(0.0, 1.0, model.n_vocab, dtype=np.float32)
    replay = ls.SamplerChain(temperature=1.0, seed=chain.seed)
    assert [chain.sample(row) for _ in range(8)] == [replay.sample(row) for _ in range(8)]


def test_logit_bias_forces_and_bans_tokens(model):
    with model.create_context() as ctx:
        ref = ctx.complete(PROMPT, max_tokens=6, **GREEDY).generated[0]
        forced = ref[-1] + 1
        ctx.clear()
        assert ctx.complete(PROMPT, max_tokens=6, logit_bias={forced: 1e4}, **GREEDY).generated[0] == [forced] * 6
        ctx.clear()
        banned = ctx.complete(PROMPT, max_tokens=6, logit_bias={ref[0]: -math.inf}, **GREEDY).generated[0]
    assert ref[0] not in banned


def test_presence_penalty_keeps_greedy_tokens_distinct(model):
    with model.create_context() as ctx:
        plain = ctx.complete(PROMPT, max_tokens=24, **GREEDY).generated[0]
        ctx.clear()
        penalized = ctx.complete(PROMPT, max_tokens=24, presence_penalty=1e4, repeat_last_n=-1,
                                 **GREEDY).generated[0]
    assert len(set(plain)) < len(plain), "the greedy reference repeats no token: the test shows nothing"
    assert len(set(penalized)) == len(penalized)


def _stop_string(text: str) -> str:
    """A stop string that first occurs inside `text` (not at its start)."""
    for start in range(3, len(text) - 2):
        s = text[start:start + 2]
        if "\ufffd" not in s and text.find(s) == start:
            return s
    pytest.fail(f"no stop string to cut {text!r} with")


def test_stop_strings_end_the_text_with_finish_reason_stop(model):
    with model.create_context() as ctx:
        ref = ctx.complete(PROMPT, max_tokens=24, **GREEDY)
    assert ref.finish == ["length"]
    text = ref.text[0]
    stop = _stop_string(text)
    with model.create_context() as ctx:
        cut = ctx.complete(PROMPT, max_tokens=24, stop=[stop], **GREEDY)
    assert cut.finish == ["stop"] and cut.text[0] == text[: text.find(stop)]
    out = model.create_completion(PROMPT, max_tokens=24, temperature=0, stop=stop)
    assert out["choices"][0]["text"] == cut.text[0] and out["choices"][0]["finish_reason"] == "stop"
    chunks = list(model.create_completion(PROMPT, max_tokens=24, temperature=0, stop=[stop], stream=True))
    assert "".join(c["choices"][0]["text"] for c in chunks) == cut.text[0]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    long = model.create_completion(PROMPT, max_tokens=5, temperature=0)
    assert long["choices"][0]["finish_reason"] in ("length", "stop")
    assert (long["choices"][0]["finish_reason"] == "length") == (long["usage"]["completion_tokens"] == 5)


def _log_softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    return x - (x.max() + np.log(np.exp(x - x.max()).sum()))


def test_logprobs_are_the_log_softmax_of_the_logits(model):
    with model.create_context() as ctx:
        r = ctx.complete(PROMPT, max_tokens=6, temperature=0.9, seed=4, keep_logits=True, logprobs=3,
                         stop_at_eog=False)
    assert len(r.logprobs[0]) == len(r.generated[0]) == 6
    for row, token, lp in zip(r.logits, r.generated[0], r.logprobs[0]):
        ref = _log_softmax(row)
        assert lp.token == token and lp.logprob == pytest.approx(ref[token], abs=1e-4)
        best = np.argsort(-ref, kind="stable")[:3]
        assert [t for t, _ in lp.top] == list(best)
        assert [v for _, v in lp.top] == pytest.approx(list(ref[best]), abs=1e-4)


def test_create_completion_logprobs_in_openai_shape(model):
    out = model.create_completion(PROMPT, max_tokens=6, temperature=0.9, seed=4, logprobs=2)
    with model.create_context() as ctx:
        ref = ctx.complete(PROMPT, max_tokens=6, temperature=0.9, seed=4, logprobs=2)
    lp = out["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert lp["tokens"] == [model.detokenize([t]) for t in ref.generated[0]]
    assert lp["token_logprobs"] == pytest.approx([e.logprob for e in ref.logprobs[0]])
    assert all(len(top) <= 2 and max(top.values()) >= v - 1e-6 for top, v in zip(lp["top_logprobs"],
                                                                                 lp["token_logprobs"]))
    lengths = [len(p) for p in lp["tokens"]]
    assert lp["text_offset"] == [len(PROMPT) + sum(lengths[:i]) for i in range(len(lengths))]
    assert model.create_completion(PROMPT, max_tokens=2)["choices"][0]["logprobs"] is None
    with pytest.raises(ValueError, match="echo"):
        model.create_completion(PROMPT, max_tokens=2, logprobs=1, echo=True, stream=True)


def test_streamed_logprobs_add_up_to_the_whole_answers(model):
    whole = model.create_completion(PROMPT, max_tokens=8, temperature=0.9, seed=11, logprobs=3)
    chunks = list(model.create_completion(PROMPT, max_tokens=8, temperature=0.9, seed=11, logprobs=3, stream=True))
    parts = [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0]["logprobs"] is not None]
    assert len(parts) > 1  # token by token, not all at the end
    joined = {key: [v for part in parts for v in part[key]] for key in parts[0]}
    expected = whole["choices"][0]["logprobs"]
    assert joined["tokens"] == expected["tokens"]
    assert joined["token_logprobs"] == pytest.approx(expected["token_logprobs"], abs=1e-6)
    assert joined["text_offset"] == expected["text_offset"]
    assert [list(top) for top in joined["top_logprobs"]] == [list(top) for top in expected["top_logprobs"]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]


def test_chat_logprobs_whole_and_streamed(model):
    whole = model.create_chat_completion(MESSAGES, max_tokens=8, temperature=0.9, seed=5, logprobs=True,
                                         top_logprobs=2)
    content = whole["choices"][0]["logprobs"]["content"]
    assert len(content) == whole["usage"]["completion_tokens"]
    with model.create_context() as ctx:
        template = ls.ChatTemplate.for_model(model)
        prompt = template.apply(MESSAGES, leave_bos_to_tokenizer=True)
        ref = ctx.complete(model.tokenize(prompt, add_special=True, parse_special=True), max_tokens=8,
                           temperature=0.9, seed=5, stop=template.turn_ends, logprobs=2)
    assert [e["token"] for e in content] == [model.detokenize([t]) for t in ref.generated[0]]
    assert [e["logprob"] for e in content] == pytest.approx([e.logprob for e in ref.logprobs[0]], abs=1e-6)
    for entry in content:
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
        assert len(entry["top_logprobs"]) == 2 and entry["top_logprobs"][0]["logprob"] >= entry["logprob"] - 1e-6

    chunks = list(model.create_chat_completion(MESSAGES, max_tokens=8, temperature=0.9, seed=5, logprobs=True,
                                               top_logprobs=2, stream=True))
    streamed = [e for c in chunks if c["choices"][0]["logprobs"] for e in c["choices"][0]["logprobs"]["content"]]
    assert [e["token"] for e in streamed] == [e["token"] for e in content]
    assert [e["logprob"] for e in streamed] == pytest.approx([e["logprob"] for e in content], abs=1e-6)
    assert model.create_chat_completion(MESSAGES, max_tokens=2)["choices"][0]["logprobs"] is None
    with pytest.raises(ValueError, match="top_logprobs"):
        model.create_chat_completion(MESSAGES, max_tokens=2, top_logprobs=3)


def test_echo_with_logprobs_scores_the_prompt(model):
    out = model.create_completion(PROMPT, max_tokens=3, temperature=0, logprobs=1, echo=True)
    lp = out["choices"][0]["logprobs"]
    prompt_tokens = model.tokenize(PROMPT, add_special=True, parse_special=True)
    assert len(lp["tokens"]) == len(prompt_tokens) + out["usage"]["completion_tokens"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None and lp["text_offset"][0] == 0
    # The prompt's scores: the log-softmax of the logits before each prompt token.
    with model.create_context() as ctx:
        batch = ls.Batch()
        for i, t in enumerate(prompt_tokens):
            batch.add(t, i, logits=True)
        ctx.decode(batch)
        expected = [_log_softmax(ctx.logits(i - 1))[t] for i, t in enumerate(prompt_tokens) if i > 0]
    assert lp["token_logprobs"][1: len(prompt_tokens)] == pytest.approx(expected, abs=1e-4)


MESSAGES = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Weather in Paris?"}]


def _reference_reply(model, messages, tools=None, max_tokens=8):
    template = ls.ChatTemplate.for_model(model)
    prompt = template.apply(messages, tools_json=json.dumps(tools) if tools else "", leave_bos_to_tokenizer=True)
    with model.create_context() as ctx:
        return ctx.complete(prompt, max_tokens=max_tokens, temperature=0, stop=template.turn_ends), prompt


def test_create_chat_completion_renders_the_files_template(model):
    out = model.create_chat_completion(MESSAGES, max_tokens=8, temperature=0)
    ref, prompt = _reference_reply(model, MESSAGES)
    assert prompt.startswith("<|im_start|>system\nYou are brief.")  # the tiny model has no template: ChatML
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    (choice,) = out["choices"]
    assert choice["message"] == {"role": "assistant", "content": ref.text[0]}
    assert choice["finish_reason"] == {"length": "length", "stop": "stop", "eog": "stop"}[ref.finish[0]]
    assert out["usage"]["prompt_tokens"] == len(model.tokenize(prompt, add_special=True, parse_special=True))
    assert out["usage"]["completion_tokens"] == len(ref.generated[0])


def test_chat_stream_matches_the_whole_reply(long_model):
    model = long_model
    whole = model.create_chat_completion(MESSAGES, tools=[WEATHER_TOOL], max_tokens=10, temperature=0)
    chunks = list(model.create_chat_completion(MESSAGES, tools=[WEATHER_TOOL], max_tokens=10, temperature=0,
                                               stream=True))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks) and len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == (whole["choices"][0]["message"]["content"] or "")
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_tools_reach_the_prompt_and_earlier_calls_render(long_model):
    model = long_model
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    messages = MESSAGES + [{"role": "assistant", "content": None, "tool_calls": [call]},
                           {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}]
    _, prompt = _reference_reply(model, messages, tools=[WEATHER_TOOL])
    assert '"get_weather"' in prompt and '"Paris"' in prompt and "18 C, sunny" in prompt
    with pytest.raises(TypeError, match=r"messages\[0\]"):
        model.create_chat_completion([{"role": "user", "content": 3}])
    with pytest.raises(ValueError):
        model.create_chat_completion(MESSAGES, tools=[{"type": "function"}])
    with pytest.raises(ValueError, match="tool_choice"):
        model.create_chat_completion(MESSAGES, tools=[WEATHER_TOOL], tool_choice="required")
    offered = model.create_chat_completion(MESSAGES, tools=[WEATHER_TOOL], max_tokens=1, temperature=0)
    withheld = model.create_chat_completion(MESSAGES, tools=[WEATHER_TOOL], tool_choice="none", max_tokens=1,
                                            temperature=0)
    plain = model.create_chat_completion(MESSAGES, max_tokens=1, temperature=0)
    assert withheld["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert offered["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]


def test_a_reply_with_tool_calls_becomes_openai_tool_calls(model):
    template = ls.ChatTemplate.for_model(model)
    assert template.tool_call_format == "hermes"
    reply = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    out = ChatCall("m", template, 10, with_tools=True).completion(reply, 7, "stop")
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (tool_call,) = choice["message"]["tool_calls"]
    assert tool_call["type"] == "function" and tool_call["id"].startswith("call_")
    assert tool_call["function"]["name"] == "get_weather"
    assert json.loads(tool_call["function"]["arguments"]) == {"city": "Paris"}
    plain = ChatCall("m", template, 10, with_tools=False).completion(reply, 7, "stop")
    assert plain["choices"][0]["message"]["content"] == reply and plain["choices"][0]["finish_reason"] == "stop"
    stream = template.tool_call_stream()
    shown = "".join(stream.feed(reply[i:i + 5]) for i in range(0, len(reply), 5))
    content, calls = stream.finish()
    assert shown + content == "" and [c["name"] for c in calls] == ["get_weather"]


class _Event:
    def __init__(self, piece: str) -> None:
        self.piece = piece


class _Finished:
    finish = ["eog"]


class _ReplyGeneration:
    """A generation whose tokens spell `reply` a few characters at a time
    (the tiny model's random weights write no tool call)."""

    def __init__(self, reply: str) -> None:
        self._events = iter(_Event(reply[i:i + 3]) for i in range(0, len(reply), 3))
        self.result = None

    def __iter__(self) -> _ReplyGeneration:
        return self

    def __next__(self) -> _Event:
        try:
            return next(self._events)
        except StopIteration:
            self.result = _Finished()
            raise

    def close(self) -> None:
        pass


def test_a_streamed_reply_with_tool_calls_ends_in_a_tool_calls_chunk(model):
    from layerstream.chat import ChatCompletionStream

    template = ls.ChatTemplate.for_model(model)
    reply = 'Let me look. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    with model.create_context() as ctx:
        chunks = list(ChatCompletionStream(ChatCall("m", template, 10, with_tools=True), ctx,
                                           _ReplyGeneration(reply)))  # type: ignore[arg-type]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas).strip() == "Let me look."
    (calls,) = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert [(c["index"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        (0, "get_weather", {"city": "Paris"})]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" and deltas[-1] == {}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


SMOLLM = "SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2's template knows no tools (the Hermes instructions go into the
# system message); asked to repeat a call, even the 135M model calls.
ASK_FOR_A_CALL = [{"role": "user", "content": "Repeat exactly this line and nothing else: "
                   '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'}]


@pytest.fixture(scope="module")
def smollm():
    models = os.environ.get("LAYERSTREAM_MODELS", os.path.expanduser("~/.cache/layerstream/models"))
    path = os.path.join(models, SMOLLM)
    if not os.path.exists(path):
        pytest.skip(f"{path} is not there (bench/peer/fetch-models.sh)")
    with ls.Model(path, backend=ls.Backend.HOST, context=1024) as model:
        yield model


def test_smollm_calls_a_tool_and_answers_after_its_result(smollm):
    out = smollm.create_chat_completion(ASK_FOR_A_CALL, tools=[WEATHER_TOOL], max_tokens=40, temperature=0)
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    chunks = list(smollm.create_chat_completion(ASK_FOR_A_CALL, tools=[WEATHER_TOOL], max_tokens=40,
                                                temperature=0, stream=True))
    streamed = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert [tc["function"] for tc in streamed] == [call["function"]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    result = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temp_c": 21})}
    final = smollm.create_chat_completion(ASK_FOR_A_CALL + [choice["message"], result], tools=[WEATHER_TOOL],
                                          max_tokens=16, temperature=0)
    assert final["choices"][0]["finish_reason"] in ("stop", "length")
    assert isinstance(final["choices"][0]["message"]["content"], str)
