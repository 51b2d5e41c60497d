// Pool resource: a coalescing suballocator over any upstream.
//
// Memory is obtained from upstream in chunks (at least growth_size, default
// 1 MiB, up to maximum_size in total) and carved into blocks. Free blocks are
// kept in a size-indexed structure (two-level segregated fit: O(1) search for
// a block at least as large as the request, best fit within a size class) and
// coalesced with free neighbours of the same chunk on free. trim() returns
// chunks that are wholly free. When upstream provides stream_order(), the pool
// is stream-ordered: a block freed on stream A is reused on A at once and on
// another stream B only after all work on the device enqueued before the
// free is done (StreamOrder::synchronize_device(): A may have been destroyed
// since, so its handle is never used again). That wait is off the hot path:
// B takes A's memory only when it cannot be served by its own blocks or by
// growing (a bounded or exhausted pool), and in trim() and the destructor.
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
};

// Throws Error(INVALID_ARGUMENT) if initial_size > maximum_size (when maximum set),
// OutOfMemory if initial_size cannot be obtained.
ResourcePtr make_pool_resource(ResourcePtr upstream, const PoolOptions& options);

// The pool's current holdings, or throws Error(NOT_SUPPORTED) if r is not a pool.
PoolInfo pool_info(const Resource& r);

}  // namespace tether::core
