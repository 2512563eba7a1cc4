"""The package installs and exposes the library's API (not the source tree's files)."""

from __future__ import annotations

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
    ids = model.tokenize(text, add_bos=False)
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
