"""CallbackResource: a memory resource written in Python."""

from __future__ import annotations

from typing import Callable

from . import _callbacks, _kinds
from ._convert import HOST, DeviceLike, bool_value, device_value
from ._errors import check
from ._ffi import ffi, lib
from ._resources import Resource, create, register


class _Functions:
    __slots__ = ("allocate", "deallocate")

    def __init__(self, allocate: Callable[[int, int, int], int], deallocate: Callable[[int, int, int, int], None]):
        self.allocate = allocate
        self.deallocate = deallocate


@register(lib.TETHER_RESOURCE_KIND_CALLBACK)
class CallbackResource(Resource):
    """A resource whose allocate/deallocate are Python callables (``tether_callback_resource_create``).

    * ``allocate(size, alignment, stream) -> int`` returns the address of at
      least ``size`` bytes (never 0) aligned to ``alignment`` (a power of two,
      never 0); ``stream`` is the stream as an int (0: default). Raise
      ``MemoryError`` when there is no memory (pools over the resource then try
      to recover, and callers get :py:exc:`tether.OutOfMemoryError`).
    * ``deallocate(ptr, size, alignment, stream)`` gives back an address from
      ``allocate``; raising refuses the free (the allocation stays live).
    * ``device_accessible``, ``host_accessible``, ``device`` say what the memory
      is (tether trusts them): by default host memory.

    The resource can be pooled, adapted, installed as the current resource and
    used from C and C++ like any other. It keeps the callables alive until the
    C resource is destroyed (after its last user and last allocation are gone).
    Frees are checked against what ``allocate`` handed out, so ``deallocate`` is
    only called with live allocations and their own size and alignment.

    The callables run on whichever thread allocates or frees - threads Python
    did not start included - and may run concurrently; they hold the GIL while
    they run. An exception in them becomes the status of the failing call
    (MemoryError: OutOfMemoryError; a TetherError: its code; ValueError:
    InvalidArgumentError; others: TetherError), with the exception's text in
    the message, and is reported through ``sys.unraisablehook`` (except
    ``MemoryError`` from ``allocate``). While the interpreter exits, calls
    through the resource fail with TETHER_ERROR_SHUTTING_DOWN instead of
    entering Python. They must not use a resource
    built over this one (a pool may call them with its lock held).
    """

    __slots__ = ()

    def __init__(self, allocate: Callable[[int, int, int], int], deallocate: Callable[[int, int, int, int], None], *,
                 device_accessible: bool = _kinds.CALLBACK_DEVICE_ACCESSIBLE,
                 host_accessible: bool = _kinds.CALLBACK_HOST_ACCESSIBLE, device: DeviceLike = HOST) -> None:
        if not callable(allocate):
            raise TypeError(f"allocate must be callable, not {type(allocate).__name__}")
        if not callable(deallocate):
            raise TypeError(f"deallocate must be callable, not {type(deallocate).__name__}")
        vtable = ffi.new("tether_callback_vtable_t*")
        check(lib.tether_callback_vtable_init(vtable, ffi.sizeof("tether_callback_vtable_t")))
        vtable.allocate = _callbacks.ALLOCATE
        vtable.deallocate = _callbacks.DEALLOCATE
        vtable.destroy = _callbacks.DESTROY
        opts = ffi.new("tether_callback_options_t*")
        check(lib.tether_callback_options_init(opts, ffi.sizeof("tether_callback_options_t")))
        opts.device = device_value(device)
        opts.device_accessible = bool_value(device_accessible, "device_accessible")
        opts.host_accessible = bool_value(host_accessible, "host_accessible")
        context = _callbacks.register(_Functions(allocate, deallocate))
        try:
            self._init_from(create(lib.tether_callback_resource_create, vtable, context, opts))
        except BaseException:
            _callbacks.unregister(context)  # on failure the C side never calls destroy
            raise
