"""layerstream.Model: the extension's Model with the llama-cpp-python-style
completion call (create_completion, and calling the model)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from . import _layerstream
from .completion import Completion, CompletionCall, CompletionStream, Prompt, start


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

        Returns:
            The completion dict, or with stream=True a CompletionStream.

        Raises:
            ValueError: (InvalidArgumentError) the prompt does not fit the
                context, or it is empty.
            MemoryError: (OutOfBudgetError) no sequence of the pool is free.
        """
        tokens = self.tokenize(prompt, add_special=True, parse_special=True) if isinstance(prompt, str) else list(
            prompt)
        if max_tokens is None or max_tokens <= 0:
            max_tokens = max(self.n_ctx() - len(tokens), 0)
        sampling: dict[str, Any] = dict(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                        min_p=min_p, repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                                        seed=seed)
        prompt_text = prompt if isinstance(prompt, str) else self.detokenize(tokens)
        call = CompletionCall(self.info.path, tokens, echo)
        self._close_last_stream()
        out = start(self.create_context(), call, sampling, stream, prompt_text)
        if isinstance(out, CompletionStream):
            self._last_streams()[threading.get_ident()] = weakref.ref(out)
        return out

    def __call__(self, prompt: Prompt, **kwargs: Any) -> Completion | CompletionStream:
        """create_completion(prompt, **kwargs), as llama-cpp-python's Llama is called."""
        return self.create_completion(prompt, **kwargs)

    def _last_streams(self) -> dict[int, weakref.ref[CompletionStream]]:
        """Per thread, the last stream create_completion returned: the next
        call from that thread closes it, so a loop left early does not hold
        a sequence of the pool until the stream is collected."""
        streams: dict[int, weakref.ref[CompletionStream]] = self.__dict__.setdefault("_streams", {})
        return streams

    def _close_last_stream(self) -> None:
        last = self._last_streams().pop(threading.get_ident(), None)
        stream = last() if last is not None else None
        if stream is not None:
            stream.close()



__all__ = ["Model"]
