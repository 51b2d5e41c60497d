// Arena resource: per-thread (host) or per-stream (CUDA) arenas over one
// global arena, so threads allocate without sharing a lock.
//
// The global arena holds chunks taken from the upstream, cut into
// superblocks (superblock_size, default 1 MiB, aligned to their size). Each
// arena takes whole superblocks from the global arena and carves small
// requests (at most half a superblock) out of them under its own mutex.
// Larger requests take a run of whole superblocks straight from the global
// arena. An arena keeps one wholly free superblock for itself and gives any
// further one back to the global arena. Before reporting out of memory the
// resource defragments: every arena gives its wholly free superblocks back,
// so that free memory stranded in other threads' or streams' arenas (or in
// the arena of a thread that has exited) can be reused and coalesced.
//
// Over a stream-ordered (CUDA) upstream there is one arena per stream, and
// memory moves between streams only safely: a superblock given back by a
// free on stream A carries an event recorded on A then, and another stream
// waits on that event before using it (the host never blocks). Superblocks
// collected by defragmentation, whose stream may be gone, are reused by
// other streams only after one device synchronisation. A free on a stream
// other than the arena's blocks the host until that stream's work is done.
// Host upstreams have no stream order: every stream is one.
#pragma once

#include <cstdint>

#include "tether_core/resource.hpp"

namespace tether::core {

struct ArenaOptions {
  // Bytes of the global arena, all taken from upstream at creation; the
  // arena never grows beyond. 0: nothing up front, grow on demand (chunks of
  // at least 32 MiB, geometric up to 1 GiB), no limit.
  std::size_t arena_size = 0;
  // Power of two, 64 KiB .. 1 GiB (0: 1 MiB).
  std::size_t superblock_size = 0;
};

struct ArenaInfo {
  std::uint64_t arena_size = 0;          // bytes held from upstream
  std::uint64_t superblock_size = 0;
  std::uint64_t global_free_bytes = 0;   // in free superblocks of the global arena
  std::uint64_t arena_count = 0;         // per-thread / per-stream arenas created
  std::uint64_t arena_superblocks = 0;   // superblocks held by those arenas
  std::uint64_t large_bytes = 0;         // in superblocks serving large requests
  std::uint64_t chunk_count = 0;         // chunks held from upstream
};

// Throws Error(INVALID_ARGUMENT) for a null upstream or a bad superblock
// size, OutOfMemory if arena_size cannot be obtained.
ResourcePtr make_arena_resource(ResourcePtr upstream, const ArenaOptions& options);

// Throws Error(NOT_SUPPORTED) if r is not an arena resource.
ArenaInfo arena_info(const Resource& r);

}  // namespace tether::core
