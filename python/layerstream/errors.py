"""Exceptions raised by layerstream: one class per library StatusCode.

Every error the C++ library reports (a ``layerstream::Status``) is raised as
a subclass of :class:`LayerstreamError`; ``str(e)`` is the library's message
(the text the ``layerstream`` command prints after ``error:``) and ``e.code``
its :class:`StatusCode`.

The classes also subclass the Python built-in that fits, so code that knows
nothing of layerstream catches them: a bad value is a ``ValueError``, a
budget too small a ``MemoryError``, a failed read or open an ``OSError``
with ``errno`` and ``filename`` set (``FileNotFoundError`` for a missing
file, ``PermissionError`` for one that may not be read).
"""

from __future__ import annotations

import errno as _errno
import os
import re


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
    """The OS failed a read, write or open: ``errno``, ``strerror`` and
    ``filename`` as OSError has them (None where the library did not say)."""

    def __init__(self, message: str, code: int = 0, errno: int | None = None,
                 filename: str | None = None) -> None:
        super().__init__(message, code)
        self.errno = errno
        self.strerror = os.strerror(errno) if errno is not None else None
        self.filename = filename


class FileNotFoundIoError(IoError, FileNotFoundError):
    """An IoError for a file that does not exist (errno ENOENT)."""


class PermissionIoError(IoError, PermissionError):
    """An IoError for a file that may not be opened (errno EACCES or EPERM)."""


class OutOfBudgetError(LayerstreamError, MemoryError):
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


_IO_BY_ERRNO: dict[int, type[IoError]] = {
    _errno.ENOENT: FileNotFoundIoError,
    _errno.EACCES: PermissionIoError,
    _errno.EPERM: PermissionIoError,
}

# The library writes an errno into an IOError's message as "... (errno N)"
# (Status::FromErrno).
_ERRNO_IN_MESSAGE = re.compile(r"\(errno (\d+)\)")


def error_class(code: int) -> type[LayerstreamError]:
    """The exception class for a StatusCode value (LayerstreamError for an unknown one)."""
    return _BY_CODE.get(int(code), LayerstreamError)


def from_status(message: str, code: int, filename: str | None = None) -> LayerstreamError:
    """The exception for a library Status: its class by code (and, for an
    IoError, by the errno in the message), ``filename`` the file the call
    was about."""
    cls = error_class(code)
    if cls is not IoError:
        return cls(message, code)
    found = _ERRNO_IN_MESSAGE.search(message)
    err = int(found.group(1)) if found else None
    io_class = _IO_BY_ERRNO.get(err, IoError) if err is not None else IoError
    return io_class(message, code, err, filename)


__all__ = [
    "LayerstreamError",
    "InvalidArgumentError",
    "CorruptionError",
    "UnsupportedError",
    "NotFoundError",
    "IoError",
    "FileNotFoundIoError",
    "PermissionIoError",
    "OutOfBudgetError",
    "DeviceError",
    "CancelledError",
    "InternalError",
    "error_class",
    "from_status",
]
