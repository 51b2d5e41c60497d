// Pool resource: a coalescing suballocator over any upstream.
//
// Memory is obtained from upstream in chunks (at least growth_size, default
// 1 MiB, and at least a sixteenth of what the pool holds, up to maximum_size in
// total) and carved into blocks. Free blocks are kept in a size-indexed
// structure (two-level segregated fit: O(1) search for a block at least as
// large as the request, best fit within a size class) and coalesced with
// free neighbours of the same chunk on free. trim() returns
// chunks that are wholly free. When upstream provides stream_order(), the pool
// is stream-ordered: a block freed on stream A is reused on A at once and on
// another stream B only after B waits on an event recorded on A after the
// free (cuStreamWaitEvent; the host does not block, and A's handle is never
// used again, since A may be destroyed). A records its event every 64 frees,
// or at its next free once another stream asked for its memory; a bounded
// pool, and any pool after it ran out of memory, records at every free.
// Each stream has its own arena and lock, so threads on different streams do
// not contend; a large initial size is handed to the streams in slabs (each
// its own chunk and chunk lock, growing with the stream's use), which the
// out-of-memory path joins again. trim(), the destructor and the out-of-memory path order stream
// 0 after every stream's event, synchronising the whole device once only if
// some frees are not yet covered by an event. pool.cpp has the details.
#pragma once

#include <cstdint>

#include "tether_core/resource.hpp"

namespace tether::core {

struct PoolOptions {
  std::size_t initial_size = 0;  // taken from upstream at construction
  std::size_t maximum_size = 0;  // 0: no limit
  std::size_t growth_size = 0;   // 0: default (1 MiB)
};

struct PoolInfo {
  std::uint64_t pool_size = 0;           // bytes held from upstream
  std::uint64_t free_bytes = 0;          // of pool_size, not allocated
  std::uint64_t largest_free_block = 0;  // biggest block available without growing
  std::uint64_t chunk_count = 0;         // chunks held from upstream
  std::uint64_t free_blocks = 0;         // free blocks (pieces of free_bytes): 1 when unfragmented
};

// Throws Error(INVALID_ARGUMENT) if initial_size > maximum_size (when maximum set),
// OutOfMemory if initial_size cannot be obtained.
ResourcePtr make_pool_resource(ResourcePtr upstream, const PoolOptions& options);

// The pool's current holdings, or throws Error(NOT_SUPPORTED) if r is not a pool.
PoolInfo pool_info(const Resource& r);

}  // namespace tether::core
