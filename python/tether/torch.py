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

__all__ = ["allocator", "enable", "mem_pool", "stats", "TorchStats"]

_DEALLOCATE = "tether_torch_deallocate"


class TorchStats(NamedTuple):
    """What the PyTorch entry points hold and have seen (process-wide)."""

    outstanding_count: int
    outstanding_bytes: int
    allocations: int
    failures: int
    unknown_frees: int


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


def _pluggable(resource: Resource | None, flags: int) -> Any:
    if resource is not None and not isinstance(resource, Resource):
        raise TypeError(f"resource must be a tether resource or None, not {type(resource).__name__}")
    torch = _torch()
    return torch.cuda.memory.CUDAPluggableAllocator(library_path(), _function_name(resource, flags), _DEALLOCATE)


def allocator(resource: Resource | None = None) -> Any:
    """A ``torch.cuda.memory.CUDAPluggableAllocator`` that allocates from ``resource``.

    resource=None: the current resource of the device at each allocation.
    For ``torch.cuda.memory.change_current_allocator``; ``enable()`` does that
    with a clear error. A failed allocation raises ``RuntimeError`` whose
    message starts "tether: out of memory" (PyTorch's global allocator
    cannot be told of a failure any other way).
    """
    return _pluggable(resource, 0)


def enable(resource: Resource | None = None) -> None:
    """Make tether PyTorch's CUDA allocator for the rest of the process.

    Must run before PyTorch's first CUDA allocation: PyTorch lets a process
    choose its allocator once. Raises RuntimeError if PyTorch's allocator was
    already initialised (use ``mem_pool()`` for scoped use instead).
    """
    torch = _torch()
    alloc = allocator(resource)
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
                      out.unknown_frees)
