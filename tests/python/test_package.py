"""The package installs and exposes the library's API (not the source tree's files)."""

from __future__ import annotations

import enum
import inspect
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import layerstream as ls

from conftest import ROOT


def test_imports_the_installed_package():
    # tests/run.sh installs with `pip install .`: the module must come from the
    # environment, with its compiled extension, not from python/ in the tree.
    pkg = Path(ls.__file__).resolve().parent
    assert ROOT / "python" not in pkg.parents and pkg != ROOT / "python" / "layerstream"
    assert list(pkg.glob("_layerstream*")), f"no compiled extension in {pkg}"
    assert (pkg / "_layerstream.pyi").is_file() and (pkg / "py.typed").is_file()


def test_enums_are_python_enums():
    assert ls.Backend.HOST.name == "HOST"
    assert {s.name for s in ls.Strategy} == {"RESIDENT", "SERIAL", "OVERLAP", "PLANNED", "HOST"}
    assert ls.KvType.F16 != ls.KvType.F32


def test_sizes():
    assert ls.parse_size("1.5KiB") == 1536
    assert ls.format_bytes(3 * 1024 * 1024) == "3.00 MiB"
    with pytest.raises(ls.InvalidArgumentError) as e:
        ls.parse_size("12 bananas")
    assert e.value.code == ls.StatusCode.INVALID_ARGUMENT
    assert "12 bananas" in str(e.value)


def test_model_info_and_tokenizer(tiny_model):
    model = ls.Model(Path(tiny_model), backend=ls.Backend.HOST)  # str or os.PathLike
    info = model.info
    assert info.architecture == "llama" and info.layers == 4 and info.vocab == model.n_vocab
    assert info.file_bytes == Path(tiny_model).stat().st_size
    text = "Once upon a time, there was a tiny model."
    ids = model.tokenize(text, add_special=False)
    assert ids and all(0 <= t < model.n_vocab for t in ids)
    assert model.detokenize(ids) == text
    with_bos = model.tokenize(text)
    assert len(with_bos) == len(ids) + 1 and with_bos[1:] == ids


def test_size_arguments_are_checked(tiny_model):
    with pytest.raises(ls.InvalidArgumentError, match="vram_budget"):
        ls.Model(tiny_model, vram_budget="lots")
    with pytest.raises(ls.InvalidArgumentError, match="vram_budget"):
        ls.Model(tiny_model, vram_budget=-1)


def test_sampler_chain_is_deterministic():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(1000).astype(np.float32)
    greedy = ls.SamplerChain(temperature=0)
    assert greedy.sample(logits) == int(np.argmax(logits))
    a, b = ls.SamplerChain(temperature=1.0, seed=9), ls.SamplerChain(temperature=1.0, seed=9)
    assert [a.sample(logits) for _ in range(20)] == [b.sample(logits) for _ in range(20)]


def test_stubs_name_every_public_class_and_function():
    import ast

    from layerstream import _layerstream

    stub = ast.parse((Path(ls.__file__).parent / "_layerstream.pyi").read_text())
    stubbed = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public = {n for n in dir(_layerstream) if not n.startswith("_")}
    assert public <= stubbed, f"missing from _layerstream.pyi: {sorted(public - stubbed)}"
    for cls in ("Model", "Context", "Generation", "Stats", "MemoryPlan"):
        node = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == cls)
        members = {m.name for m in node.body if isinstance(m, ast.FunctionDef)} | {
            m.target.id for m in node.body if isinstance(m, ast.AnnAssign)}
        actual = {n for n in dir(getattr(_layerstream, cls)) if not n.startswith("_")}
        assert actual <= members, f"{cls}: missing from the stub: {sorted(actual - members)}"


def _public_classes():
    from layerstream import _layerstream

    for name in ls.__all__:
        obj = getattr(ls, name)
        if isinstance(obj, type) and not issubclass(obj, (BaseException, enum.Enum)):
            yield obj
    yield _layerstream.Model


def test_every_function_and_method_has_a_signature():
    functions = [getattr(ls, n) for n in ls.__all__ if callable(getattr(ls, n)) and not isinstance(getattr(ls, n), type)]
    assert functions
    for fn in functions:
        inspect.signature(fn)
    for cls in (ls.Model, ls.Batch, ls.SamplerChain):  # the classes Python constructs
        inspect.signature(cls)
    for cls in _public_classes():
        for name, member in inspect.getmembers(cls):
            if (not name.startswith("_") or name == "__init__") and callable(member) and not isinstance(member, type):
                inspect.signature(member)  # raises ValueError when it cannot be read
    sig = inspect.signature(ls.Context.generate)
    assert list(sig.parameters)[:3] == ["self", "prompt", "max_tokens"]
    assert sig.parameters["max_tokens"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["temperature"].default == pytest.approx(0.8) and sig.parameters["seed"].default is None
    assert list(inspect.signature(ls.Model).parameters)[:2] == ["path", "vram_budget"]


def test_help_is_wrapped_and_names_each_parameter():
    # help() shows each docstring as written: every line of them fits 80 columns.
    for cls in _public_classes():
        for owner, doc in [(cls, inspect.getdoc(cls))] + [(m, inspect.getdoc(m)) for _, m in inspect.getmembers(cls)]:
            long = [line for line in (doc or "").splitlines() if len(line) > 80]
            assert not long, f"{cls.__name__}: {owner!r} has docstring lines over 80 columns: {long[:2]}"
    assert "tokenize(self, text: str" in pydoc.render_doc(ls.Model, renderer=pydoc.plaintext)
    documented = {
        ls.Model.__init__: inspect.signature(ls.Model),
        ls.Context.generate: inspect.signature(ls.Context.generate),
        ls.Model.create_completion: inspect.signature(ls.Model.create_completion),
        ls.Model.create_chat_completion: inspect.signature(ls.Model.create_chat_completion),
        ls.Context.complete: inspect.signature(ls.Context.complete),
        ls.SamplerChain.__init__: inspect.signature(ls.SamplerChain),
        ls.ChatTemplate.apply: inspect.signature(ls.ChatTemplate.apply),
        ls.Model.tokenize: inspect.signature(ls.Model.tokenize),
    }
    for fn, sig in documented.items():
        doc = inspect.getdoc(fn) or ""
        for name in sig.parameters:
            if name != "self":
                assert re.search(rf"^\s+{name}: ", doc, re.M), f"{fn.__qualname__}: no line for {name!r}"


def test_stubtest_finds_the_stub_matching_the_module(tmp_path):
    pytest.importorskip("mypy.stubtest")
    allowlist = Path(__file__).parent / "stubtest-allowlist.txt"
    # In tmp_path, where mypy keeps its cache.
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", "layerstream._layerstream", "--allowlist",
                           str(allowlist)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
