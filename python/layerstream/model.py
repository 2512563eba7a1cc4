"""layerstream.Model: the extension's Model with the llama-cpp-python-style
completion calls (create_completion, calling the model, and
create_chat_completion)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from . import _layerstream
from .chat import ChatCall, ChatCompletion, ChatCompletionStream, render, start_chat
from .completion import Completion, CompletionCall, CompletionStream, Prompt, sampling_args, start, stop_list

# An answer of create_completion or create_chat_completion (a dict or a stream).
_Answer = TypeVar("_Answer")


class Model(_layerstream.Model):
    __doc__ = _layerstream.Model.__doc__


    def create_completion(
        self,
        prompt: Prompt,
        *,
        max_tokens: int | None = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        top_k: int = 40,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        seed: int | None = None,
        echo: bool = False,
        stream: bool = False,
        stop: str | Sequence[str] | None = None,
        logprobs: int | None = None,
        typical_p: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        logit_bias: Mapping[int, float] | None = None,
    ) -> Completion | CompletionStream:
        """A completion of `prompt` as an OpenAI ``text_completion`` dict.

        Shaped like llama-cpp-python's ``Llama.create_completion``: ``id``,
        ``object``, ``created``, ``model``, ``choices`` (``text``, ``index``,
        ``logprobs``, ``finish_reason``) and ``usage``. Runs on a context of
        its own (one sequence of the model's pool) that it closes when done.

        Args:
            prompt: text (special tokens written in it are parsed; BOS added
                where the file asks) or token ids.
            max_tokens: most tokens to generate; None or <= 0: up to the
                end of the context.
            temperature: <= 0 is greedy (argmax).
            top_p: keep the most likely tokens up to this mass (>= 1: all).
            min_p: drop tokens below min_p x the top probability.
            top_k: keep the k most likely tokens (<= 0: all).
            repeat_penalty: > 1 makes recent tokens less likely.
            repeat_last_n: tokens of history the penalty looks at.
            seed: the sampling seed; None or -1: a random one.
            echo: put the prompt's text before the completion.
            stream: return an iterator of chunks (the same shape, the text
                of each new token) ending with one that has finish_reason.
            stop: a string or strings that end the completion where they
                first appear (not returned); finish_reason "stop".
            logprobs: with this many alternatives per token, the choice's
                ``logprobs`` (tokens, token_logprobs, top_logprobs,
                text_offset), of the prompt's tokens too with echo; None:
                none. Streamed, each chunk carries its tokens' (not with
                echo).
            typical_p: locally typical sampling mass (1: off).
            presence_penalty: subtracted from the logit of a token that
                occurs in the last repeat_last_n (OpenAI's; 0: off).
            frequency_penalty: subtracted per occurrence (0: off).
            logit_bias: {token id: value} added to the logits (-inf bans).

        Returns:
            The completion dict, or with stream=True a CompletionStream.

        Raises:
            ValueError: (InvalidArgumentError) the prompt does not fit the
                context, or it is empty; a sampling value out of range
                (the library's validate_sampling names it); logprobs with
                echo and stream=True.
            MemoryError: (OutOfBudgetError) no sequence of the pool is free.
        """
        tokens = self.tokenize(prompt, add_special=True, parse_special=True) if isinstance(prompt, str) else list(
            prompt)
        if logprobs is not None and stream and echo:
            raise ValueError("create_completion: logprobs with echo is not available with stream=True "
                             "(the prompt's come with the whole result)")
        sampling = sampling_args(max_tokens=self._max_tokens(max_tokens, tokens), temperature=temperature,
                                 top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                                 repeat_last_n=repeat_last_n, seed=seed, typical_p=typical_p,
                                 presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                                 logit_bias=logit_bias, stop=stop)
        if logprobs is not None:
            sampling.update(logprobs=logprobs, prompt_logprobs=echo)
        prompt_text = prompt if isinstance(prompt, str) else self.detokenize(tokens)
        piece = (lambda t: self.detokenize([t])) if logprobs is not None else None
        call = CompletionCall(self.info.path, tokens, echo, piece)
        self._close_last_stream()
        return self._remember(start(self.create_context(), call, sampling, stream, prompt_text))

    def create_chat_completion(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        min_p: float = 0.05,
        top_k: int = 40,
        typical_p: float = 1.0,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        logit_bias: Mapping[int, float] | None = None,
        seed: int | None = None,
        stop: str | Sequence[str] | None = None,
        stream: bool = False,
        chat_template: str = "",
        logprobs: bool = False,
        top_logprobs: int | None = None,
    ) -> ChatCompletion | ChatCompletionStream:
        """A reply to a conversation as an OpenAI ``chat.completion`` dict.

        Shaped like llama-cpp-python's ``Llama.create_chat_completion``:
        ``id``, ``object``, ``created``, ``model``, ``choices`` (``index``,
        ``message`` with ``role``, ``content`` and ``tool_calls``,
        ``logprobs``, ``finish_reason``) and ``usage``. The conversation is
        rendered with the file's chat template (ChatTemplate); the reply
        ends at the template's turn end. Runs on a context of its own.

        Args:
            messages: OpenAI chat messages: dicts with ``role`` and
                ``content``; an assistant's ``tool_calls``; a tool result's
                ``tool_call_id`` (and ``name``).
            tools: OpenAI's tools ({"type": "function", "function": {name,
                description, parameters}}); the reply's calls come back in
                ``tool_calls`` with finish_reason "tool_calls".
            tool_choice: "auto" or None: the model may call the tools;
                "none": they are not offered. Other choices (forcing a
                call) raise ValueError.
            max_tokens: most tokens to generate; None or <= 0: up to the
                end of the context.
            temperature: <= 0 is greedy (argmax).
            top_p: keep the most likely tokens up to this mass (1: all).
            min_p: drop tokens below min_p x the top probability.
            top_k: keep the k most likely tokens (0: all).
            typical_p: locally typical sampling mass (1: off).
            repeat_penalty: > 1 makes recent tokens less likely.
            repeat_last_n: tokens of history the penalties look at.
            presence_penalty: subtracted from the logit of a token that
                occurs in that history (0: off).
            frequency_penalty: subtracted per occurrence (0: off).
            logit_bias: {token id: value} added to the logits (-inf bans).
            seed: the sampling seed; None or -1: a random one.
            stop: more strings that end the reply (not returned).
            stream: return an iterator of ``chat.completion.chunk`` dicts
                (``delta``: the role, then content, then tool_calls) ending
                with one that has finish_reason.
            chat_template: a built-in template name or a Jinja file to use
                instead of the file's; "": the file's.
            logprobs: the choice's ``logprobs`` (``content``: per generated
                token its text, logprob and bytes); streamed, each chunk
                carries its tokens'.
            top_logprobs: with logprobs, this many alternatives per token
                (0-20; None: 0).

        Returns:
            The chat completion dict, or with stream=True a
            ChatCompletionStream.

        Raises:
            ValueError: (InvalidArgumentError) a sampling value out of
                range, tools that are not function tools, a conversation
                the template refuses, or a prompt that does not fit.
            TypeError: a message or tool call that is not a dict of str.
        """
        if top_logprobs is not None and not logprobs:
            raise ValueError("create_chat_completion: top_logprobs needs logprobs=True")
        if top_logprobs is not None and not 0 <= top_logprobs <= 20:
            raise ValueError(f"create_chat_completion: top_logprobs is {top_logprobs}; it must be in [0, 20]")
        if tool_choice not in (None, "auto", "none"):
            raise ValueError(f"tool_choice: {tool_choice!r} is not supported (want 'auto', 'none' or None)")
        if tool_choice == "none":
            tools = None
        template = self._chat_template(chat_template)
        prompt = render(template, messages, tools)
        tokens = self.tokenize(prompt, add_special=True, parse_special=True)
        sampling = sampling_args(max_tokens=self._max_tokens(max_tokens, tokens), temperature=temperature,
                                 top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                                 repeat_last_n=repeat_last_n, seed=seed, typical_p=typical_p,
                                 presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                                 logit_bias=logit_bias, stop=stop_list(stop) + list(template.turn_ends))
        if logprobs:
            sampling.update(logprobs=top_logprobs or 0)
        piece = (lambda t: self.detokenize([t])) if logprobs else None
        call = ChatCall(self.info.path, template, len(tokens), bool(tools), piece)
        self._close_last_stream()
        return self._remember(start_chat(self.create_context(), call, tokens, sampling, stream))

    def _max_tokens(self, max_tokens: int | None, prompt_tokens: Sequence[int]) -> int:
        """max_tokens, or for None or <= 0 the room the prompt leaves in the context."""
        if max_tokens is None or max_tokens <= 0:
            return max(self.n_ctx() - len(prompt_tokens), 0)
        return max_tokens

    def _remember(self, out: _Answer) -> _Answer:
        """`out`; a stream is kept (weakly) as this thread's last, for the
        next call to close."""
        if isinstance(out, (CompletionStream, ChatCompletionStream)):
            self._last_streams()[threading.get_ident()] = weakref.ref(out)
        return out

    def _chat_template(self, spec: str) -> _layerstream.ChatTemplate:
        """The model's ChatTemplate for `spec`, parsed once."""
        templates: dict[str, _layerstream.ChatTemplate] = self.__dict__.setdefault("_chat_templates", {})
        if spec not in templates:
            templates[spec] = _layerstream.ChatTemplate.for_model(self, spec)
        return templates[spec]

    def __call__(self, prompt: Prompt, **kwargs: Any) -> Completion | CompletionStream:
        """create_completion(prompt, **kwargs), as llama-cpp-python's Llama is called."""
        return self.create_completion(prompt, **kwargs)

    def _last_streams(self) -> dict[int, weakref.ref[CompletionStream | ChatCompletionStream]]:
        """Per thread, the last stream create_completion returned: the next
        call from that thread closes it, so a loop left early does not hold
        a sequence of the pool until the stream is collected."""
        streams: dict[int, weakref.ref[CompletionStream | ChatCompletionStream]]
        streams = self.__dict__.setdefault("_streams", {})
        return streams

    def _close_last_stream(self) -> None:
        last = self._last_streams().pop(threading.get_ident(), None)
        stream = last() if last is not None else None
        if stream is not None:
            stream.close()



__all__ = ["Model"]
