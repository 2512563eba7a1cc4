"""layerstream: run transformer models larger than GPU memory from Python.

Layers that do not fit the device budget stream from pinned RAM and disk
while earlier layers compute. The API mirrors the C++ library
(runtime/include/layerstream/)::

    import layerstream as ls
    model = ls.Model("model.gguf", vram_budget="512MiB")
    ctx = model.create_context()
    for t in ctx.generate("Once upon a time", max_tokens=32, temperature=0):
        print(t.piece, end="", flush=True)

    # or, shaped like llama-cpp-python's Llama:
    out = model.create_completion("Once upon a time", max_tokens=32)
    print(out["choices"][0]["text"])

Errors are raised as :mod:`layerstream.errors` classes, which also subclass
the Python built-ins (FileNotFoundError, ValueError, MemoryError, ...);
generation releases the GIL and stops cleanly on Ctrl-C.
"""

from __future__ import annotations

from . import _layerstream, _signatures, errors

_signatures.attach(_layerstream)

from ._layerstream import (  # noqa: E402 (after attach: the functions with their signatures)
    Backend,
    Batch,
    BudgetPlan,
    ChatTemplate,
    Context,
    GenerateResult,
    Generation,
    IoPath,
    KvType,
    MemoryPlan,
    ModelInfo,
    PromptStart,
    SamplerChain,
    Stats,
    StatusCode,
    Strategy,
    TokenEvent,
    TokenLogprob,
    ToolCallStream,
    format_bytes,
    make_example_model,
    parse_size,
    set_log_level,
)
from .chat import ChatCompletionStream
from .completion import CompletionStream
from .errors import (
    CancelledError,
    CorruptionError,
    DeviceError,
    FileNotFoundIoError,
    InternalError,
    InvalidArgumentError,
    IoError,
    LayerstreamError,
    NotFoundError,
    OutOfBudgetError,
    PermissionIoError,
    UnsupportedError,
)
from .model import Model

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "Batch",
    "BudgetPlan",
    "CancelledError",
    "ChatCompletionStream",
    "ChatTemplate",
    "CompletionStream",
    "Context",
    "CorruptionError",
    "DeviceError",
    "FileNotFoundIoError",
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
    "PermissionIoError",
    "PromptStart",
    "SamplerChain",
    "Stats",
    "StatusCode",
    "Strategy",
    "TokenEvent",
    "TokenLogprob",
    "ToolCallStream",
    "UnsupportedError",
    "errors",
    "format_bytes",
    "make_example_model",
    "parse_size",
    "set_log_level",
]
