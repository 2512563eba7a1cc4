"""Context.generate with prompt_start=PromptStart.REUSE_PREFIX: each call's
prompt is the whole sequence, the context keeps the longest prefix it already
holds (as llama-cpp-python's Llama does with its input_ids), prefills only
the rest, reports the kept count in Stats.cached_tokens, and generates what a
fresh context generates; FRESH opts out. On a Q8_0 example model (quantised
weights: the kernels are batch-invariant for passes of any size)."""

from __future__ import annotations

import numpy as np
import pytest

import layerstream as ls

GREEDY = dict(temperature=0.0, stop_at_eog=False, max_tokens=6, keep_logits=True)
REUSE = ls.PromptStart.REUSE_PREFIX


@pytest.fixture()
def model(stream_model):
    return ls.Model(stream_model, backend=ls.Backend.HOST, context=128, sequences=2)  # a fresh context beside


def fresh(model, prompt):
    with model.create_context() as ctx:
        return ctx.complete(prompt, **GREEDY)


def test_a_reused_prefix_prefills_only_the_rest_and_matches_a_fresh_context(model):
    with model.create_context() as ctx:
        first = ctx.complete("Once upon a time", prompt_start=REUSE, **GREEDY)
        assert first.stats.cached_tokens == 0
        prompt = list(first.prompt_tokens)  # BOS and the text: the whole sequence
        assert prompt[0] == model.token_bos()
        # The next turn: the prompt, its answer, new text. The answer's last
        # token was sampled but never decoded, so it is prefilled.
        turn = prompt + list(first.generated[0]) + model.tokenize(" and then they", add_special=False)
        second = ctx.complete(turn, prompt_start=REUSE, **GREEDY)
        assert second.stats.cached_tokens == len(prompt) + len(first.generated[0]) - 1
        assert second.stats.prompt_tokens == len(turn) - second.stats.cached_tokens
        assert second.stats.as_dict()["cached_tokens"] == second.stats.cached_tokens
        alone = fresh(model, turn)
        assert second.generated == alone.generated
        assert np.array_equal(second.logits, alone.logits)

        # The same prompt again reuses all but its last token; FRESH reuses nothing.
        again = ctx.complete(turn, prompt_start=REUSE, **GREEDY)
        assert (again.stats.cached_tokens, again.stats.prompt_tokens) == (len(turn) - 1, 1)
        assert np.array_equal(again.logits, alone.logits)
        whole = ctx.complete(turn, prompt_start=ls.PromptStart.FRESH, **GREEDY)
        assert (whole.stats.cached_tokens, whole.stats.prompt_tokens) == (0, len(turn))
        assert np.array_equal(whole.logits, alone.logits)


def test_continue_stays_the_default_and_appends(model):
    with model.create_context() as ctx:
        a = ctx.complete("Once upon a time", **GREEDY)
        b = ctx.complete(" and then", **GREEDY)
        assert b.stats.cached_tokens == 0
        # Appended: the previous answer's last token, then the new text.
        assert list(b.prompt_tokens) == [a.generated[0][-1]] + model.tokenize(" and then", add_special=False)
