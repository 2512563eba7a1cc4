"""Library errors become exceptions with the CLI's messages (must-show 3),
of classes that also subclass the Python built-in that fits."""

from __future__ import annotations

import errno
import shutil
import threading

import pytest

import layerstream as ls


def corrupt_copy(src: str, dst) -> str:
    """The example model with its tensor-count field overwritten: a file that
    still starts with the GGUF magic but cannot be parsed."""
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(8)  # magic (4), version (4), then the u64 tensor count
        f.write((2**62).to_bytes(8, "little"))
    return str(dst)


def test_corrupt_file_raises_the_readers_message(run_cli, tmp_path, tiny_model):
    bad = corrupt_copy(tiny_model, tmp_path / "corrupt.gguf")
    r = run_cli("run", bad, "-p", "hi", "-n", "2", "--backend", "host")
    assert r.returncode != 0
    with pytest.raises(ls.LayerstreamError) as e:
        ls.Model(bad, backend=ls.Backend.HOST)
    assert str(e.value) == r.error()
    assert isinstance(e.value, ls.CorruptionError), (type(e.value), str(e.value))
    assert e.value.code == ls.StatusCode.CORRUPTION


def test_truncated_and_missing_files(run_cli, tmp_path, tiny_model):
    short = tmp_path / "short.gguf"
    short.write_bytes(open(tiny_model, "rb").read()[:100])
    missing = str(tmp_path / "no-such.gguf")
    for path in (str(short), missing):
        r = run_cli("run", path, "-p", "hi", "-n", "2", "--backend", "host")
        assert r.returncode != 0
        with pytest.raises(ls.LayerstreamError) as e:
            ls.Model(path, backend=ls.Backend.HOST)
        assert str(e.value) == r.error()
    assert isinstance(e.value, (ls.IoError, ls.NotFoundError)) and isinstance(e.value, OSError) == isinstance(
        e.value, ls.IoError)


def test_impossible_budget_raises_the_clis_message(run_cli, stream_model):
    r = run_cli("run", stream_model, "-p", "hi", "-n", "2", "--backend", "host", "--vram", "64KiB")
    assert r.returncode != 0
    with pytest.raises(ls.OutOfBudgetError) as e:
        ls.Model(stream_model, backend=ls.Backend.HOST, vram_budget="64KiB")
    assert str(e.value) == r.error()
    assert e.value.code == ls.StatusCode.OUT_OF_BUDGET
    # The message says what would fit (the library's contract for OutOfBudget).
    assert "MiB" in str(e.value) or "KiB" in str(e.value)


def test_context_pool_exhausted(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=1)
    first = model.create_context()
    with pytest.raises(ls.OutOfBudgetError):
        model.create_context()
    first.close()
    assert model.free_sequences == 1
    model.create_context()


def test_progress_returning_false_cancels(tiny_model):
    with pytest.raises(ls.CancelledError):
        ls.Model(tiny_model, backend=ls.Backend.HOST, progress=lambda f: False)
    seen = []
    ls.Model(tiny_model, backend=ls.Backend.HOST, progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)


def test_progress_exception_propagates(tiny_model):
    def boom(fraction):
        raise RuntimeError("stop loading")

    with pytest.raises(RuntimeError, match="stop loading"):
        ls.Model(tiny_model, backend=ls.Backend.HOST, progress=boom)


def test_context_busy_while_generating(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST)
    ctx = model.create_context()
    gen = ctx.generate("hello", max_tokens=8)
    # Another thread may not use the context while this one's generation runs.
    errors: list[BaseException] = []

    def other_thread():
        try:
            ctx.complete("again")
        except BaseException as e:  # noqa: BLE001 (checked below)
            errors.append(e)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError) and "busy" in str(errors[0])
    gen.close()
    assert gen.finished and list(gen) == []
    assert gen.result is not None and len(gen.result.generated[0]) <= 8
    ctx.clear()
    assert len(ctx.complete("again", max_tokens=3, stop_at_eog=False).generated[0]) == 3


def test_prompt_longer_than_the_context(tiny_model):
    model = ls.Model(tiny_model, backend=ls.Backend.HOST, context=16)
    with pytest.raises(ls.InvalidArgumentError, match="longer than the context"):
        model.create_context().complete("word " * 40)


def test_missing_file_is_a_file_not_found_error_with_errno_and_filename(tmp_path):
    missing = str(tmp_path / "no-such.gguf")
    with pytest.raises(FileNotFoundError) as e:
        ls.Model(missing, backend=ls.Backend.HOST)
    assert isinstance(e.value, ls.IoError) and e.value.code == ls.StatusCode.IO_ERROR
    assert e.value.errno == errno.ENOENT and e.value.filename == missing
    assert e.value.strerror and e.value.strerror in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        ls.Model.plan(missing)
    assert e.value.filename == missing


def test_bad_values_are_value_errors(tiny_model):
    with pytest.raises(ValueError, match="sequences"):
        ls.Model(tiny_model, backend=ls.Backend.HOST, sequences=0)
    with pytest.raises(ValueError, match="vram_budget"):
        ls.Model(tiny_model, vram_budget="lots")
    ctx = ls.Model(tiny_model, backend=ls.Backend.HOST).create_context()
    with pytest.raises(ValueError, match="max_tokens"):
        ctx.complete("hi", max_tokens=-1)
    with pytest.raises(ValueError, match="seed"):
        ctx.complete("hi", seed=-2)


def test_budget_too_small_is_a_memory_error(stream_model):
    with pytest.raises(MemoryError) as e:
        ls.Model(stream_model, backend=ls.Backend.HOST, vram_budget="64KiB")
    assert isinstance(e.value, ls.OutOfBudgetError)
    model = ls.Model(stream_model, backend=ls.Backend.HOST, sequences=1)
    held = model.create_context()
    with pytest.raises(MemoryError):
        model.create_context()
    held.close()
