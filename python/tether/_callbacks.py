"""C calling Python: the registry of Python callables and the functions C calls.

A C object that calls back into Python (a CallbackResource's vtable, a
LoggingAdaptor's line sink, a FailureCallbackAdaptor's retry function) is given
a ``void*`` context that is only a key into this module's registry, never a
pointer to a Python object: a stale or forged context finds nothing instead of
crashing. The registry keeps the callables alive while the C object lives; the
C object's destroy function (``_tether_py_cb_destroy``) removes them, exactly
once, when the C object is destroyed - which may be long after the Python
wrapper was closed, since pools and adaptors keep their upstreams alive.

Threads: C calls these functions on whichever thread allocates, frees or logs
(any thread, several at once, including threads Python did not create); cffi
takes the GIL for each call. Shutdown: an atexit handler tells the C
trampolines (python/src/tether_py.c) to stop entering Python; from then on a
Python-backed allocate or deallocate fails with TETHER_ERROR_SHUTTING_DOWN, log
lines are dropped and failure callbacks decline to retry.

Exceptions never cross into C. A Python callback that raises becomes a status
(MemoryError: TETHER_ERROR_OUT_OF_MEMORY; a tether error: its own code;
ValueError: INVALID_ARGUMENT; anything else: INTERNAL) with the exception's text
as the reason in the caller's error message, and - except for MemoryError in an
allocate callback, the ordinary way to say "no memory" - it is reported through
``sys.unraisablehook``, as Python reports exceptions it cannot propagate.
"""

from __future__ import annotations

import atexit
import itertools
import threading
from typing import Any

from ._convert import address_value
from ._errors import TetherError
from ._ffi import ffi, lib

_registry: dict[int, Any] = {}
_keys = itertools.count(1)
_lock = threading.Lock()

# The C function pointers to put in vtables and option structs.
ALLOCATE = ffi.addressof(lib, "_tether_py_cb_allocate")
DEALLOCATE = ffi.addressof(lib, "_tether_py_cb_deallocate")
DESTROY = ffi.addressof(lib, "_tether_py_cb_destroy")
LOG = ffi.addressof(lib, "_tether_py_cb_log")
FAILURE = ffi.addressof(lib, "_tether_py_cb_failure")

_RAISED = 0x7FFF  # what a def_extern returns when its body raised (see tether_py_callbacks.h)


def register(value: Any) -> Any:
    """Keep ``value`` alive under a new key; return the key as a ``void*`` context."""
    with _lock:
        key = next(_keys)
        _registry[key] = value
    return ffi.cast("void*", key)


def unregister(context: Any) -> None:
    """Forget a context (what destroy does; also used when creation failed)."""
    with _lock:
        _registry.pop(int(ffi.cast("uintptr_t", context)), None)


def registered(context: Any) -> Any:
    """The value registered under ``context``; LookupError if there is none."""
    value = _registry.get(int(ffi.cast("uintptr_t", context)))
    if value is None:
        raise LookupError("tether: a callback was called with an unknown context (its object was destroyed)")
    return value


def live_callbacks() -> int:
    """How many C objects currently hold Python callables (for tests and leak checks)."""
    return len(_registry)


def status_of(exc: BaseException) -> int:
    """The tether status a Python exception stands for."""
    if isinstance(exc, TetherError):
        return exc.code
    if isinstance(exc, MemoryError):
        return int(lib.TETHER_ERROR_OUT_OF_MEMORY)
    if isinstance(exc, ValueError):
        return int(lib.TETHER_ERROR_INVALID_ARGUMENT)
    if isinstance(exc, NotImplementedError):
        return int(lib.TETHER_ERROR_NOT_SUPPORTED)
    return int(lib.TETHER_ERROR_INTERNAL)


def _fail(exc: BaseException, status: int | None = None) -> int:
    """Record ``exc`` as the failing callback's reason; return its status."""
    status = status_of(exc) if status is None else status
    text = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
    lib._tether_py_callback_failed(status, text)
    return status


@atexit.register
def _shutdown() -> None:
    lib._tether_py_callbacks_shutdown()


# ---- the functions C calls ------------------------------------------------------
# A body that raises is reported by cffi through sys.unraisablehook and returns
# `error`; the trampoline then returns the status _fail() recorded.

@ffi.def_extern(error=_RAISED)
def _tether_py_on_allocate(context, size, alignment, stream, out):  # type: ignore[no-untyped-def]
    try:
        fn = registered(context).allocate
        ptr = fn(size, alignment, stream)
        if ptr is None or (ptr == 0 and not isinstance(ptr, bool)):
            raise MemoryError(f"the allocate callback returned {ptr!r} for {size} bytes")
        # Checked before anything is handed out: cffi would wrap 2**64 + 4096 to 0x1000.
        what = f"the allocate callback {getattr(fn, '__qualname__', type(fn).__name__)}"
        out[0] = ffi.cast("void*", address_value(ptr, what))
        return lib.TETHER_OK
    except MemoryError as e:  # the ordinary "no memory": a status, not a report
        return _fail(e, lib.TETHER_ERROR_OUT_OF_MEMORY)
    except BaseException as e:
        _fail(e)
        raise


@ffi.def_extern(error=_RAISED)
def _tether_py_on_deallocate(context, ptr, size, alignment, stream):  # type: ignore[no-untyped-def]
    try:
        registered(context).deallocate(int(ffi.cast("uintptr_t", ptr)), size, alignment, stream)
        return lib.TETHER_OK
    except BaseException as e:
        _fail(e)
        raise


@ffi.def_extern()
def _tether_py_on_destroy(context):  # type: ignore[no-untyped-def]
    unregister(context)


@ffi.def_extern()
def _tether_py_on_log(line, length, user):  # type: ignore[no-untyped-def]
    # An exception here is reported by cffi; the allocation it logs goes on.
    registered(user)(ffi.unpack(line, length).decode("utf-8", "replace"))


@ffi.def_extern(error=0)
def _tether_py_on_failure(size, user):  # type: ignore[no-untyped-def]
    # An exception is reported by cffi and means "no retry" (error=0).
    return 1 if registered(user)(size) else 0
