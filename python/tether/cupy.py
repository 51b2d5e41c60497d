"""CuPy allocations from tether: ``cupy.cuda.set_allocator(tether.cupy.allocator(pool))``.

Importing this module needs CuPy and raises ImportError (naming the pip
package) without it; it changes nothing global. Nothing is installed until
you call :func:`enable` or hand :func:`allocator` to CuPy yourself.

Two paths, one behaviour. Where CuPy offers what a C-level hook needs (CuPy
>= 14.1: ``cupy.cuda.memory.CFunctionAllocator``, whose malloc may raise, and
its current-stream getter in ``cupy_backends.cuda.stream.__pyx_capi__``),
:func:`allocator` hands CuPy two C functions of the extension
(``_tether_py_cupy_malloc``/``_free``, python/src/tether_py.c): each allocation
is recorded in C, pointer -> (resource, size, stream). Elsewhere it is a Python
function, and each CuPy allocation is one :class:`tether.Buffer` owned by the
``cupy.cuda.UnownedMemory`` that CuPy holds for the array. Either way the
memory is ordered on CuPy's current stream at allocation, and when CuPy drops
it, it frees into the resource it came from, on the stream it was allocated
on - whatever is current by then.
"""

from __future__ import annotations

import ctypes
import importlib
import re
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

__all__ = ["allocator", "enable", "disable", "c_level_reason"]

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

# The first CuPy whose CFunctionAllocator lets malloc raise: cupy/cuda/memory.pyx declares
# `ctypedef void*(*malloc_func_type)(void*, size_t, int) except +` and
# `cdef intptr_t _call_malloc(...) except *`. (The cupy-cuda13x 14.2.0 wheel, on the GPU
# machine, still does not check there: the exception then surfaces as CPython's SystemError
# around it, which _c_allocator's function unwraps; either way CuPy keeps ptr 0 and frees
# nothing.) Before (<= 14.0.1) the source had no exception clause at all (built with
# legacy_implicit_noexcept), and the C path is not verified there: the Python hook is used.
_C_LEVEL_MIN_VERSION = (14, 1)
# CuPy's stream getters (cupy_backends/cuda/stream.pxd), by preference, with the C
# signature Cython writes as each capsule's name. Any other name: not the function we
# know, so no C-level path.
_STREAM_GETTERS = (("get_stream_ptr", b"intptr_t (int)", 1),
                   ("get_current_stream_ptr", b"intptr_t (void)", 0))


def _c_level_support() -> tuple[int, int] | str:
    """``(address of CuPy's stream getter, 1 if it takes the device else 0)`` when this
    CuPy can run the C-level hook safely, else the reason why not (a str)."""
    m = re.match(r"(\d+)\.(\d+)", getattr(_cupy, "__version__", ""))
    if m is None or (int(m.group(1)), int(m.group(2))) < _C_LEVEL_MIN_VERSION:
        return (f"CuPy {getattr(_cupy, '__version__', '?')} does not check for errors after a "
                f"CFunctionAllocator malloc (needs >= {'.'.join(map(str, _C_LEVEL_MIN_VERSION))})")
    if not hasattr(getattr(_cupy_cuda, "memory", None), "CFunctionAllocator"):
        return "cupy.cuda.memory has no CFunctionAllocator"
    try:
        capi = importlib.import_module("cupy_backends.cuda.stream").__pyx_capi__
    except (ImportError, AttributeError):
        return "cupy_backends.cuda.stream has no __pyx_capi__ (CuPy's Cython C API)"
    # Function objects of our own: ctypes.pythonapi.X is shared, its argtypes are not ours to set.
    api = ctypes.pythonapi
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", api))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", api))
    found = []
    for name, signature, takes_device in _STREAM_GETTERS:
        capsule = capi.get(name) if isinstance(capi, dict) else None
        if capsule is None or type(capsule).__name__ != "PyCapsule":
            continue
        actual = get_name(capsule)
        found.append(f"{name}: {actual!r}")
        if actual == signature:
            address = get_pointer(capsule, signature)
            if address:
                return int(address), takes_device
    return ("no stream getter of a known signature in cupy_backends.cuda.stream.__pyx_capi__ "
            f"({', '.join(found) or 'none found'})")


_c_support: tuple[int, int] | str | None = None  # _c_level_support(), computed once


def _c_level() -> tuple[int, int] | str:
    global _c_support
    if _c_support is None:
        _c_support = _c_level_support()
    return _c_support


def c_level_reason() -> str | None:
    """None when :func:`allocator` uses the C-level hook with this CuPy, else why it
    falls back to the Python hook (e.g. CuPy older than 14.1)."""
    support = _c_level()
    return support if isinstance(support, str) else None


_C_MALLOC = int(ffi.cast("intptr_t", ffi.addressof(lib, "_tether_py_cupy_malloc")))
_C_FREE = int(ffi.cast("intptr_t", ffi.addressof(lib, "_tether_py_cupy_free")))


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

    With CuPy >= 14.1 it is a C-level hook (:func:`c_level_reason` says which
    path is taken): a Python function that calls the ``malloc`` of a
    ``cupy.cuda.memory.CFunctionAllocator`` over tether's C functions;
    otherwise a Python function that makes a tether Buffer. Both
    carry the attributes ``resource`` (the allocator's own reference, None for
    the current one) and raise the same errors: the tether exception for a
    failed allocation (:class:`tether.OutOfMemoryError` is a MemoryError) and
    ValueError when the resource holds memory of one device and CuPy's current
    device is another.
    """
    own = own_reference(resource)  # for as long as the allocator lives
    support = _c_level()
    if isinstance(support, str):
        return _python_allocator(own)
    return _c_allocator(own, *support)


def _device_only(own: Resource | None) -> int:
    """The device a resource of pure device memory serves, else -1 (any)."""
    if own is not None and own._device_accessible and not own._host_accessible:
        return int(own._device)
    return -1


class _HookOwner:
    """The ``owner`` CuPy's CFunctionAllocator keeps: deletes the C hook when the allocator
    dies (allocations still out keep what they need in C)."""

    __slots__ = ("hook", "__weakref__")

    def __init__(self, hook: Any) -> None:
        self.hook = ffi.gc(hook, lib._tether_py_cupy_hook_delete)


def _c_allocator(own: Resource | None, get_stream: int, takes_device: int) -> _Allocator:
    """The C-level hook: CuPy's CFunctionAllocator over _tether_py_cupy_malloc/_free."""
    hook = lib._tether_py_cupy_hook_new(_NULL if own is None else own._h, _device_only(own),
                                        ffi.cast("void*", get_stream), takes_device)
    if hook == _NULL:
        raise error_for(_last_status())
    owner = _HookOwner(hook)
    param = int(ffi.cast("intptr_t", hook))
    c_alloc = _cupy_cuda.memory.CFunctionAllocator(param, _C_MALLOC, _C_FREE, owner)
    malloc = c_alloc.malloc

    def tether_cupy_malloc(size: int) -> Any:
        try:
            return malloc(size)
        except SystemError as e:
            # The C malloc failed: it set the tether exception and returned NULL. CuPy's source
            # declares that call `except *`, but the CuPy 14.2.0 wheel does not check it there:
            # CFunctionAllocatorMemory(...) then returns with the exception set, which CPython
            # turns into SystemError("... returned a result with an exception set") caused by
            # ours (the memory object's ptr stays 0: nothing is freed). Raise ours.
            cause = e.__cause__
            if cause is None or "returned a result with an exception set" not in str(e):
                raise
            raise cause from None

    fn = cast(_Allocator, tether_cupy_malloc)
    fn.resource = own
    fn._tether_allocator = True
    # CuPy's bound CFunctionAllocator.malloc without the function above (private: for
    # benchmarks/gpu/bench_hooks.py's "direct" row, which times what that function costs)
    fn._cupy_malloc = malloc  # type: ignore[attr-defined]
    return fn


def _python_allocator(own: Resource | None) -> _Allocator:
    """The Python hook: one tether Buffer per allocation, owned by an UnownedMemory."""
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
