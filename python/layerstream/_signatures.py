"""Real signatures for the extension's functions and methods.

nanobind functions carry their signature as text (``__nb_signature__``) but
``inspect.signature`` cannot read it, so ``help()`` and IDEs show
``(*args, **kwargs)`` or nothing. :func:`attach` replaces each function of
the module and each method of its classes with a thin Python function that
calls the original and carries an :class:`inspect.Signature` built from that
text (names, kinds and default values), and the docstring.
"""

from __future__ import annotations

import ast
import inspect
from types import ModuleType
from typing import Any, Callable

# Dunder methods keep their nanobind slot (a Python wrapper would slow every
# `for` loop and `len()`); __init__ (so that classes have signatures) and the
# with-block methods, called once each, are wrapped.
_WRAPPED_DUNDERS = {"__init__", "__enter__", "__exit__"}


class _Annotation(str):
    """An annotation as nanobind wrote it, shown without quotes and without
    the module prefix of this package's own classes."""

    def __new__(cls, text: str) -> _Annotation:
        return super().__new__(cls, text.replace("layerstream._layerstream.", ""))

    def __repr__(self) -> str:
        return str(self)


def _split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def _matching_paren(text: str, open_at: int) -> int:
    """The index of the ")" that closes the "(" at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError(f"unbalanced signature: {text}")


def _default(text: str, defaults: tuple[Any, ...] | None) -> Any:
    if text.startswith("\\") and text[1:].isdigit() and defaults is not None:
        return defaults[int(text[1:])]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _Annotation(text)


def _parameter(text: str, kind: Any, defaults: tuple[Any, ...] | None) -> inspect.Parameter:
    default: Any = inspect.Parameter.empty
    if " = " in text:
        text, default_text = text.rsplit(" = ", 1)
        default = _default(default_text.strip(), defaults)
    annotation: Any = inspect.Parameter.empty
    if ":" in text:
        text, annotation_text = text.split(":", 1)
        annotation = _Annotation(annotation_text.strip())
    return inspect.Parameter(text.strip().lstrip("*"), kind, default=default, annotation=annotation)


def signature_of(nb_signature: tuple[Any, ...]) -> inspect.Signature:
    """The Signature of one nanobind overload: (text, doc, defaults)."""
    text, _, defaults = nb_signature
    open_at = text.index("(")
    close_at = _matching_paren(text, open_at)
    params_text = text[open_at + 1 : close_at]
    returns = text[close_at + 1 :].strip()
    kind: inspect._ParameterKind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params: list[inspect.Parameter] = []
    for part in _split_top_level(params_text):
        if part == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
        elif part == "/":
            params = [p.replace(kind=inspect.Parameter.POSITIONAL_ONLY) for p in params]
        elif part.startswith("**"):
            params.append(_parameter(part, inspect.Parameter.VAR_KEYWORD, defaults))
        elif part.startswith("*"):
            params.append(_parameter(part, inspect.Parameter.VAR_POSITIONAL, defaults))
            kind = inspect.Parameter.KEYWORD_ONLY
        else:
            params.append(_parameter(part, kind, defaults))
    return_annotation: Any = _Annotation(returns[2:].strip()) if returns.startswith("->") else inspect.Signature.empty
    return inspect.Signature(params, return_annotation=return_annotation)


def _wrap(fn: Any, qualname: str, module: str) -> Callable[..., Any] | None:
    overloads = getattr(fn, "__nb_signature__", None)
    if not overloads or len(overloads) != 1:
        return None  # not nanobind's, or overloaded: leave it as it is

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    call.__name__ = qualname.rsplit(".", 1)[-1]
    call.__qualname__ = qualname
    call.__module__ = module
    call.__doc__ = overloads[0][1]
    call.__signature__ = signature_of(overloads[0])  # type: ignore[attr-defined]
    return call


def _attach_to_class(cls: type, module: str) -> None:
    for name, member in list(vars(cls).items()):
        if name.startswith("__") and name not in _WRAPPED_DUNDERS:
            continue
        kind = type(member).__name__
        if kind not in ("nb_method", "nb_func"):
            continue
        wrapped = _wrap(member, f"{cls.__name__}.{name}", module)
        if wrapped is not None:
            setattr(cls, name, wrapped if kind == "nb_method" else staticmethod(wrapped))


def attach(module: ModuleType) -> None:
    """Gives every function and method of the nanobind `module` its signature."""
    for name, member in list(vars(module).items()):
        if name.startswith("_"):
            continue
        if type(member).__name__ == "nb_func":
            wrapped = _wrap(member, name, module.__name__)
            if wrapped is not None:
                setattr(module, name, wrapped)
        elif isinstance(member, type) and type(member).__name__ == "nb_type":
            _attach_to_class(member, module.__name__)
