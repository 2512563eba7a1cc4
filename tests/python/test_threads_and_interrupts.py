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


@pytest.fixture(autouse=True)
def sigint_raises_keyboard_interrupt():
    """Python maps SIGINT to KeyboardInterrupt only when SIGINT was not ignored
    at start-up; a shell starts background jobs (`cmd &`, as a CI runner may)
    with it ignored. These tests need the usual mapping, so they install it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def slow_model(path: str, plan: ls.MemoryPlan, *, sequences: int = 1, link_gbps: float) -> ls.Model:
    """The stream model on a budget of one window slot with its layers in the
    RAM tier, copied over a throttled simulated link every pass: each pass
    takes about (streamed bytes / link_gbps) seconds, long enough to
    interrupt or overlap."""
    # plan.min_vram_bytes is planned's minimum, which holds no window slot
    # (planned may compute every block on the host); serial streams through
    # one slot, so the budget adds two: one slot and one layer to spare.
    budget = plan.min_vram_bytes + plan.kv_bytes * (sequences - 1) + 2 * plan.largest_layer_bytes
    return ls.Model(path, backend=ls.Backend.HOST, context=STREAM_CONTEXT, sequences=sequences, vram_budget=budget,
                    ram_budget=plan.weight_bytes, strategy=ls.Strategy.SERIAL, sim_link_gbps=link_gbps)


def test_keyboard_interrupt_stops_generation_and_the_process_stays_usable(stream_model, stream_plan):
    model = slow_model(stream_model, stream_plan, link_gbps=0.04)  # ~0.5 s a pass
    ctx = model.create_context()
    tokens = []
    timer = None
    with pytest.raises(KeyboardInterrupt):
        for event in ctx.generate(PROMPT, max_tokens=100, temperature=0, stop_at_eog=False):
            tokens.append(event.token)
            if timer is None:  # SIGINT from another thread while this one waits for the next token
                timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
                t_kill = time.monotonic() + 0.2
                timer.start()
    latency = time.monotonic() - t_kill
    timer.join()
    assert 1 <= len(tokens) < 10, f"{len(tokens)} tokens: the generation was not stopped"
    # It stops at the end of the pass in flight (a pass is not cut in the middle).
    assert latency < 10, f"the interrupt took {latency:.1f}s"
    # The context is free again and generates as a fresh one would.
    ctx.clear()
    again = ctx.complete(PROMPT, max_tokens=4, temperature=0, stop_at_eog=False)
    assert len(again.generated[0]) == 4
    assert again.generated[0][: len(tokens[:4])] == tokens[:4]


def test_two_threads_generate_at_once(stream_model, stream_plan):
    model = slow_model(stream_model, stream_plan, sequences=2, link_gbps=0.2)  # ~0.1 s a pass
    contexts = [model.create_context(), model.create_context()]
    results: dict[int, list[int]] = {}
    # Each thread, after its first token, waits for the other's first token
    # before going on: only generations that run at once both get past it
    # (timing-free, so a loaded machine's scheduling cannot fail it).
    first_token = [threading.Event(), threading.Event()]
    saw_other: dict[int, bool] = {}
    errors: list[BaseException] = []
    ticks = 0
    done = threading.Event()

    def generate(i: int) -> None:
        try:
            tokens = []
            for e in contexts[i].generate(PROMPT, max_tokens=6, temperature=0.8, seed=i, stop_at_eog=False):
                tokens.append(e.token)
                if len(tokens) == 1:
                    first_token[i].set()
                    saw_other[i] = first_token[1 - i].wait(timeout=120)
            results[i] = tokens
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
    # Both were generating at the same time: each saw the other's first token mid-generation.
    assert saw_other == {0: True, 1: True}, saw_other
    # A generation holding the GIL would leave the ticker (nearly) no turns; a
    # tick every 100 ms leaves room for a loaded machine's late wake-ups.
    assert ticks > elapsed / 0.1, f"only {ticks} ticks in {elapsed:.2f}s: the GIL was held"
    # Each thread's tokens equal those of the same generation run alone.
    for i in range(2):
        contexts[i].clear()
        alone = contexts[i].complete(PROMPT, max_tokens=6, temperature=0.8, seed=i, stop_at_eog=False)
        assert results[i] == alone.generated[0]


def test_keyboard_interrupt_while_loading(stream_model, stream_plan):
    calls = []

    def interrupt(fraction):
        calls.append(fraction)
        os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        ls.Model(stream_model, backend=ls.Backend.HOST, context=STREAM_CONTEXT, ram_budget=stream_plan.weight_bytes,
                 progress=interrupt)
    assert len(calls) == 1, "loading went on after the interrupt"
    model = ls.Model(stream_model, backend=ls.Backend.HOST, context=STREAM_CONTEXT)
    assert len(model.create_context().complete(PROMPT, max_tokens=2, stop_at_eog=False).generated[0]) == 2
