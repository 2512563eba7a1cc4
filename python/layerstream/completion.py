"""OpenAI-shaped completions (``text_completion`` objects and their stream
chunks) from the library's generation, shaped like llama-cpp-python's
``Llama.create_completion``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Union

from ._layerstream import Context, GenerateResult, Generation

Prompt = Union[str, Sequence[int]]
Completion = dict[str, Any]


def finish_reason(result: GenerateResult | None, sequence: int = 0) -> str | None:
    """Why `sequence` stopped ("stop", "length"): None, because the library's
    GenerateResult does not say yet; the one place to read it from once it does."""
    return None


class CompletionCall:
    """One create_completion call: the id, time and model every object of
    its answer shares, and the prompt's tokens."""

    def __init__(self, model_name: str, prompt_tokens: Sequence[int], echo: bool) -> None:
        self.id = f"cmpl-{uuid.uuid4()}"
        self.created = int(time.time())
        self.model_name = model_name
        self.prompt_tokens = list(prompt_tokens)
        self.echo = echo

    def _object(self, text: str, reason: str | None) -> Completion:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model_name,
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": reason}],
        }

    def echoed(self, text: str, prompt_text: str) -> str:
        return prompt_text + text if self.echo else text

    def completion(self, result: GenerateResult, prompt_text: str) -> Completion:
        """The whole answer (stream=False)."""
        out = self._object(self.echoed(result.text[0], prompt_text), finish_reason(result))
        generated = len(result.generated[0])
        out["usage"] = {
            "prompt_tokens": len(self.prompt_tokens),
            "completion_tokens": generated,
            "total_tokens": len(self.prompt_tokens) + generated,
        }
        return out

    def chunk(self, text: str, reason: str | None = None) -> Completion:
        """One stream chunk: the text of the tokens since the last one."""
        return self._object(text, reason)


class CompletionStream(Iterator[Completion]):
    """The chunks of create_completion(stream=True): one per token that
    completes text, then a last one with the finish reason. It holds a
    context of its own until the last chunk, close(), the end of a with
    block, or the next create_completion on the model from the same thread
    (so a loop left early does not hold the model's sequence)."""

    def __init__(self, call: CompletionCall, context: Context, generation: Generation, prompt_text: str) -> None:
        self._call = call
        self._context = context
        self._generation = generation
        self._pending_echo = prompt_text if call.echo else ""
        self._done = False

    def __iter__(self) -> CompletionStream:
        return self

    def __next__(self) -> Completion:
        if self._done:
            raise StopIteration
        for event in self._generation:
            if event.piece:
                text, self._pending_echo = self._pending_echo + event.piece, ""
                return self._call.chunk(text)
        last = self._call.chunk(self._pending_echo, finish_reason(self._generation.result))
        self.close()
        return last

    def close(self) -> None:
        """Stops the generation at the next token and gives the context's
        sequence back to the model. Idempotent."""
        self._done = True
        self._generation.close()
        self._context.close()

    def __enter__(self) -> CompletionStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start(context: Context, call: CompletionCall, sampling: dict[str, Any], stream: bool,
          prompt_text: str) -> Completion | CompletionStream:
    """Runs `call` on `context`, a fresh one it closes when done: the
    answer, or its stream (which closes it)."""
    if stream:
        return CompletionStream(call, context, context.generate(call.prompt_tokens, **sampling), prompt_text)
    with context:
        return call.completion(context.complete(call.prompt_tokens, **sampling), prompt_text)
