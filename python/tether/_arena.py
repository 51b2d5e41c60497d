"""The arena resource (``tether/arena.h``): per-thread or per-stream arenas over a global arena."""

from __future__ import annotations

from ._ffi import lib
from ._resources import (Resource, Size, UpstreamAdaptor, create, handle_device, new_options, query_struct,
                         register, struct_tuple)


class ArenaInfo(struct_tuple("tether_arena_info_t")):  # type: ignore[misc]
    """What an ArenaResource holds (``tether_arena_info_t``): arena_size, superblock_size,
    global_free_bytes, arena_count, arena_superblocks, large_bytes, chunk_count."""

    __slots__ = ()


@register(lib.TETHER_RESOURCE_KIND_ARENA)
class ArenaResource(UpstreamAdaptor):
    """Per-thread (host) or per-stream (CUDA) arenas over one global arena
    (``tether_arena_resource_create``), so many threads allocate without sharing a lock.

    Requests up to half a superblock are carved from superblocks that the
    calling thread's (or stream's) arena holds; larger ones take whole
    superblocks from the global arena. Before raising OutOfMemoryError the
    arena gives every arena's wholly free superblocks back to the global
    arena (defragmentation). Over a CUDA upstream, memory moves between
    streams only after the next stream waits on an event of the last one (or
    after a device synchronisation). ``trim()`` gives wholly free chunks back.

    Arguments (sizes are ints or strings like "64 MiB"):

    * ``upstream`` - where the global arena's memory comes from (kept alive).
      RMM spelling: ``upstream_mr``.
    * ``arena_size`` - bytes taken from upstream at creation; the arena never
      grows beyond them. Default None: grow on demand, no limit.
    * ``superblock_size`` - a power of two from 64 KiB to 1 GiB (default 1 MiB).
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, arena_size: Size | None = None, *,
                 superblock_size: Size | None = None, upstream_mr: Resource | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        opts = new_options("tether_arena_options_t", lib.tether_arena_options_init, handle_device(up),
                           arena_size=arena_size,
                           superblock_size=superblock_size)
        self._init_from(create(lib.tether_arena_resource_create, up, opts))

    def arena_info(self) -> ArenaInfo:
        """What the arena holds now."""
        info: ArenaInfo = ArenaInfo.from_struct(query_struct("tether_arena_info_t", lib.tether_arena_get_info, self))
        return info
