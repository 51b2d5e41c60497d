"""PrefetchAdaptor: managed memory prefetched to its device (``tether/prefetch.h``)."""

from __future__ import annotations

from ._ffi import lib
from ._resources import Resource, UpstreamAdaptor, create, register


@register(lib.TETHER_RESOURCE_KIND_PREFETCH)
class PrefetchAdaptor(UpstreamAdaptor):
    """Prefetches each allocation of managed memory to its device, on the allocation's stream.

    ``upstream`` (RMM spelling ``upstream_mr``) must give managed memory - a
    ``tether.ManagedResource`` or a pool or adaptor over one; any other
    resource raises ValueError (InvalidArgumentError) here. A device that
    cannot prefetch raises NotImplementedError; no CUDA device raises
    ``tether.NoDeviceError``. The prefetch is stream-ordered: the host does not
    wait, and work queued on the same stream afterwards finds the memory on
    the device. The adaptor keeps ``upstream`` alive.
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, *, upstream_mr: Resource | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        self._init_from(create(lib.tether_prefetch_adaptor_create, up))
