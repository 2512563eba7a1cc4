"""Type stubs of the extension module layerstream._layerstream (python/src/)."""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Union

import numpy as np
import numpy.typing as npt

#: Bytes as an int, or a size like "512MiB", "1.5G", "4096".
Size = Union[int, str]

class StatusCode(enum.Enum):
    OK = 0
    INVALID_ARGUMENT = 1
    CORRUPTION = 2
    UNSUPPORTED = 3
    NOT_FOUND = 4
    IO_ERROR = 5
    OUT_OF_BUDGET = 6
    DEVICE_ERROR = 7
    CANCELLED = 8
    INTERNAL = 9

class Backend(enum.Enum):
    """Where layers compute: AUTO picks CUDA when a device is present, else HOST."""
    AUTO = 0
    HOST = 1
    CUDA = 2

class IoPath(enum.Enum):
    """How disk-tier layers are read (AUTO: io_uring O_DIRECT when available)."""
    AUTO = 0
    URING = 1
    PREAD = 2
    BUFFERED = 3

class KvType(enum.Enum):
    """Element type of the KV cache."""
    F32 = 0
    F16 = 1

class Strategy(enum.Enum):
    """How layers are placed."""
    RESIDENT = 0
    SERIAL = 1
    OVERLAP = 2
    PLANNED = 3
    HOST = 4

def parse_size(text: str) -> int:
    """Bytes from a size like '512MiB', '1.5G' or '4096'."""

def format_bytes(bytes: int) -> str:
    """A byte count for people, e.g. '1.50 GiB'."""

def set_log_level(level: str) -> None:
    """The library's log level (stderr): trace, debug, info, warn, error, critical or off."""

def make_example_model(path: str | os.PathLike[str], *, size: Size = 0, dtype: str = "f16", seed: int = 1) -> None:
    """Writes the example model (a Llama GGUF with pseudo-random weights and a tokenizer).

    size 0: a tiny 4-layer model (~1 MiB); else about that many bytes. dtype: f32,
    f16, bf16, q8_0, q4_0, q4_1. OutOfBudgetError, before writing, when it would
    not fit the free disk.
    """

class Batch:
    """Tokens for one Context.decode call (like llama.cpp's llama_batch)."""
    def __init__(self) -> None: ...
    def add(self, token: int, position: int, sequence: int = 0, logits: bool = False) -> None: ...
    def add_sequence(self, tokens: Sequence[int], first_position: int, sequence: int = 0,
                     logits_for_last: bool = True) -> None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def tokens(self) -> list[int]: ...
    @property
    def positions(self) -> list[int]: ...
    @property
    def sequences(self) -> list[int]: ...
    @property
    def logits(self) -> list[bool]: ...

class SamplerChain:
    """Repetition penalty, top-k, top-p, min-p and temperature, then a seeded draw."""
    def __init__(self, *, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64, seed: int = 0) -> None: ...
    def sample(self, logits: npt.NDArray[np.float32]) -> int:
        """A token id from one row of logits (not accepted; -1 when empty)."""
    def accept(self, token: int) -> None: ...
    def reset(self) -> None: ...

class ModelInfo:
    """What a model file is, from its metadata."""
    @property
    def path(self) -> str: ...
    @property
    def architecture(self) -> str: ...
    @property
    def file_bytes(self) -> int: ...
    @property
    def layers(self) -> int: ...
    @property
    def embedding(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def kv_heads(self) -> int: ...
    @property
    def vocab(self) -> int: ...
    @property
    def context(self) -> int: ...

class BudgetPlan:
    """One budget's placement and predicted speed."""
    vram_bytes: int
    ram_bytes: int
    fits: bool
    layers_resident: int
    layers_ram: int
    layers_disk: int
    slots: int
    placement: str
    predicted_decode_pass_s: float
    predicted_decode_tokens_per_s: float
    predicted_prefill_tokens_per_s: float

class MemoryPlan:
    """How much memory a model needs and how fast it runs per budget."""
    model: str
    context: int
    sequences: int
    pass_tokens: int
    kv_type: KvType
    weight_bytes: int
    largest_layer_bytes: int
    kv_bytes: int
    activation_bytes: int
    min_vram_bytes: int
    all_resident_vram_bytes: int
    figures_source: str
    link_gbps: float
    disk_gbps: float
    budgets: list[BudgetPlan]

class Model:
    """One GGUF model opened within memory budgets; owns weights, placement and the KV pool."""
    def __init__(self, path: str | os.PathLike[str], *, vram_budget: Size = 0, ram_budget: Size = 0,
                 backend: Backend = Backend.AUTO, sim_link_gbps: float = 0.0, host_threads: int = 0,
                 io: IoPath = IoPath.AUTO, context: int = 0, sequences: int = 1, prefill_chunk: int = 256,
                 kv_type: KvType = KvType.F32, strategy: Strategy = Strategy.PLANNED, trace: bool = False,
                 progress: Callable[[float], bool | None] | None = None, host_factor: float = 0.0) -> None:
        """Opens a GGUF model within memory budgets (see the module docs).

        Raises IoError, CorruptionError, UnsupportedError, NotFoundError,
        InvalidArgumentError, OutOfBudgetError (saying what would fit) or
        CancelledError; KeyboardInterrupt on Ctrl-C while loading.
        """
    @staticmethod
    def plan(path: str | os.PathLike[str], *, context: int = 0, sequences: int = 1, prefill_chunk: int = 256,
             kv_type: KvType = KvType.F32, backend: Backend = Backend.AUTO, sim_link_gbps: float = 0.0,
             host_threads: int = 0, io: IoPath = IoPath.AUTO, box: str = "", vram_budget: Size = 0,
             ram_budget: Size = 0, budgets: int = 8) -> MemoryPlan:
        """The memory plan of a model file, without loading it."""
    @property
    def info(self) -> ModelInfo: ...
    def tokenize(self, text: str, add_bos: bool = True) -> list[int]: ...
    def detokenize(self, tokens: Sequence[int]) -> str: ...
    def is_end_of_generation(self, token: int) -> bool: ...
    @property
    def n_vocab(self) -> int: ...
    @property
    def n_context(self) -> int: ...
    @property
    def free_sequences(self) -> int: ...
    @property
    def load_bytes(self) -> int: ...
    @property
    def placement(self) -> str: ...
    def create_context(self, sequences: int = 1) -> Context:
        """A Context with `sequences` KV sequences from the pool (OutOfBudgetError when fewer are free)."""

class TokenEvent:
    """One generated token: its sequence, id and the UTF-8 text it completes."""
    @property
    def sequence(self) -> int: ...
    @property
    def token(self) -> int: ...
    @property
    def piece(self) -> str: ...

class Stats:
    """What one generation did, measured."""
    backend: str
    device: str
    plan: str
    prompt_tokens: int
    generated_tokens: int
    batch: int
    prefill_s: float
    decode_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    mean_decode_pass_ms: float
    mean_predicted_pass_ms: float
    mean_lower_bound_ms: float
    overlap_efficiency: float
    bytes_streamed_per_pass: int
    bytes_streamed_per_token: float
    layers_resident: int
    layers_ram: int
    layers_disk: int
    model_bytes: int
    vram_budget: int
    ram_budget: int
    kv_bytes: int
    load_bytes: int
    replans: int
    disk_gbps: float  # disk-tier reads over the decode passes: bytes / time the disk was busy (0: none)
    def as_dict(self) -> dict[str, Any]: ...

class GenerateResult:
    """The whole of one generation."""
    prompt_tokens: list[int]
    generated: list[list[int]]
    text: list[str]
    vocab: int
    stats: Stats
    @property
    def logits(self) -> npt.NDArray[np.float32]:
        """[generated positions, vocab] of sequence 0 (empty unless keep_logits=True)."""

class Generation(Iterator[TokenEvent]):
    """An iterator of TokenEvent; `result` holds the GenerateResult at the end."""
    def __iter__(self) -> Generation: ...
    def __next__(self) -> TokenEvent: ...
    def close(self) -> None: ...
    def __enter__(self) -> Generation: ...
    def __exit__(self, *args: object) -> None: ...
    @property
    def finished(self) -> bool: ...
    @property
    def result(self) -> GenerateResult | None: ...

class Context:
    """One conversation: KV-cache sequences that persist between calls."""
    def generate(self, prompt: str | Sequence[int], *, max_tokens: int = 32, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0, stop_at_eog: bool = True,
                 keep_logits: bool = False) -> Generation:
        """Generates from `prompt` as an iterator of TokenEvent (temperature <= 0: greedy)."""
    def complete(self, prompt: str | Sequence[int], *, max_tokens: int = 32, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0, stop_at_eog: bool = True,
                 keep_logits: bool = False) -> GenerateResult:
        """generate() run to the end."""
    def decode(self, batch: Batch) -> None: ...
    def logits(self, i: int) -> npt.NDArray[np.float32]: ...
    @property
    def sequences(self) -> int: ...
    @property
    def n_context(self) -> int: ...
    def position(self, sequence: int = 0) -> int: ...
    def clear(self, sequence: int = -1) -> None: ...
    def copy_sequence(self, src: int, dst: int) -> None: ...
    def remove(self, sequence: int, start: int) -> None: ...
    def write_trace(self, path: str | os.PathLike[str]) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Context: ...
    def __exit__(self, *args: object) -> None: ...
