"""Status codes -> exceptions: the one place where a tether_status_t is checked.

Every exception derives from TetherError *and* from the builtin a Python user
would catch for that failure (MemoryError, ValueError, ...), keeps the status
in ``.code`` / ``.status_name`` and carries the library's message for the
calling thread (tether_last_error_message(), which names the C function).
"""

from __future__ import annotations

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
        return ffi.string(lib.tether_status_name(self.code)).decode("ascii", "replace")

    def __reduce__(self):  # picklable (multiprocessing, pytest-xdist)
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


_BY_CODE = {cls.code: cls for cls in (OutOfMemoryError, InvalidArgumentError, InvalidHandleError,
                                      NotSupportedError, NoDeviceError, CudaError, LockedError)}


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
           "NotSupportedError", "NoDeviceError", "CudaError", "LockedError", "check", "error_for"]
