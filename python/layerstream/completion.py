"""OpenAI-shaped completions (``text_completion`` objects and their stream
chunks) from the library's generation, shaped like llama-cpp-python's
``Llama.create_completion``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Union

from ._layerstream import Context, GenerateResult, Generation, TokenEvent, TokenLogprob

Prompt = Union[str, Sequence[int]]
Completion = dict[str, Any]

# The library's finish reasons (GenerateResult.finish) in OpenAI's words: an
# end-of-generation token and a stop string both end the text ("stop"); a
# full context is a length limit too. A generation stopped from outside
# (a stream closed early) has none.
_OPENAI_FINISH = {"eog": "stop", "stop": "stop", "length": "length", "context_full": "length", "none": "length"}


def finish_reason(result: GenerateResult | None, sequence: int = 0) -> str | None:
    """Why `sequence` stopped, in OpenAI's words ("stop", "length"); None
    before the end or when it was stopped from outside."""
    if result is None or sequence >= len(result.finish):
        return None
    return _OPENAI_FINISH.get(result.finish[sequence])


def stop_list(stop: str | Sequence[str] | None) -> list[str]:
    """OpenAI's `stop` (a string, a list of them, or None) as a list."""
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)


def logprobs_dict(piece: Callable[[int], str], entries: Sequence[TokenLogprob | None], tokens: Sequence[int],
                  first_offset: int) -> dict[str, Any]:
    """OpenAI's completions ``logprobs`` object for `tokens` (entries[i] the
    TokenLogprob of tokens[i], None for a token nothing predicted, such as
    the prompt's first): tokens, token_logprobs, top_logprobs (piece ->
    logprob) and text_offset (where each token's text starts, from
    `first_offset`)."""
    pieces = [piece(t) for t in tokens]
    offsets, at = [], first_offset
    for p in pieces:
        offsets.append(at)
        at += len(p)
    return {
        "tokens": pieces,
        "token_logprobs": [e.logprob if e is not None else None for e in entries],
        "top_logprobs": [{piece(t): lp for t, lp in e.top} if e is not None else None for e in entries],
        "text_offset": offsets,
    }


def sampling_args(*, stop: str | Sequence[str] | None, logit_bias: Mapping[int, float] | None,
                  **fields: Any) -> dict[str, Any]:
    """Context.generate's keyword arguments from an OpenAI-style call: `stop`
    as a list, logit_bias keys as token ids (OpenAI's JSON writes them as
    strings)."""
    bias = {int(token): float(value) for token, value in (logit_bias or {}).items()}
    return dict(fields, stop=stop_list(stop), logit_bias=bias)


class TokenLogprobs:
    """A stream's generated tokens and their logprobs (TokenEvent.logprob)
    since the last chunk, handed out as the chunk's completions
    ``logprobs`` object; text offsets run on from `first_offset` over the
    whole stream."""

    def __init__(self, piece: Callable[[int], str], first_offset: int) -> None:
        self._piece = piece
        self._offset = first_offset
        self._tokens: list[int] = []
        self._entries: list[TokenLogprob | None] = []

    def add(self, event: TokenEvent) -> None:
        self._tokens.append(event.token)
        self._entries.append(event.logprob)

    def take(self) -> dict[str, Any] | None:
        """The tokens since the last take (None when there are none)."""
        if not self._tokens:
            return None
        out = logprobs_dict(self._piece, self._entries, self._tokens, self._offset)
        self._offset += sum(len(p) for p in out["tokens"])
        self._tokens, self._entries = [], []
        return out

    def take_chat(self) -> dict[str, Any] | None:
        """The same in chat's shape (chat_logprobs)."""
        if not self._tokens:
            return None
        out = chat_logprobs(self._piece, self._entries, self._tokens)
        self._tokens, self._entries = [], []
        return out


def chat_logprobs(piece: Callable[[int], str], entries: Sequence[TokenLogprob | None],
                  tokens: Sequence[int]) -> dict[str, Any]:
    """OpenAI's chat ``logprobs`` object: ``content``, per token its text,
    logprob, UTF-8 bytes and top_logprobs (the same for each alternative)."""

    def one(token: int, logprob: float) -> dict[str, Any]:
        text = piece(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    content = []
    for token, entry in zip(tokens, entries):
        if entry is None:
            continue
        content.append(dict(one(token, entry.logprob), top_logprobs=[one(t, lp) for t, lp in entry.top]))
    return {"content": content}


class CompletionCall:
    """One create_completion call: the id, time and model every object of
    its answer shares, and the prompt's tokens."""

    def __init__(self, model_name: str, prompt_tokens: Sequence[int], echo: bool,
                 piece: Callable[[int], str] | None = None) -> None:
        self.id = f"cmpl-{uuid.uuid4()}"
        self.created = int(time.time())
        self.model_name = model_name
        self.prompt_tokens = list(prompt_tokens)
        self.echo = echo
        self.piece = piece  # a token's text, when logprobs are asked for

    def _object(self, text: str, reason: str | None, logprobs: dict[str, Any] | None = None) -> Completion:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model_name,
            "choices": [{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": reason}],
        }

    def logprobs(self, result: GenerateResult, prompt_text: str) -> dict[str, Any] | None:
        """The ``logprobs`` object of the answer: the generated tokens', and
        with echo the prompt's before them (offsets then count from the
        prompt's start, else from its end, as llama-cpp-python's do)."""
        if self.piece is None or not result.logprobs:
            return None
        entries: list[TokenLogprob | None] = list(result.logprobs[0])
        tokens = list(result.generated[0])[: len(entries)]
        if not self.echo:
            return logprobs_dict(self.piece, entries, tokens, len(prompt_text))
        prompt_entries: list[TokenLogprob | None] = [None, *result.prompt_logprobs]
        return logprobs_dict(self.piece, prompt_entries + entries, self.prompt_tokens + tokens, 0)

    def echoed(self, text: str, prompt_text: str) -> str:
        return prompt_text + text if self.echo else text

    def completion(self, result: GenerateResult, prompt_text: str) -> Completion:
        """The whole answer (stream=False)."""
        out = self._object(self.echoed(result.text[0], prompt_text), finish_reason(result),
                           self.logprobs(result, prompt_text))
        generated = len(result.generated[0])
        out["usage"] = {
            "prompt_tokens": len(self.prompt_tokens),
            "completion_tokens": generated,
            "total_tokens": len(self.prompt_tokens) + generated,
        }
        return out

    def chunk(self, text: str, reason: str | None = None, logprobs: dict[str, Any] | None = None) -> Completion:
        """One stream chunk: the text of the tokens since the last one (and
        their logprobs when asked for)."""
        return self._object(text, reason, logprobs)


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
        self._logprobs = TokenLogprobs(call.piece, len(prompt_text)) if call.piece is not None else None
        self._done = False

    def __iter__(self) -> CompletionStream:
        return self

    def __next__(self) -> Completion:
        if self._done:
            raise StopIteration
        for event in self._generation:
            if self._logprobs is not None:
                self._logprobs.add(event)
            if event.piece:
                text, self._pending_echo = self._pending_echo + event.piece, ""
                return self._call.chunk(text, None, self._logprobs.take() if self._logprobs else None)
        # The tokens that completed no text (the end-of-generation token) go with the last chunk.
        last = self._call.chunk(self._pending_echo, finish_reason(self._generation.result),
                                self._logprobs.take() if self._logprobs else None)
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


def generation_on(context: Context, tokens: Sequence[int], sampling: dict[str, Any]) -> Generation:
    """context.generate(tokens, **sampling) for a stream; when it refuses
    (a sampling value out of range), the context is closed at once rather
    than when the exception's traceback lets it go."""
    try:
        return context.generate(list(tokens), **sampling)
    except BaseException:
        context.close()
        raise


def start(context: Context, call: CompletionCall, sampling: dict[str, Any], stream: bool,
          prompt_text: str) -> Completion | CompletionStream:
    """Runs `call` on `context`, a fresh one it closes when done: the
    answer, or its stream (which closes it)."""
    if stream:
        return CompletionStream(call, context, generation_on(context, call.prompt_tokens, sampling), prompt_text)
    with context:
        return call.completion(context.complete(call.prompt_tokens, **sampling), prompt_text)
