"""The calls users reach for from llama-cpp-python's Llama: tokenize with
add_special/parse_special, detokenize to bytes, token_bos/token_eos,
metadata, n_ctx, close and with blocks, create_completion (and its stream),
random seeds, and contexts freed as soon as a loop is left."""

from __future__ import annotations

import threading

import pytest

import layerstream as ls

PROMPT = "Once upon a time"


@pytest.fixture()
def model(tiny_model):
    return ls.Model(tiny_model, backend=ls.Backend.HOST)


def test_tokenize_add_special_and_parse_special(model):
    bos = model.token_bos()
    text = "<s>x"
    plain = model.tokenize(text)
    parsed = model.tokenize(text, parse_special=True)
    assert plain[0] == bos and bos not in plain[1:]  # "<s>" stays text by default
    assert parsed[:2] == [bos, bos]
    assert model.detokenize(plain[1:]) == text
    assert model.tokenize(text, add_special=False) == plain[1:]


def test_special_tokens_and_metadata_match_the_file(model, tiny_model):
    meta = model.metadata
    assert model.token_bos() == int(meta["tokenizer.ggml.bos_token_id"])
    assert model.token_eos() == int(meta["tokenizer.ggml.eos_token_id"])
    assert meta["general.architecture"] == model.info.architecture
    assert int(meta["llama.context_length"]) == model.info.context
    assert "tokenizer.ggml.tokens" not in meta  # arrays are left out, as llama.cpp does
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    assert model.n_ctx() == model.n_context
    with model.create_context() as ctx:
        assert ctx.n_ctx() == model.n_ctx()


def test_detokenize_of_a_byte_fallback_token(model):
    # Tokens whose text is one byte that cannot start a UTF-8 character.
    lone = [t for t in range(model.n_vocab) if len(b := model.detokenize([t], as_bytes=True)) == 1 and b[0] >= 0x80]
    assert lone, "the example vocabulary has byte-fallback tokens"
    for t in lone[:8]:
        raw = model.detokenize([t], as_bytes=True)
        assert isinstance(raw, bytes)
        assert model.detokenize([t]) == raw.decode("utf-8", errors="replace") == "\ufffd"
    ids = model.tokenize("héllo", add_special=False)
    assert model.detokenize(ids, as_bytes=True) == "héllo".encode()


def test_close_and_with_blocks(tiny_model):
    with ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=2) as model:
        with model.create_context() as ctx:
            assert model.free_sequences == 1
            kept = model.create_context()
        assert model.free_sequences == 1  # the with block gave its sequence back
        with pytest.raises(ValueError, match="closed"):
            ctx.complete(PROMPT)
    assert model.closed
    with pytest.raises(ValueError, match="closed"):
        model.tokenize(PROMPT)
    model.close()  # idempotent
    # A context still open keeps the model it came from.
    assert len(kept.complete(PROMPT, max_tokens=3, stop_at_eog=False).generated[0]) == 3
    kept.close()


def test_leaving_a_loop_early_frees_the_context_at_once(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST)
    ctx = model.create_context()
    gen = ctx.generate(PROMPT, max_tokens=64, temperature=0, stop_at_eog=False)
    for _ in gen:
        break
    # `gen` is still referenced: the context is free anyway for this thread.
    res = ctx.complete(" and", max_tokens=2, temperature=0, stop_at_eog=False)
    assert len(res.generated[0]) == 2
    assert gen.finished and list(gen) == []
    ctx.close()
    assert model.free_sequences == 1


def test_a_left_generation_still_blocks_other_threads(tiny_model):
    ctx = ls.Model(tiny_model, backend=ls.Backend.HOST).create_context()
    gen = ctx.generate(PROMPT, max_tokens=64, stop_at_eog=False)
    next(gen)
    seen: list[BaseException] = []
    t = threading.Thread(target=lambda: seen.extend(_raised(lambda: ctx.complete("x"))))
    t.start()
    t.join()
    assert len(seen) == 1 and isinstance(seen[0], RuntimeError) and "busy" in str(seen[0])
    gen.close()


def _raised(call) -> list[BaseException]:
    try:
        call()
    except BaseException as e:  # noqa: BLE001 (the caller checks it)
        return [e]
    return []


def test_seed_none_or_minus_one_is_random(model):
    ctx = model.create_context()

    def text(seed):
        ctx.clear()
        return ctx.complete(PROMPT, max_tokens=24, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed,
                            stop_at_eog=False).generated[0]

    assert text(5) == text(5)
    assert len({tuple(text(None)) for _ in range(3)} | {tuple(text(-1)) for _ in range(3)}) > 1
    assert len({ls.SamplerChain(temperature=1.0).sample(_logits(model)) for _ in range(16)}) > 1


def _logits(model):
    import numpy as np

    return np.linspace(0.0, 1.0, model.n_vocab, dtype=np.float32)


def test_create_completion_matches_the_contexts_generation(model):
    out = model.create_completion(PROMPT, max_tokens=12, temperature=0.7, seed=3)
    assert out["object"] == "text_completion" and out["id"].startswith("cmpl-")
    assert isinstance(out["created"], int) and out["model"] == model.info.path
    (choice,) = out["choices"]
    assert set(choice) == {"text", "index", "logprobs", "finish_reason"} and choice["index"] == 0
    with model.create_context() as ctx:
        ref = ctx.complete(PROMPT, max_tokens=12, temperature=0.7, seed=3)
    assert choice["text"] == ref.text[0]
    prompt_tokens = len(model.tokenize(PROMPT, parse_special=True))
    assert out["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": len(ref.generated[0]),
                            "total_tokens": prompt_tokens + len(ref.generated[0])}
    echoed = model(PROMPT, max_tokens=12, temperature=0.7, seed=3, echo=True)
    assert echoed["choices"][0]["text"] == PROMPT + choice["text"]


def test_create_completion_stream(model):
    whole = model.create_completion(PROMPT, max_tokens=16, temperature=0.9, seed=8)
    chunks = list(model.create_completion(PROMPT, max_tokens=16, temperature=0.9, seed=8, stream=True))
    assert len(chunks) >= 2 and len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert "finish_reason" in chunks[-1]["choices"][0]


def test_a_stream_left_early_does_not_block_the_next_completion(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=1)
    stream = model.create_completion(PROMPT, max_tokens=64, stream=True)
    for _ in stream:
        break
    out = model.create_completion(PROMPT, max_tokens=4, temperature=0)
    assert out["usage"]["completion_tokens"] <= 4
    model.close()
    assert model.closed
