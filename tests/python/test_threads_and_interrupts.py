"""The GIL is released while generating (two threads generate at once, other
Python threads keep running) and Ctrl-C stops a generation cleanly (must-show 3)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import layerstream as ls

from conftest import PROMPT, STREAM_CONTEXT


def slow_model(path: str, plan: ls.MemoryPlan, sequences: int = 1) -> ls.Model:
    """A model whose every pass streams layers over a throttled simulated link,
    so a generation takes seconds: long enough to interrupt or overlap."""
    budget = plan.min_vram_bytes + plan.kv_bytes * (sequences - 1) + plan.largest_layer_bytes
    return ls.Model(path, backend=ls.Backend.HOST, context=STREAM_CONTEXT, sequences=sequences, vram_budget=budget,
                    strategy=ls.Strategy.SERIAL, sim_link_gbps=0.02)


def test_keyboard_interrupt_stops_generation_and_the_process_stays_usable(stream_model, stream_plan):
    model = slow_model(stream_model, stream_plan)
    ctx = model.create_context()
    tokens = []
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for event in ctx.generate(PROMPT, max_tokens=100, temperature=0, stop_at_eog=False):
            tokens.append(event.token)
    elapsed = time.monotonic() - t0
    timer.join()
    assert len(tokens) < 100, "the generation ran to the end: it was not interrupted"
    assert elapsed < 30, f"interrupt took {elapsed:.1f}s"
    # The context is free again and generates as a fresh one would.
    ctx.clear()
    again = ctx.complete(PROMPT, max_tokens=4, temperature=0, stop_at_eog=False)
    assert len(again.generated[0]) == 4
    assert again.generated[0][: len(tokens[:4])] == tokens[:4]


def test_two_threads_generate_at_once(stream_model, stream_plan):
    model = slow_model(stream_model, stream_plan, sequences=2)
    contexts = [model.create_context(), model.create_context()]
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    ticks = 0
    done = threading.Event()

    def generate(i: int) -> None:
        try:
            results[i] = [e.token for e in contexts[i].generate(PROMPT, max_tokens=6, temperature=0.8, seed=i,
                                                                 stop_at_eog=False)]
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    def tick() -> None:  # runs only while the generating threads let go of the GIL
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.005)

    threads = [threading.Thread(target=generate, args=(i,)) for i in range(2)]
    ticker = threading.Thread(target=tick)
    ticker.start()
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    done.set()
    ticker.join()
    assert not errors, errors
    assert ticks > elapsed / 0.005 / 4, f"only {ticks} ticks in {elapsed:.2f}s: the GIL was held"
    # Each thread's tokens equal those of the same generation run alone.
    for i in range(2):
        contexts[i].clear()
        alone = contexts[i].complete(PROMPT, max_tokens=6, temperature=0.8, seed=i, stop_at_eog=False)
        assert results[i] == alone.generated[0]
