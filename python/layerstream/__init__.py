"""layerstream: run transformer models larger than GPU memory from Python.

Layers that do not fit the device budget stream from pinned RAM and disk
while earlier layers compute. The API mirrors the C++ library
(runtime/include/layerstream/)::

    import layerstream as ls
    model = ls.Model("model.gguf", vram_budget="512MiB")
    ctx = model.create_context()
    for t in ctx.generate("Once upon a time", max_tokens=32, temperature=0):
        print(t.piece, end="", flush=True)

Errors are raised as :mod:`layerstream.errors` classes; generation releases
the GIL and stops cleanly on Ctrl-C.
"""

from __future__ import annotations

from . import errors
from ._layerstream import (
    Backend,
    Batch,
    BudgetPlan,
    Context,
    GenerateResult,
    Generation,
    IoPath,
    KvType,
    MemoryPlan,
    Model,
    ModelInfo,
    SamplerChain,
    Stats,
    StatusCode,
    Strategy,
    TokenEvent,
    format_bytes,
    make_example_model,
    parse_size,
    set_log_level,
)
from .errors import (
    CancelledError,
    CorruptionError,
    DeviceError,
    InternalError,
    InvalidArgumentError,
    IoError,
    LayerstreamError,
    NotFoundError,
    OutOfBudgetError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "Batch",
    "BudgetPlan",
    "CancelledError",
    "Context",
    "CorruptionError",
    "DeviceError",
    "GenerateResult",
    "Generation",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "IoPath",
    "KvType",
    "LayerstreamError",
    "MemoryPlan",
    "Model",
    "ModelInfo",
    "NotFoundError",
    "OutOfBudgetError",
    "SamplerChain",
    "Stats",
    "StatusCode",
    "Strategy",
    "TokenEvent",
    "UnsupportedError",
    "errors",
    "format_bytes",
    "make_example_model",
    "parse_size",
    "set_log_level",
]
