"""OpenAI-shaped chat completions (``chat.completion`` objects and their
stream chunks), shaped like llama-cpp-python's
``Llama.create_chat_completion``: the conversation rendered with the model
file's chat template (the library's ChatTemplate), the reply's tool calls
parsed into ``tool_calls``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ._layerstream import ChatTemplate, Context, GenerateResult, Generation, ToolCallStream
from .completion import TokenLogprobs, chat_logprobs, finish_reason, generation_on

ChatCompletion = dict[str, Any]


def render(template: ChatTemplate, messages: Sequence[Mapping[str, Any]],
           tools: Sequence[Mapping[str, Any]] | None) -> str:
    """The prompt text of `messages` (and `tools`) for tokenizing with
    add_special=True (the tokenizer adds BOS, not the template)."""
    tools_json = json.dumps(list(tools)) if tools else ""
    return template.apply([dict(m) for m in messages], tools_json=tools_json, leave_bos_to_tokenizer=True)


def openai_tool_calls(calls: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The library's parsed calls (id, name, arguments) as OpenAI's tool_calls."""
    return [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls]


class ChatCall:
    """One create_chat_completion call: the id, time and model its objects
    share, the prompt's token count, and whether tools were offered (only
    then is the reply parsed for calls)."""

    def __init__(self, model_name: str, template: ChatTemplate, prompt_tokens: int, with_tools: bool,
                 piece: Callable[[int], str] | None = None) -> None:
        self.id = f"chatcmpl-{uuid.uuid4()}"
        self.piece = piece  # a token's text, when logprobs are asked for
        self.created = int(time.time())
        self.model_name = model_name
        self.template = template
        self.prompt_tokens = prompt_tokens
        self.with_tools = with_tools

    def _object(self, kind: str, choice: dict[str, Any]) -> ChatCompletion:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model_name,
                "choices": [choice]}

    def logprobs(self, result: GenerateResult) -> dict[str, Any] | None:
        """The answer's ``logprobs`` object (None when not asked for)."""
        if self.piece is None:
            return None
        entries = list(result.logprobs[0]) if result.logprobs else []
        return chat_logprobs(self.piece, entries, list(result.generated[0])[: len(entries)])

    def completion(self, text: str, generated: int, reason: str | None,
                   logprobs: dict[str, Any] | None = None) -> ChatCompletion:
        """The whole answer: the assistant message, its tool calls parsed
        (finish_reason "tool_calls" when it made any)."""
        content, calls = self.template.parse_tool_calls(text) if self.with_tools else (text, [])
        message: dict[str, Any] = {"role": "assistant", "content": content if content or not calls else None}
        if calls:
            message["tool_calls"] = openai_tool_calls(calls)
            reason = "tool_calls"
        out = self._object("chat.completion", {"index": 0, "message": message, "logprobs": logprobs,
                                               "finish_reason": reason})
        out["usage"] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": generated,
                        "total_tokens": self.prompt_tokens + generated}
        return out

    def chunk(self, delta: dict[str, Any], reason: str | None = None,
              logprobs: dict[str, Any] | None = None) -> ChatCompletion:
        """One ``chat.completion.chunk``."""
        return self._object("chat.completion.chunk", {"index": 0, "delta": delta, "logprobs": logprobs,
                                                      "finish_reason": reason})


class ChatCompletionStream(Iterator[ChatCompletion]):
    """The chunks of create_chat_completion(stream=True): the role, then the
    text as it comes (text that may begin a tool call is held back), then
    the tool calls, and a last chunk with the finish reason. It holds a
    context of its own until the last chunk or close() (a with block)."""

    def __init__(self, call: ChatCall, context: Context, generation: Generation) -> None:
        self._call = call
        self._context = context
        self._generation = generation
        self._calls: ToolCallStream | None = call.template.tool_call_stream() if call.with_tools else None
        self._queue: list[ChatCompletion] = [call.chunk({"role": "assistant", "content": ""})]
        self._logprobs = TokenLogprobs(call.piece, 0) if call.piece is not None else None
        self._done = False

    def __iter__(self) -> ChatCompletionStream:
        return self

    def __next__(self) -> ChatCompletion:
        while not self._queue:
            if self._done:
                raise StopIteration
            self._advance()
        return self._queue.pop(0)

    def _advance(self) -> None:
        """Queues the chunks of the next token, or the closing ones."""
        for event in self._generation:
            if self._logprobs is not None:
                self._logprobs.add(event)
            text = self._calls.feed(event.piece) if self._calls is not None else event.piece
            if text:
                self._queue.append(self._call.chunk({"content": text}, None, self._held_logprobs()))
                return
        reason = finish_reason(self._generation.result)
        if self._calls is not None:
            content, calls = self._calls.finish()
            if content:
                self._queue.append(self._call.chunk({"content": content}, None, self._held_logprobs()))
            if calls:
                tool_calls = [dict(c, index=i) for i, c in enumerate(openai_tool_calls(calls))]
                self._queue.append(self._call.chunk({"tool_calls": tool_calls}, None, self._held_logprobs()))
                reason = "tool_calls"
        # Tokens that showed no text (held as a call, the end-of-generation token) go with the last chunk.
        self._queue.append(self._call.chunk({}, reason, self._held_logprobs()))
        self.close()

    def _held_logprobs(self) -> dict[str, Any] | None:
        """The logprobs of the tokens since the last chunk (when asked for)."""
        return self._logprobs.take_chat() if self._logprobs is not None else None

    def close(self) -> None:
        """Stops the generation at the next token and gives the context's
        sequence back to the model. Idempotent; chunks already made stay."""
        self._done = True
        self._generation.close()
        self._context.close()

    def __enter__(self) -> ChatCompletionStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_chat(context: Context, call: ChatCall, tokens: Sequence[int], sampling: dict[str, Any],
               stream: bool) -> ChatCompletion | ChatCompletionStream:
    """Runs `call` on `context`, a fresh one it closes when done: the
    answer, or its stream (which closes it)."""
    if stream:
        return ChatCompletionStream(call, context, generation_on(context, tokens, sampling))
    with context:
        result = context.complete(list(tokens), **sampling)
    return call.completion(result.text[0], len(result.generated[0]), finish_reason(result), call.logprobs(result))
