"""CuPy allocations from tether: ``cupy.cuda.set_allocator(tether.cupy.allocator(pool))``.

Importing this module needs CuPy and raises ImportError (naming the pip
package) without it; it changes nothing global. Nothing is installed until
you call :func:`enable` or hand :func:`allocator` to CuPy yourself.

Each CuPy allocation is one :class:`tether.Buffer`, owned by the
``cupy.cuda.UnownedMemory`` that CuPy holds for the array: when CuPy drops
the memory, the Buffer frees into the resource it came from, on the stream it
was allocated on - whatever is current by then.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

try:
    import cupy as _cupy
    import cupy.cuda as _cupy_cuda
except ImportError as e:  # pragma: no cover - exercised by the CPU tests with CuPy hidden
    from ._hooks import missing_library
    raise missing_library("tether.cupy", "CuPy", "cupy", "pip install cupy-cuda13x (or cupy-cuda12x for CUDA 12)", e) from e

from ._buffer import Buffer
from ._errors import error_for
from ._ffi import ffi, lib
from ._hooks import own_reference
from ._resources import Resource

__all__ = ["allocator", "enable", "disable"]

_create = lib._tether_py_buffer_create
_ptr_of = lib._tether_py_buffer_ptr
_last_status = lib._tether_py_last_status
_NULL = ffi.NULL

_get_device_id = getattr(_cupy_cuda, "get_device_id", None) or _cupy_cuda.runtime.getDevice
if int(_cupy.__version__.split(".")[0]) >= 13:
    _get_current_stream = _cupy_cuda.get_current_stream  # (device_id=-1): no second device query
else:  # pragma: no cover - CuPy 12 and older take no device_id
    def _get_current_stream(device_id: int, _get: Any = _cupy_cuda.get_current_stream) -> Any:
        return _get()

# The allocator CuPy used before the first enable(); disable() puts it back.
_saved_allocator: Any = None


class _Allocator(Protocol):
    """What allocator() returns: a CuPy allocator function with two attributes."""

    #: The tether resource it allocates from (its own reference), None for the current one.
    resource: Resource | None
    _tether_allocator: bool

    def __call__(self, size: int) -> Any: ...


def allocator(resource: Resource | None = None) -> _Allocator:
    """A CuPy allocator (``size -> cupy.cuda.MemoryPointer``) drawing from tether.

    resource: the tether resource to allocate from (the allocator keeps its own
    reference, so closing yours later does not affect it); None means the
    current resource of CuPy's current device, looked up in tether's table at
    each allocation (so ``tether.using(...)`` and ``set_current_resource()``
    take effect on the next allocation).

    Use it with ``cupy.cuda.set_allocator(...)`` or in a block with
    ``with cupy.cuda.using_allocator(...):``. Each allocation is ordered on
    CuPy's current stream of that moment and is freed on that same stream
    (see the module docs for what that means when an array moves to another
    stream). Size 0 works (a null pointer, no tether allocation is counted).
    """
    own = own_reference(resource)  # for as long as the allocator lives
    if own is None:
        rh = _NULL
        rdev = -1
        pure_device = False
    else:
        rh = own._h
        rdev = own._device
        pure_device = own._device_accessible and not own._host_accessible

    # The hot path: CuPy calls this for every allocation without a pool in
    # front, so every name it uses is a local or a closure cell, and the
    # tether Buffer is built directly from its handle (what Buffer() does,
    # minus the argument conversion: size is CuPy's size_t and the stream an int).
    get_device_id = _get_device_id
    get_current_stream = _get_current_stream
    UnownedMemory = _cupy_cuda.UnownedMemory
    MemoryPointer = _cupy_cuda.MemoryPointer
    new_buffer = Buffer.__new__
    create, ptr_of, last_status = _create, _ptr_of, _last_status

    def tether_cupy_malloc(size: int) -> Any:
        dev = get_device_id()
        if pure_device and dev != rdev:
            raise ValueError(f"the tether resource holds memory of device {rdev}, but CuPy's current "
                             f"device is {dev}; make one allocator per device")
        h = create(rh, dev, size, get_current_stream(dev).ptr)
        if not h:
            raise error_for(last_status())
        buf = new_buffer(Buffer)
        buf._h = h
        return MemoryPointer(UnownedMemory(ptr_of(h), size, buf, dev), 0)

    fn = cast(_Allocator, tether_cupy_malloc)
    fn.resource = own
    fn._tether_allocator = True
    return fn


def enable(resource: Resource | None = None) -> _Allocator:
    """Make tether CuPy's allocator for the whole process (``cupy.cuda.set_allocator``).

    resource: as in :func:`allocator` (None: the current resource at each
    allocation). Returns the new allocator. The allocator that was active
    before the first enable() (normally CuPy's default memory pool) is
    remembered for :func:`disable`. Raises ValueError inside a
    ``cupy.cuda.using_allocator`` block (CuPy refuses the change there).
    """
    global _saved_allocator
    previous = _cupy_cuda.get_allocator()
    fn = allocator(resource)
    _cupy_cuda.set_allocator(fn)
    if not getattr(previous, "_tether_allocator", False):
        _saved_allocator = previous
    return fn


def disable() -> None:
    """Give CuPy back the allocator it had before :func:`enable` (its default
    memory pool if enable() was never called). Memory allocated through tether
    stays valid and still frees into tether when CuPy drops it."""
    global _saved_allocator
    previous, _saved_allocator = _saved_allocator, None
    if previous is None:
        previous = _cupy.get_default_memory_pool().malloc
    _cupy_cuda.set_allocator(previous)
