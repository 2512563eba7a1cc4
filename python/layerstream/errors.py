"""Exceptions raised by layerstream: one class per library StatusCode.

Every error the C++ library reports (a ``layerstream::Status``) is raised as
a subclass of :class:`LayerstreamError`; ``str(e)`` is the library's message
(the text the ``layerstream`` command prints after ``error:``) and ``e.code``
its :class:`StatusCode`.
"""

from __future__ import annotations


class LayerstreamError(Exception):
    """A layerstream::Status that is not OK."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        from ._layerstream import StatusCode

        self.message = message
        self.code = StatusCode(code)

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(LayerstreamError, ValueError):
    """A caller-supplied value is wrong (option, size, prompt, token)."""


class CorruptionError(LayerstreamError):
    """A file's contents break its format (bad magic, overflowing count, ...)."""


class UnsupportedError(LayerstreamError):
    """Valid input layerstream does not handle (tensor type, architecture)."""


class NotFoundError(LayerstreamError):
    """A file, tensor or key that must exist does not."""


class IoError(LayerstreamError, OSError):
    """The OS failed a read, write or open (the errno is in the message)."""


class OutOfBudgetError(LayerstreamError):
    """A memory budget cannot hold what was asked (the message says what would)."""


class DeviceError(LayerstreamError):
    """The CUDA runtime or another device API failed."""


class CancelledError(LayerstreamError):
    """The operation was cancelled (a progress callback returned False)."""


class InternalError(LayerstreamError):
    """A bug in layerstream: an invariant that should hold did not."""


_BY_CODE = {
    1: InvalidArgumentError,
    2: CorruptionError,
    3: UnsupportedError,
    4: NotFoundError,
    5: IoError,
    6: OutOfBudgetError,
    7: DeviceError,
    8: CancelledError,
    9: InternalError,
}


def error_class(code: int) -> type[LayerstreamError]:
    """The exception class for a StatusCode value (LayerstreamError for an unknown one)."""
    return _BY_CODE.get(int(code), LayerstreamError)


__all__ = [
    "LayerstreamError",
    "InvalidArgumentError",
    "CorruptionError",
    "UnsupportedError",
    "NotFoundError",
    "IoError",
    "OutOfBudgetError",
    "DeviceError",
    "CancelledError",
    "InternalError",
    "error_class",
]
