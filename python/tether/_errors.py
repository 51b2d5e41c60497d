"""Status codes -> exceptions: the one place where a tether_status_t is checked.

Every exception derives from TetherError *and* from the builtin a Python user
would catch for that failure (MemoryError, ValueError, ...), keeps the status
in ``.code`` / ``.status_name`` and carries the library's message for the
calling thread (tether_last_error_message(), which names the C function).

The status -> class table is derived from the library's constants: every
``TETHER_ERROR_<NAME>`` of the cdef maps to the class ``<Name>Error`` (CamelCase
of NAME). The classes below are written out for their docstrings and builtin
bases; a status code the headers gain later without a class here still gets
its own TetherError subclass (made at import), never the bare base class.
"""

from __future__ import annotations

from typing import Any

from ._ffi import ffi, lib


class TetherError(Exception):
    """A tether call failed. ``code`` is the tether_status_t value, ``status_name`` its name."""

    code: int = lib.TETHER_ERROR_INTERNAL

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def status_name(self) -> str:
        """The enumerator's name, e.g. ``"TETHER_ERROR_OUT_OF_MEMORY"``."""
        return str(ffi.string(lib.tether_status_name(self.code)).decode("ascii", "replace"))

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (multiprocessing, pytest-xdist)
        return (type(self), (str(self), self.code))


class OutOfMemoryError(TetherError, MemoryError):
    """The resource (or its upstream) could not provide the memory."""
    code = lib.TETHER_ERROR_OUT_OF_MEMORY


class InvalidArgumentError(TetherError, ValueError):
    """An argument is out of range: bad alignment, unknown device, a foreign pointer..."""
    code = lib.TETHER_ERROR_INVALID_ARGUMENT


class PinnedError(InvalidArgumentError, BufferError):
    """A buffer's memory is still exported (a memoryview, numpy array, DLPack tensor...),
    so it cannot be resized: the C buffer is pinned (``tether_buffer_pin``)."""
    code = lib.TETHER_ERROR_INVALID_ARGUMENT


class InvalidHandleError(TetherError, ValueError):
    """The object was closed, or the handle is stale, forged or of another type."""
    code = lib.TETHER_ERROR_INVALID_HANDLE


class NotSupportedError(TetherError, NotImplementedError):
    """This resource, build or platform does not offer the operation."""
    code = lib.TETHER_ERROR_NOT_SUPPORTED


class NoDeviceError(TetherError, RuntimeError):
    """No CUDA driver, no device, or a driver too old for tether."""
    code = lib.TETHER_ERROR_NO_DEVICE


class CudaError(TetherError, RuntimeError):
    """A CUDA driver call failed; the message names the call and the CUresult."""
    code = lib.TETHER_ERROR_CUDA


class LockedError(TetherError, RuntimeError):
    """The current-resource slot was locked by the application."""
    code = lib.TETHER_ERROR_LOCKED


class VersionMismatchError(TetherError, RuntimeError):
    """An options struct is smaller than the oldest layout the library accepts."""
    code = lib.TETHER_ERROR_VERSION_MISMATCH


class ShuttingDownError(TetherError, RuntimeError):
    """The process is exiting; the library refused the call rather than risk a dead CUDA context."""
    code = lib.TETHER_ERROR_SHUTTING_DOWN


class InternalError(TetherError, RuntimeError):
    """A bug in tether (an invariant failed). Please report it."""
    code = lib.TETHER_ERROR_INTERNAL


def status_constants() -> dict[str, int]:
    """Every ``TETHER_ERROR_*`` constant of the cdef: name -> value."""
    return {name: getattr(lib, name) for name in dir(lib) if name.startswith("TETHER_ERROR_")}


def class_name(status_constant: str) -> str:
    """``TETHER_ERROR_OUT_OF_MEMORY`` -> ``OutOfMemoryError``."""
    words = status_constant[len("TETHER_ERROR_"):].split("_")
    return "".join(w.capitalize() for w in words) + "Error"


def _by_code() -> dict[int, type[TetherError]]:
    table: dict[int, type[TetherError]] = {}
    for name, value in status_constants().items():
        cls = globals().get(class_name(name))
        if not (isinstance(cls, type) and issubclass(cls, TetherError) and cls.code == value):
            # A status code newer than this module: its own class, named like the others.
            cls = type(class_name(name), (TetherError,),
                       {"code": value, "__module__": __name__,
                        "__doc__": f"The status {name} (no documented class of its own yet)."})
            globals()[cls.__name__] = cls
        table[value] = cls
    return table


_BY_CODE = _by_code()


def error_for(status: int, message: str | None = None) -> TetherError:
    """The exception for a failed status; the message defaults to the thread's last one."""
    if message is None:
        message = ffi.string(lib.tether_last_error_message()).decode("utf-8", "replace")
        if not message:
            message = ffi.string(lib.tether_status_name(status)).decode("ascii", "replace")
    return _BY_CODE.get(status, TetherError)(message, status)


def check(status: int) -> None:
    """Raise the matching TetherError subclass unless status is TETHER_OK."""
    if status:
        raise error_for(status)


def stale_handle_error(function: str, handle: object, kind: str) -> InvalidHandleError:
    """The error for a failed retain/release: those C calls leave the thread's
    message alone (it may be any earlier call's), so the message is made here."""
    value = int(ffi.cast("uintptr_t", handle))
    what = "NULL" if value == 0 else f"0x{value:x}"
    return InvalidHandleError(f"{function}: {what} is not a live {kind} handle (released, forged, "
                              "or of another type)", lib.TETHER_ERROR_INVALID_HANDLE)


def closed_error(obj: object) -> InvalidHandleError:
    """The error for using an object after close()."""
    return InvalidHandleError(f"{type(obj).__name__} is closed", lib.TETHER_ERROR_INVALID_HANDLE)


__all__ = ["TetherError", "OutOfMemoryError", "InvalidArgumentError", "PinnedError", "InvalidHandleError",
           "NotSupportedError", "NoDeviceError", "CudaError", "LockedError", "VersionMismatchError",
           "ShuttingDownError", "InternalError", "check", "error_for"]
