"""RMM (and everything that allocates through RMM: cuDF, cuML, ...) from tether.

``rmm.mr.set_current_device_resource(tether.rmm.memory_resource(pool))``
makes RMM allocate from the tether resource ``pool``. The memory resource is
an ``rmm.mr.CallbackMemoryResource``: RMM calls back into Python for every
allocation and free (its design; fine for a few large buffers, slow for
many small ones). Importing this module needs RMM (``pip install
rmm-cu13`` or ``rmm-cu12``) and raises ImportError without it; it changes
nothing global.
"""

from __future__ import annotations

from typing import Any

try:
    import rmm.mr as _rmm_mr
except ImportError as e:  # pragma: no cover - exercised by the CPU tests with RMM hidden
    from ._hooks import missing_library
    raise missing_library("tether.rmm", "RMM", "rmm", "pip install rmm-cu13 (or rmm-cu12)", e) from e

from ._buffer import Buffer
from ._convert import stream_value
from ._hooks import free_on, own_reference
from ._resources import Resource

__all__ = ["memory_resource"]


def _stream_of(stream: Any) -> int:
    """The raw cudaStream_t of the rmm ``Stream`` RMM passes to the callbacks."""
    if stream is None:
        return 0
    if hasattr(stream, "__cuda_stream__") or isinstance(stream, int):
        return stream_value(stream)
    value = getattr(stream, "value", None)  # pragma: no cover - RMM before __cuda_stream__
    return int(value()) if callable(value) else 0


def memory_resource(resource: Resource | None = None) -> Any:
    """An ``rmm.mr.DeviceMemoryResource`` that allocates from the tether ``resource``.

    resource: a tether resource (the memory resource keeps its own reference,
    and every outstanding allocation one more, so the tether resource stays
    alive while RMM holds any of its memory); None means the current tether
    resource of the current CUDA device, looked up at each allocation.

    Each allocation is a :class:`tether.Buffer` ordered on the stream RMM
    passes, kept in a dict by address; RMM's free pops it and frees it into the
    resource it came from, on the stream RMM passes to the free.
    """
    own = own_reference(resource)
    buffers: dict[int, Buffer] = {}

    def allocate(size: int, stream: Any) -> int:
        if size == 0:
            return 0
        buf = Buffer(size, resource=own, stream=_stream_of(stream))
        ptr = buf.ptr
        buffers[ptr] = buf
        return ptr

    def deallocate(ptr: int, size: int, stream: Any) -> None:
        buf = buffers.pop(ptr, None)
        if buf is None:
            if ptr == 0:
                return
            raise ValueError(f"tether.rmm: pointer 0x{ptr:x} was not allocated by this memory resource "
                             "(or was already deallocated)")
        free_on(buf, _stream_of(stream))

    return _rmm_mr.CallbackMemoryResource(allocate, deallocate)
