"""Numba (numba-cuda) device allocations from tether: an External Memory Management plugin.

Two ways in, both before Numba's first CUDA use in the process (Numba picks
its memory manager when it creates a device's context):

* environment: ``NUMBA_CUDA_MEMORY_MANAGER=tether.numba`` (this module's
  ``_numba_memory_manager`` attribute is the plugin class);
* code: ``tether.numba.enable()`` (``numba.cuda.set_memory_manager``).

Which resource: by default the current resource of the context's device,
looked up in tether's table at each allocation; :func:`use_resource` pins one
resource for every Numba allocation instead (Numba creates the plugin itself,
so the choice is module state). Importing this module needs Numba with its
CUDA target and raises ImportError (naming the pip package) without it; it
changes nothing global.
"""

from __future__ import annotations

import contextlib
import ctypes
import weakref
from typing import Any, Iterator

try:
    import numba.cuda as _numba_cuda
    from numba.cuda import HostOnlyCUDAMemoryManager, MemoryPointer
    from numba.cuda.cudadrv import driver as _numba_driver
except ImportError as e:  # pragma: no cover - exercised by the CPU tests with Numba hidden
    from ._hooks import missing_library
    raise missing_library("tether.numba", "Numba's CUDA target", "numba",
                          "pip install numba-cuda[cu13] (or numba-cuda[cu12])", e) from e

from ._buffer import Buffer
from ._errors import closed_error, error_for
from ._ffi import ffi, lib
from ._hooks import own_reference
from ._resources import Resource

__all__ = ["TetherMemoryManager", "use_resource", "enable"]

_create = lib._tether_py_buffer_create
_ptr_of = lib._tether_py_buffer_ptr
_last_status = lib._tether_py_last_status

# The resource use_resource() set (our own reference), or None: the current one.
_resource: Resource | None = None


def _device_pointer_factory() -> Any:
    """How this Numba wants device pointers: a cuda-python ``CUdeviceptr`` (numba-cuda,
    and Numba's NVIDIA-binding mode), or a ctypes integer (older Numba's ctypes binding)."""
    if getattr(_numba_driver, "USE_NV_BINDING", True):
        binding: Any = getattr(_numba_driver, "binding", None)
        if binding is None:  # pragma: no cover - every NV-binding Numba has driver.binding
            from cuda.bindings import driver as nv_driver
            binding = nv_driver
        return binding.CUdeviceptr
    return ctypes.c_uint64


_device_pointer = _device_pointer_factory()


def use_resource(resource: Resource | None = None) -> Resource | None:
    """Make every Numba device allocation come from ``resource``; None goes back
    to the default, the current resource of the context's device at each allocation.

    Takes effect for the next allocation (in every context); memory already
    allocated keeps freeing into the resource it came from. The plugin keeps its
    own reference to ``resource``. Returns the previous choice (a wrapper the
    caller now owns) or None.
    """
    global _resource
    previous, _resource = _resource, own_reference(resource)
    return previous


# Numba ships no type information, so its base class is Any to mypy.
class TetherMemoryManager(HostOnlyCUDAMemoryManager):  # type: ignore[misc]
    """Numba EMM plugin (interface version 1): device memory from tether, pinned and
    mapped host memory from Numba itself (``HostOnlyCUDAMemoryManager``).

    Numba creates one instance per context (``TetherMemoryManager(context=ctx)``);
    users do not.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The tether Buffers of this context that Numba still holds (weakly: each
        # MemoryPointer's finalizer owns its Buffer); reset() frees what is left.
        self._buffers: weakref.WeakSet[Buffer] = weakref.WeakSet()

    def initialize(self) -> None:
        """Nothing to prepare: tether resources need no per-context set-up."""

    def memalloc(self, size: int) -> Any:
        """Allocate ``size`` bytes of device memory from tether, ordered on the
        default stream (Numba's interface passes no stream).

        The returned ``MemoryPointer``'s finalizer closes the tether Buffer, which
        frees into the resource it came from.
        """
        size = int(size)  # Numba may compute it as a numpy integer; cffi wants an int
        ctx = self.context
        dev = ctx.device.id
        res = _resource
        if res is None:
            h = _create(ffi.NULL, dev, size, 0)  # the current resource of dev, now
        else:
            rh = res._h
            if rh is None:  # pragma: no cover - use_resource() holds its own reference
                raise closed_error(res)
            if res._device >= 0 and res._device != dev and not res._host_accessible:
                raise ValueError(f"tether.numba.use_resource() gave a resource of device {res._device}, "
                                 f"but Numba allocates for device {dev}")
            h = _create(rh, dev, size, 0)
        if not h:
            raise error_for(_last_status())
        buf = Buffer.__new__(Buffer)
        buf._h = h
        self._buffers.add(buf)
        return MemoryPointer(weakref.proxy(ctx), _device_pointer(_ptr_of(h)), size, finalizer=buf.close)

    def get_memory_info(self) -> Any:
        """``(free, total)`` bytes of the context's device, from the driver (cuMemGetInfo).

        Memory that a tether pool holds but has not handed out counts as used:
        the driver cannot see inside the pool.
        """
        from numba.cuda.cudadrv.driver import MemoryInfo, driver
        if getattr(_numba_driver, "USE_NV_BINDING", True):
            free, total = driver.cuMemGetInfo()
        else:  # pragma: no cover - older Numba's ctypes binding
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            driver.cuMemGetInfo(ctypes.byref(free), ctypes.byref(total))
            free, total = free.value, total.value
        return MemoryInfo(free=int(free), total=int(total))

    def get_ipc_handle(self, memory: Any) -> Any:
        """Not supported: tether's pools carve allocations out of larger chunks and
        tether exports no CUDA IPC handles, so there is nothing another process could
        open. Raises NotImplementedError. (Use an IPC-capable allocator for memory
        you share between processes.)"""
        raise NotImplementedError("tether.numba: CUDA IPC handles are not supported for memory from tether "
                                  "(tether pools are not IPC-capable); allocate memory to be shared between "
                                  "processes with an IPC-capable allocator")

    def reset(self) -> None:
        """Free everything this context allocated (Numba's contract: it resets a
        context when closing it): pinned/mapped host memory through Numba, device
        memory by closing the outstanding tether Buffers. Arrays still alive then
        must not be used. The resource is not trimmed - it may be shared with other
        libraries; call ``resource.trim()`` yourself to give memory back upstream."""
        super().reset()
        for buf in list(self._buffers):
            buf.close()

    @contextlib.contextmanager
    def defer_cleanup(self) -> Iterator[None]:
        """A context manager: while active, Numba defers freeing its own host
        allocations. tether frees device memory as soon as Numba drops it, which is
        safe because the free is stream-ordered."""
        with super().defer_cleanup():
            yield

    @property
    def interface_version(self) -> int:
        """The EMM plugin interface version implemented: 1."""
        return 1


def enable(resource: Resource | None = None) -> None:
    """Install :class:`TetherMemoryManager` as Numba's memory manager
    (``numba.cuda.set_memory_manager``) and choose its resource (see
    :func:`use_resource`; None: the current resource at each allocation).

    Must run before Numba creates a CUDA context in this process; raises
    RuntimeError if a context already exists with another memory manager
    (the setting would silently not apply to it).
    """
    use_resource(resource)
    _numba_cuda.set_memory_manager(TetherMemoryManager)
    drv = getattr(_numba_driver, "driver", None)
    devices = getattr(drv, "__dict__", {}).get("devices", {})  # no driver call, no initialisation
    for device in list(devices.values()):
        ctx = getattr(device, "primary_context", None)
        if ctx is not None and not isinstance(getattr(ctx, "memory_manager", None), TetherMemoryManager):
            raise RuntimeError(f"Numba already created the CUDA context of device {device.id} with another "
                               "memory manager; call tether.numba.enable() before Numba's first CUDA use, "
                               "or set NUMBA_CUDA_MEMORY_MANAGER=tether.numba in the environment")


# NUMBA_CUDA_MEMORY_MANAGER=tether.numba: Numba imports this module and uses this class.
_numba_memory_manager = TetherMemoryManager
