"""tether.torch: PyTorch allocates its CUDA memory through tether.

PyTorch calls C functions exported by libtether (``tether/torch.h``) through
``torch.cuda.memory.CUDAPluggableAllocator``, so no allocation enters Python.
Every allocation frees into the resource it came from, never into whatever is
current when PyTorch frees it, and that resource stays alive while PyTorch
holds any of its memory.

Two ways to use it:

* ``tether.torch.enable(pool)`` replaces PyTorch's allocator for the whole
  process. PyTorch allows this once, before its first CUDA allocation.
* ``with torch.cuda.use_mem_pool(tether.torch.mem_pool(pool)):`` routes the
  allocations of that block only (PyTorch's caching allocator then takes
  segments from tether and caches blocks inside them).

``resource=None`` means the current resource of the device at each
allocation, as ``tether.get_current_resource(device)`` returns it on the
allocating thread (a thread's ``tether.using(...)`` block included). A
resource passed explicitly is kept alive for the rest of the process (PyTorch
never says when it stops using an allocator); at most
``TETHER_TORCH_BOUND_SLOTS`` (8) distinct resources can be bound per process.

Nothing here runs at ``import tether``; importing this module does not import
PyTorch until a function needs it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._errors import check
from ._ffi import ffi, lib, library_path
from ._resources import Resource, handle_of

__all__ = ["allocator", "enable", "mem_pool", "memory_stats", "stats", "TorchStats"]

_DEALLOCATE = "tether_torch_deallocate"

# The rest of PyTorch's allocator contract: (setter of CUDAPluggableAllocator.allocator(),
# the libtether function it gets, what it keeps). Signatures: tether/torch.h.
_CONTRACT = (
    ("set_record_stream_fn", "tether_torch_record_stream", "Tensor.record_stream"),
    ("set_reset_fn", "tether_torch_empty_cache", "torch.cuda.empty_cache"),
    ("set_memory_fraction_fn", "tether_torch_set_memory_fraction", "torch.cuda.set_per_process_memory_fraction"),
    ("set_begin_allocate_to_pool", "tether_torch_begin_allocate_to_pool", "CUDA graph memory pools"),
    ("set_end_allocate_to_pool_fn", "tether_torch_end_allocate_to_pool", "CUDA graph memory pools"),
    ("set_release_pool", "tether_torch_release_pool", "CUDA graph memory pools"),
)


class TorchStats(NamedTuple):
    """What the PyTorch entry points hold and have seen (process-wide)."""

    outstanding_count: int
    outstanding_bytes: int
    allocations: int
    failures: int
    unknown_frees: int
    unknown_records: int
    recorded_streams: int


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise ImportError("tether.torch needs PyTorch: pip install torch") from e
    return torch


def _function_name(resource: Resource | None, flags: int) -> str:
    """The libtether function PyTorch should call to allocate from ``resource``."""
    if resource is None and flags == 0:
        return "tether_torch_allocate"
    rh = ffi.NULL if resource is None else handle_of(resource)
    out = ffi.new("int*")
    check(lib.tether_torch_bind(rh, flags, out))
    return f"tether_torch_allocate_{out[0]}"


def _check_resource(resource: Any) -> None:
    if resource is not None and not isinstance(resource, Resource):
        raise TypeError(f"resource must be a tether resource or None, not {type(resource).__name__}")


def _pluggable(resource: Resource | None, flags: int) -> Any:
    _check_resource(resource)
    torch = _torch()
    return torch.cuda.memory.CUDAPluggableAllocator(library_path(), _function_name(resource, flags), _DEALLOCATE)


def _address(name: str) -> int:
    """The address of libtether's own ``name``: looked up in the library (ctypes' dlsym), not
    through ``ffi.addressof``, which gives cffi's C wrapper - a C frame that a C++ exception
    thrown to PyTorch (tether/torch.h, "Failures") could not unwind through."""
    import ctypes
    address = ctypes.cast(getattr(ctypes.CDLL(library_path()), name), ctypes.c_void_p).value
    if address is None:  # c_void_p reads NULL as None; a found symbol is never NULL
        raise OSError(f"libtether has no {name}")
    return address


def _register_contract(pluggable: Any, version: str, record_stream: bool) -> None:
    """Hand PyTorch's allocator object the rest of the contract (all setters checked first)."""
    target = pluggable.allocator()
    wanted = [c for c in _CONTRACT if record_stream or c[0] != "set_record_stream_fn"]
    missing = [(setter, what) for setter, _, what in wanted if not hasattr(target, setter)]
    if missing:
        names = ", ".join(f"{setter} ({what})" for setter, what in missing)
        raise RuntimeError(
            f"tether.torch: this PyTorch ({version}) has no CUDAPluggableAllocator setter {names}, which tether "
            f"needs to keep PyTorch's allocator contract; tether.torch is tested with PyTorch 2.11, whose "
            f"allocator object has every one of them")
    for setter, function, _ in wanted:
        getattr(target, setter)(_address(function))


def allocator(resource: Resource | None = None, *, _record_stream: bool = True) -> Any:
    """A ``torch.cuda.memory.CUDAPluggableAllocator`` that allocates from ``resource``.

    resource=None: the current resource of the device at each allocation.
    For ``torch.cuda.memory.change_current_allocator``; ``enable()`` does that
    with a clear error. A failed allocation raises ``RuntimeError`` whose
    message starts "tether: out of memory" (PyTorch's global allocator
    cannot be told of a failure any other way).

    The allocator also keeps the rest of PyTorch's contract:
    ``Tensor.record_stream``, ``torch.cuda.empty_cache``,
    ``torch.cuda.set_per_process_memory_fraction`` and CUDA graph pools
    (registered through the allocator object's setters; RuntimeError naming
    the missing setter and this PyTorch's version if one is absent).
    ``_record_stream=False`` leaves record_stream unregistered: for tests
    that show the race it prevents, never for real use.
    """
    _check_resource(resource)
    torch = _torch()
    pluggable = _pluggable(resource, 0)
    _register_contract(pluggable, getattr(torch, "__version__", "unknown"), _record_stream)
    return pluggable


def enable(resource: Resource | None = None, *, _record_stream: bool = True) -> None:
    """Make tether PyTorch's CUDA allocator for the rest of the process.

    Must run before PyTorch's first CUDA allocation: PyTorch lets a process
    choose its allocator once. Raises RuntimeError if PyTorch's allocator was
    already initialised (use ``mem_pool()`` for scoped use instead).
    """
    torch = _torch()
    alloc = allocator(resource, _record_stream=_record_stream)
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError(
            "tether.torch.enable: PyTorch's CUDA allocator is already initialised (a CUDA tensor was "
            "allocated, or enable() ran before); PyTorch allows choosing the allocator only once, before "
            "the first CUDA allocation. Call tether.torch.enable() earlier, or use "
            "torch.cuda.use_mem_pool(tether.torch.mem_pool(resource)) for scoped use") from e


def mem_pool(resource: Resource | None = None) -> Any:
    """A ``torch.cuda.MemPool`` whose segments come from ``resource``.

    Use it as ``with torch.cuda.use_mem_pool(tether.torch.mem_pool(pool)):``.
    No global swap; PyTorch's caching allocator caches blocks inside the
    segments it takes, so a tether statistics adaptor sees segment sizes, not
    tensor sizes. Out of memory raises ``torch.OutOfMemoryError`` (PyTorch
    first frees its cached blocks and retries). Needs PyTorch 2.5 or newer.
    """
    torch = _torch()
    if not hasattr(torch.cuda, "MemPool"):
        raise NotImplementedError(f"tether.torch.mem_pool needs torch.cuda.MemPool (PyTorch 2.5+), "
                                  f"this is PyTorch {torch.__version__}")
    if torch.cuda.memory.get_allocator_backend() == "pluggable":
        raise RuntimeError("tether.torch.mem_pool: PyTorch's global allocator is a pluggable one (enable() "
                           "or change_current_allocator ran), and PyTorch creates MemPools only with its own "
                           "caching allocator; use enable() or mem_pool() in a process, not both")
    alloc = _pluggable(resource, lib.TETHER_TORCH_NULL_ON_FAILURE)
    return torch.cuda.MemPool(alloc.allocator())


def stats() -> TorchStats:
    """Allocations the PyTorch entry points hold now and have made (every allocator above)."""
    out = ffi.new("tether_torch_stats_t*")
    out.struct_size = ffi.sizeof("tether_torch_stats_t")
    check(lib.tether_torch_get_stats(out))
    return TorchStats(out.outstanding_count, out.outstanding_bytes, out.allocations, out.failures,
                      out.unknown_frees, out.unknown_records, out.recorded_streams)


def memory_stats(device: Any = None) -> dict[str, int]:
    """The keys of ``torch.cuda.memory_stats(device)`` that tether knows, for the tether allocator.

    With ``enable()`` PyTorch's own ``torch.cuda.memory_stats`` raises (its
    pluggable allocator has no statistics). This returns, for what the PyTorch
    entry points allocated on ``device`` (an int, a ``torch.device``, None for
    PyTorch's current device, or ``tether.HOST``):
    ``allocated_bytes.all.current/peak``, ``reserved_bytes.all.current/peak``
    (allocated bytes plus the free memory of CUDA graph pools, the only memory
    tether keeps for PyTorch alone), ``allocation.all.current/peak``,
    ``num_ooms`` (the memory-fraction limit included) and
    ``num_alloc_retries`` (out-of-memory allocations retried after an
    empty_cache). The other keys describe the caching allocator's blocks,
    segments and size pools, which a tether stack does not have.
    """
    if device is None:
        index = _torch().cuda.current_device()
    elif isinstance(device, int):
        index = device
    elif getattr(device, "type", None) == "cuda":
        index = device.index if device.index is not None else _torch().cuda.current_device()
    else:
        raise TypeError(f"device must be an int, a CUDA torch.device, tether.HOST or None, not {device!r}")
    out = ffi.new("tether_torch_device_stats_t*")
    out.struct_size = ffi.sizeof("tether_torch_device_stats_t")
    check(lib.tether_torch_get_device_stats(index, out))
    return {
        "allocated_bytes.all.current": out.allocated_bytes,
        "allocated_bytes.all.peak": out.peak_allocated_bytes,
        "reserved_bytes.all.current": out.reserved_bytes,
        "reserved_bytes.all.peak": out.peak_reserved_bytes,
        "allocation.all.current": out.allocation_count,
        "allocation.all.peak": out.peak_allocation_count,
        "num_ooms": out.num_ooms,
        "num_alloc_retries": out.num_alloc_retries,
    }
