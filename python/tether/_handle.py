"""The one base class of every Python object that owns a tether handle.

The object holds one reference (+1) to its handle (a cffi pointer in ``_h``)
and gives it back exactly once:

* ``close()`` gives it back now; a second ``close()`` does nothing;
* ``with obj:`` closes at the end of the block;
* otherwise ``__del__`` gives it back when the object is collected. The
  finalizer only calls the C release function (bound on the class, so it needs
  no module globals): it cannot raise and is safe in any order during
  interpreter shutdown, because dependents keep their dependencies alive
  inside the library.

Why ``__del__`` and not ``ffi.gc(handle, release)``: both call the same C
function, but ffi.gc wraps every handle in a second cdata object, which
costs about 100 ns per Buffer (see benchmarks/python/bench_buffer.py) -
Buffer construction is the hot path.

Using a closed object raises InvalidHandleError. Each Python object owns its
own reference: two wrappers of one handle (say, two calls of
get_current_resource()) are equal (``==``) but not the same object, and
closing one never affects the other.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ._errors import check, closed_error
from ._ffi import ffi

_H = TypeVar("_H", bound="Handle")


class Handle:
    """Base class: an owned reference to a tether handle (see the module docstring)."""

    __slots__ = ("_h", "__weakref__")

    #: The owned C handle (a cffi pointer), None once closed.
    _h: Any

    #: The C function that drops one reference (tether_resource_release / tether_buffer_release).
    _release: Callable[[Any], Any]

    def close(self) -> None:
        """Give this object's reference back to the library. Idempotent and thread-safe.

        The one release path: ``__del__`` is this same function, and subclasses
        that hold more (Buffer's pin) drop it and then call ``Handle.close``.
        Reading and clearing ``_h`` run without a call in between, so the GIL
        cannot switch threads there: of two racing close() calls, one gets the
        handle and releases it, the other sees None.
        """
        try:
            h = self._h
        except AttributeError:  # __init__ failed before the handle existed
            return
        if h is not None:
            self._h = None
            self._release(h)

    __del__ = close

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return getattr(self, "_h", None) is None

    def _live(self) -> Any:
        """The cdata handle; raises InvalidHandleError if closed."""
        h = getattr(self, "_h", None)
        if h is None:
            raise closed_error(self)
        return h

    def _check(self, status: int) -> None:
        """The one status check of a method: raise for a failed status, and say
        "closed" (InvalidHandleError) when another thread closed this object
        during the call rather than report the library's stale-handle message."""
        if status:
            if getattr(self, "_h", None) is None:
                raise closed_error(self)
            check(status)

    @property
    def handle(self) -> int:
        """The C handle value (``tether_resource_t*`` / ``tether_buffer_t*``) as an int.

        Borrowed: valid while this object is open. Pass it to C code, which must
        call the matching ``*_retain()`` to keep it longer.
        """
        return int(ffi.cast("uintptr_t", self._live()))

    def __enter__(self: _H) -> _H:
        self._live()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle a {type(self).__name__}: it owns process-local memory")
