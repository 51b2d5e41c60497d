"""CUDA driver queries and the CUDA resources whose arguments say more than a device and sizes
(thin wrappers of tether/cuda.h); CudaResource, SystemResource, ... are in _kinds_generated.py.

tether loads the CUDA driver at first use; without a driver or device every
function here raises NoDeviceError with the reason (cuda_available() returns
False instead), and host-side resources keep working.
"""

from __future__ import annotations

from . import _kinds
from ._convert import DeviceLike, Size, StreamLike, device_value, percent_device, pool_value, stream_value
from ._errors import TetherError, check
from ._ffi import ffi, lib
from ._resources import Resource, create, new_options, register


def cuda_device_count() -> int:
    """Number of CUDA devices. Raises NoDeviceError if there is no usable driver."""
    out = ffi.new("int*")
    check(lib.tether_cuda_get_device_count(out))
    return int(out[0])


def cuda_available() -> bool:
    """True if a CUDA driver and at least one device are usable. Never raises."""
    try:
        return cuda_device_count() > 0
    except TetherError:
        return False


def cuda_device_name(device: DeviceLike = 0) -> str:
    """The name of ``device`` as the driver reports it, e.g. ``"NVIDIA H200"``.

    Raises NoDeviceError without a usable driver, InvalidArgumentError for a bad id.
    """
    d = device_value(device)
    needed = ffi.new("size_t*")
    check(lib.tether_cuda_get_device_name(d, ffi.NULL, 0, needed))
    buf = ffi.new("char[]", int(needed[0]))
    check(lib.tether_cuda_get_device_name(d, buf, len(buf), needed))
    name: str = ffi.string(buf).decode("utf-8", "replace")
    return name


def cuda_driver_version() -> int:
    """The driver's CUDA version, e.g. 13000 for 13.0. Raises NoDeviceError without a driver."""
    out = ffi.new("int*")
    check(lib.tether_cuda_get_driver_version(out))
    return int(out[0])


def current_device() -> int:
    """The calling thread's current CUDA device (its current context's device, else 0)."""
    out = ffi.new("int*")
    check(lib.tether_cuda_get_current_device(out))
    return int(out[0])


def stream_synchronize(device: DeviceLike, stream: StreamLike) -> None:
    """Wait until all work on ``stream`` of ``device`` is done."""
    check(lib.tether_cuda_stream_synchronize(device_value(device), stream_value(stream)))


def device_or_current(device: DeviceLike | None) -> int:
    """A device argument's id; None: the current device (the generated classes' default too)."""
    return current_device() if device is None else device_value(device)


_IPC = {None: lib.TETHER_IPC_HANDLE_NONE, "none": lib.TETHER_IPC_HANDLE_NONE,
        "posix_fd": lib.TETHER_IPC_HANDLE_POSIX_FD, "posix_file_descriptor": lib.TETHER_IPC_HANDLE_POSIX_FD}


@register(lib.TETHER_RESOURCE_KIND_ASYNC)
class AsyncResource(Resource):
    """Stream-ordered device memory from a CUDA memory pool (cuMemAllocFromPoolAsync).

    Arguments (RMM's CudaAsyncMemoryResource spelling; sizes are ints or "1 GiB"):
    ``initial_pool_size`` reserved at creation, ``release_threshold`` kept when
    idle, ``maximum_pool_size`` upper bound (None: no limit), ``use_default_pool``
    to allocate from the device's default pool instead of an owned one, and
    ``ipc_handle_type`` None / "none" / "posix_fd" (or the TETHER_IPC_HANDLE_* int).
    """

    __slots__ = ()

    def __init__(self, device: DeviceLike | None = None, initial_pool_size: Size | None = None,
                 release_threshold: Size | None = None, maximum_pool_size: Size | None = None,
                 use_default_pool: bool = _kinds.ASYNC_USE_DEFAULT_POOL,
                 ipc_handle_type: str | int | None = None) -> None:
        opts = new_options("tether_async_options_t", lib.tether_async_options_init, percent_device(device),
                           initial_pool_size=initial_pool_size, release_threshold=release_threshold,
                           maximum_pool_size=maximum_pool_size)
        opts.use_default_pool = 1 if use_default_pool else 0
        if isinstance(ipc_handle_type, int) and not isinstance(ipc_handle_type, bool):
            if ipc_handle_type not in _IPC.values():
                raise ValueError(f"ipc_handle_type {ipc_handle_type} is not a TETHER_IPC_HANDLE_* value")
            opts.ipc_handle_type = ipc_handle_type
        elif ipc_handle_type is not None and not isinstance(ipc_handle_type, str):
            raise TypeError(f"ipc_handle_type must be None, a string ('none', 'posix_fd') or a "
                            f"TETHER_IPC_HANDLE_* int, not {type(ipc_handle_type).__name__}")
        else:
            key = ipc_handle_type.lower() if isinstance(ipc_handle_type, str) else ipc_handle_type
            if key not in _IPC:
                raise ValueError(f"ipc_handle_type must be None, 'none' or 'posix_fd', not {ipc_handle_type!r}")
            opts.ipc_handle_type = _IPC[key]
        self._init_from(create(lib.tether_async_resource_create, device_or_current(device), opts))


@register(lib.TETHER_RESOURCE_KIND_ASYNC_VIEW)
class AsyncViewResource(Resource):
    """Stream-ordered device memory from a CUDA memory pool someone else owns (RMM's
    CudaAsyncViewMemoryResource), so tether, CuPy, PyTorch and cuda.core allocate from
    one pool.

    ``pool``: the pool's handle (``CUmemoryPool`` / ``cudaMemPool_t``) as an int (e.g.
    ``cupy.cuda.runtime.deviceGetMemPool(0)``), an object with a ``handle`` attribute
    (cuda.core's ``DeviceMemoryResource``) or a cuda.bindings handle; None: the
    device's current memory pool at creation (the default pool unless someone set
    another). The pool must be a live pool on ``device`` (None: the current device)
    and outlive this resource and its allocations; tether never destroys it.
    ``.spec`` names only the view of the current pool (``async_view(device=N)``).
    """

    __slots__ = ()

    def __init__(self, pool: object = None, device: DeviceLike | None = None) -> None:
        opts = new_options("tether_async_view_options_t", lib.tether_async_view_options_init)
        if pool is not None:
            opts.pool = ffi.cast("void *", pool_value(pool))
        self._init_from(create(lib.tether_async_view_resource_create, device_or_current(device), opts))
