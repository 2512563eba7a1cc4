"""Fixtures for the Python package tests: the installed package, the
`layerstream` command built from the same tree (to compare against), and
example models written by the library itself.

LAYERSTREAM_CLI names the command (tests/run.sh sets it); without it the
tests look under build/*/bin. LAYERSTREAM_REQUIRE_CLI=1 (tests/run.sh) makes
a missing command an error instead of a skip.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest

import layerstream as ls

ROOT = Path(__file__).resolve().parents[2]
# Prompt, length and seed shared by the CLI and the Python side of each comparison.
PROMPT = "Once upon a time"


def _find_cli() -> str | None:
    env = os.environ.get("LAYERSTREAM_CLI")
    if env:
        return env
    found = sorted(glob.glob(str(ROOT / "build" / "*" / "bin" / "layerstream")), key=os.path.getmtime)
    return found[-1] if found else None


@pytest.fixture(scope="session")
def cli() -> str:
    path = _find_cli()
    if not path or not os.access(path, os.X_OK):
        if os.environ.get("LAYERSTREAM_REQUIRE_CLI") == "1":
            pytest.fail(f"the layerstream command is required (LAYERSTREAM_CLI={path!r})")
        pytest.skip("no layerstream command built (set LAYERSTREAM_CLI)")
    return path


class CliResult:
    def __init__(self, proc: subprocess.CompletedProcess[str]):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def error(self) -> str:
        """The message the command printed after 'error: '."""
        lines = [l for l in self.stderr.splitlines() if l.startswith("error: ")]
        assert lines, f"no 'error:' line in stderr:\n{self.stderr}"
        return lines[-1][len("error: "):]


@pytest.fixture(scope="session")
def run_cli(cli):
    def run(*args: str) -> CliResult:
        proc = subprocess.run([cli, *args], capture_output=True, text=True, timeout=300)
        return CliResult(proc)

    return run


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """The tiny 4-layer example model (~1 MiB, f16)."""
    path = tmp_path_factory.mktemp("models") / "tiny.gguf"
    ls.make_example_model(str(path))
    return str(path)


@pytest.fixture(scope="session")
def stream_model(tmp_path_factory) -> str:
    """A larger example model (~24 MiB, q8_0) that the tests run on budgets smaller than itself."""
    path = tmp_path_factory.mktemp("models") / "stream.gguf"
    ls.make_example_model(str(path), size="24MiB", dtype="q8_0", seed=7)
    return str(path)


def load_json(path) -> dict:
    with open(path) as f:
        return json.load(f)


# Context (positions) of every run on stream_model, for the plan and the runs.
STREAM_CONTEXT = 128


@pytest.fixture(scope="session")
def stream_plan(stream_model) -> ls.MemoryPlan:
    """Model.plan of stream_model (measures the box once: seconds)."""
    return ls.Model.plan(stream_model, context=STREAM_CONTEXT, backend=ls.Backend.HOST, budgets=2)
