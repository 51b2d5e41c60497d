"""FailureCallbackAdaptor: ask a Python callable what to do on out-of-memory."""

from __future__ import annotations

from typing import Callable

from . import _callbacks
from ._errors import check
from ._ffi import ffi, lib
from ._resources import Resource, UpstreamAdaptor, create, register


@register(lib.TETHER_RESOURCE_KIND_FAILURE_CALLBACK)
class FailureCallbackAdaptor(UpstreamAdaptor):
    """Forwards to ``upstream`` (kept alive); when the upstream is out of
    memory, calls ``callback(size)`` and retries while it returns True
    (``tether_failure_callback_adaptor_create``).

    * ``upstream`` - the resource to forward to. RMM spelling: ``upstream_mr``.
    * ``callback`` - called with the size of the failed allocation; it may free
      memory (spill: give back buffers it holds, drop caches) and return True to
      try again, or return False to let the allocation fail with
      :py:exc:`tether.OutOfMemoryError`. Returning True without freeing anything
      retries forever.

    The callback runs on the allocating thread, possibly several at once, with
    no lock of the adaptor held: it may free memory of this adaptor. An
    exception in it is reported through ``sys.unraisablehook``, and the
    allocation fails with OutOfMemoryError (no retry).
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, callback: Callable[[int], bool] | None = None, *,
                 upstream_mr: Resource | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        if callback is None or not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        opts = ffi.new("tether_failure_callback_options_t*")
        check(lib.tether_failure_callback_options_init(opts, ffi.sizeof("tether_failure_callback_options_t")))
        context = _callbacks.register(callback)
        opts.callback = _callbacks.FAILURE
        opts.user = context
        opts.destroy = _callbacks.DESTROY
        try:
            self._init_from(create(lib.tether_failure_callback_adaptor_create, up, opts))
        except BaseException:
            _callbacks.unregister(context)  # on failure the C side never calls destroy
            raise
