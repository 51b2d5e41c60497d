"""LimitingAdaptor: a byte limit over an upstream (``tether/limiting.h``)."""

from __future__ import annotations

from ._convert import parse_size
from ._ffi import ffi, lib
from ._resources import Resource, UpstreamAdaptor, _alias, create, handle_device, new_options, register


@register(lib.TETHER_RESOURCE_KIND_LIMITING)
class LimitingAdaptor(UpstreamAdaptor):
    """Forwards to ``upstream`` while at most ``limit`` bytes are handed out.

    Arguments:

    * ``upstream`` - the resource to draw from; the adaptor keeps it alive.
      RMM spelling: ``upstream_mr``.
    * ``limit`` - the most bytes handed out and not yet freed (an int or a
      string such as ``"4 GiB"``). RMM spelling: ``allocation_limit``.

    A request that would pass the limit raises ``tether.OutOfMemoryError`` and
    changes nothing (the upstream is not asked). Bytes are counted as
    requested. Exact under concurrent threads.
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, limit: int | str | None = None, *,
                 upstream_mr: Resource | None = None, allocation_limit: int | str | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        the_limit = _alias(limit, allocation_limit, "limit", "allocation_limit")
        if the_limit is None:
            raise TypeError("LimitingAdaptor() needs a limit (bytes, or a string like '1 GiB')")
        opts = new_options("tether_limiting_options_t", lib.tether_limiting_options_init,
                           limit=parse_size(the_limit, "limit", handle_device(up)))
        self._init_from(create(lib.tether_limiting_adaptor_create, up, opts))

    @property
    def limit(self) -> int:
        """The limit in bytes."""
        out = ffi.new("uint64_t*")
        self._check(lib.tether_limiting_adaptor_get_limit(self._live(), out))
        return int(out[0])

    @property
    def used_bytes(self) -> int:
        """Bytes handed out through this adaptor and not yet freed."""
        out = ffi.new("uint64_t*")
        self._check(lib.tether_limiting_adaptor_get_used_bytes(self._live(), out))
        return int(out[0])

    def get_allocated_bytes(self) -> int:
        """RMM spelling of :attr:`used_bytes`."""
        return self.used_bytes

    def get_allocation_limit(self) -> int:
        """RMM spelling of :attr:`limit`."""
        return self.limit
