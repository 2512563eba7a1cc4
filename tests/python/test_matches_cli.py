"""Python generates the same tokens, text and logits as `layerstream run`
for the same file, prompt, seed and budget (must-show 2)."""

from __future__ import annotations

import numpy as np
import pytest

import layerstream as ls

from conftest import PROMPT, STREAM_CONTEXT, load_json


def run_both(run_cli, tmp_path, model_path, *, n, temp, seed, vram=None, context=0):
    args = ["run", model_path, "-p", PROMPT, "-n", str(n), "--temp", str(temp), "--seed", str(seed),
            "--backend", "host", "--json", str(tmp_path / "run.json"), "--logits", str(tmp_path / "logits.npy")]
    if vram:
        args += ["--vram", vram]
    if context:
        args += ["--ctx", str(context)]
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    cli = load_json(tmp_path / "run.json")
    cli_logits = np.load(tmp_path / "logits.npy")

    model = ls.Model(model_path, backend=ls.Backend.HOST, vram_budget=vram or 0, context=context)
    ctx = model.create_context()
    res = ctx.complete(PROMPT, max_tokens=n, temperature=temp, seed=seed, keep_logits=True)
    return cli, cli_logits, res


@pytest.mark.parametrize("temp,seed", [(0.0, 0), (0.9, 5)])
def test_tokens_and_logits_equal_the_cli(run_cli, tmp_path, tiny_model, temp, seed):
    cli, cli_logits, res = run_both(run_cli, tmp_path, tiny_model, n=24, temp=temp, seed=seed)
    assert res.prompt_tokens == cli["prompt_tokens"]
    assert res.generated[0] == cli["generated_tokens"]
    assert res.text == cli["text"]
    assert res.logits.dtype == np.float32
    assert res.logits.shape == cli_logits.shape == (len(res.generated[0]), res.vocab)
    np.testing.assert_array_equal(res.logits, cli_logits)


def test_streaming_on_a_budget_smaller_than_the_model_equals_the_cli(run_cli, tmp_path, stream_model, stream_plan):
    plan = stream_plan
    budget = plan.min_vram_bytes + plan.largest_layer_bytes  # two window slots, far below the model
    assert budget < plan.weight_bytes
    cli, cli_logits, res = run_both(run_cli, tmp_path, stream_model, n=12, temp=0.0, seed=0, vram=str(budget),
                                    context=STREAM_CONTEXT)
    assert res.stats.layers_disk + res.stats.layers_ram > 0, res.stats.plan
    # Disk-tier reads report the rate they ran at; no disk layer, no rate.
    assert (res.stats.disk_gbps > 0) == (res.stats.layers_disk > 0), (res.stats.disk_gbps, res.stats.plan)
    assert (cli["disk_gbps"] > 0) == (cli["layers"]["disk"] > 0), cli
    assert res.generated[0] == cli["generated_tokens"]
    np.testing.assert_array_equal(res.logits, cli_logits)


def test_iterator_yields_the_same_tokens_as_complete(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=2)
    a, b = model.create_context(), model.create_context()
    gen = a.generate(PROMPT, max_tokens=20, temperature=0.7, seed=3)
    events = list(gen)
    ref = b.complete(PROMPT, max_tokens=20, temperature=0.7, seed=3)
    assert [e.token for e in events] == ref.generated[0]
    assert "".join(e.piece for e in events) == ref.text[0]
    assert gen.finished and gen.result.generated == ref.generated
    stats = gen.result.stats.as_dict()
    assert stats["generated_tokens"] == len(events) and stats["backend"] == "host"
    assert set(stats) >= {"prefill_s", "decode_tokens_per_s", "layers_resident", "plan", "load_bytes"}
    assert stats["layers_disk"] == 0 and stats["disk_gbps"] == 0


def test_decode_and_logits_match_generation(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=2)
    ctx = model.create_context()
    ids = model.tokenize(PROMPT)
    batch = ls.Batch()
    batch.add_sequence(ids, 0)
    ctx.decode(batch)
    assert ctx.position(0) == len(ids)
    row = ctx.logits(len(ids) - 1)
    assert row.shape == (model.n_vocab,) and ctx.logits(0).size == 0
    ref = model.create_context().complete(PROMPT, max_tokens=1, temperature=0, keep_logits=True)
    np.testing.assert_array_equal(row, ref.logits[0])
    assert int(np.argmax(row)) == ref.generated[0][0]
    bad = ls.Batch()
    bad.add(model.n_vocab + 5, len(ids), 0, True)
    with pytest.raises(ls.InvalidArgumentError):
        ctx.decode(bad)
    with pytest.raises(IndexError, match="token 99 is outside"):
        ctx.logits(99)
    with pytest.raises(IndexError, match="sequence 5 is outside"):
        ctx.position(5)


def test_two_sequences_equal_the_clis_batch(run_cli, tmp_path, tiny_model):
    r = run_cli("run", tiny_model, "-p", PROMPT, "-n", "10", "--temp", "0.9", "--seed", "11", "--batch", "2",
                "--backend", "host", "--json", str(tmp_path / "run.json"))
    assert r.returncode == 0, r.stderr
    cli = load_json(tmp_path / "run.json")
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=2)
    ctx = model.create_context(sequences=2)
    events = list(ctx.generate(PROMPT, max_tokens=10, temperature=0.9, seed=11))
    per_seq = [[e.token for e in events if e.sequence == s] for s in range(2)]
    assert per_seq == cli["generated_tokens"]
    assert per_seq[0] != per_seq[1]  # seeds 11 and 12
