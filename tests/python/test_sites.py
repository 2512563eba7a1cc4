"""Execution sites from Python (issue 16): Strategy.HOST computes the blocks
that are not resident on the host from RAM, and PLANNED with host_factor
chooses sites; on the host backend both give the all-resident logits bit for
bit (the same CPU kernels run on either site)."""

from __future__ import annotations

import numpy as np

import layerstream as ls

from conftest import PROMPT, STREAM_CONTEXT


def _complete(path: str, **kw):
    model = ls.Model(path, backend=ls.Backend.HOST, context=STREAM_CONTEXT, **kw)
    res = model.create_context().complete(PROMPT, max_tokens=6, temperature=0.0, seed=0, keep_logits=True)
    return res


def test_host_and_planned_sites_equal_resident(stream_model, stream_plan):
    plan = stream_plan
    budget = plan.min_vram_bytes + plan.largest_layer_bytes  # far below the model: most blocks not resident
    assert budget < plan.weight_bytes
    ref = _complete(stream_model)
    for strategy in (ls.Strategy.HOST, ls.Strategy.PLANNED):
        res = _complete(stream_model, vram_budget=budget, ram_budget=plan.weight_bytes, strategy=strategy,
                        host_factor=1.0)
        assert res.generated[0] == ref.generated[0], strategy
        np.testing.assert_array_equal(res.logits, ref.logits)
        if strategy == ls.Strategy.HOST:
            assert "host site" in res.stats.plan, res.stats.plan
