"""The fixed-size resource (``tether/fixed_size.h``): blocks of one size."""

from __future__ import annotations

from . import _kinds
from ._convert import count_value
from ._ffi import lib
from ._resources import (Resource, Size, UpstreamAdaptor, create, handle_device, new_options, query_struct,
                         register, struct_tuple)


class FixedSizeInfo(struct_tuple("tether_fixed_size_info_t")):  # type: ignore[misc]
    """What a FixedSizeResource holds (``tether_fixed_size_info_t``): block_size, block_alignment,
    total_blocks, free_blocks, chunk_count."""

    __slots__ = ()


@register(lib.TETHER_RESOURCE_KIND_FIXED_SIZE)
class FixedSizeResource(UpstreamAdaptor):
    """Blocks of one size over ``upstream`` (``tether_fixed_size_resource_create``).

    Every request of at most ``block_size`` bytes gets one whole block;
    blocks come from upstream in chunks of ``blocks_to_preallocate`` blocks
    (one chunk at creation, another whenever all are in use). A larger
    request raises OutOfMemoryError naming the size (no block is that large).
    ``trim()`` gives back chunks whose blocks are all free.

    Arguments:

    * ``upstream`` - the resource blocks come from (kept alive). RMM spelling: ``upstream_mr``.
    * ``block_size`` - bytes per block, an int or a string like "64 KiB"
      (default "1 MiB"; rounded up to a multiple of 256).
    * ``blocks_to_preallocate`` - blocks per chunk taken from upstream (default 128).
    """

    __slots__ = ()

    # The defaults are the registry's (capi/kinds.json), which tests/python/test_kinds.py
    # holds equal to TETHER_FIXED_SIZE_OPTIONS_INIT.
    def __init__(self, upstream: Resource | None = None, block_size: Size = _kinds.FIXED_SIZE_BLOCK_SIZE,
                 blocks_to_preallocate: int = _kinds.FIXED_SIZE_BLOCKS_TO_PREALLOCATE, *,
                 upstream_mr: Resource | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        opts = new_options("tether_fixed_size_options_t", lib.tether_fixed_size_options_init, handle_device(up),
                           block_size=block_size)
        opts.blocks_to_preallocate = count_value(blocks_to_preallocate, "blocks_to_preallocate")
        self._init_from(create(lib.tether_fixed_size_resource_create, up, opts))

    def fixed_size_info(self) -> FixedSizeInfo:
        """Blocks held and free now."""
        info: FixedSizeInfo = FixedSizeInfo.from_struct(query_struct("tether_fixed_size_info_t", lib.tether_fixed_size_get_info, self))
        return info

    @property
    def block_size(self) -> int:
        """Bytes of every block (after rounding)."""
        return int(self.fixed_size_info().block_size)
