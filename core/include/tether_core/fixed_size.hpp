// Fixed-size resource: blocks of one size, taken from upstream in batches.
//
// Every request of at most block_size bytes gets one whole block; a larger
// request is OutOfMemory naming the size (no block is that large), an
// alignment above the blocks' alignment (the largest power of two dividing
// block_size, at most 1 MiB) is INVALID_ARGUMENT. Blocks
// are carved from chunks of `blocks_to_preallocate` blocks taken from the
// upstream (one chunk at construction, another whenever every block is in
// use). trim() gives back chunks whose blocks are all free.
//
// Over a stream-ordered (CUDA) upstream, a block freed on stream A is reused
// on A at once; another stream takes it only after the device was
// synchronised (done once, only when growing failed or by trim()), so no
// stream handle is used after the free that made a block available.
#pragma once

#include <cstdint>

#include "tether_core/resource.hpp"

namespace tether::core {

struct FixedSizeOptions {
  std::size_t block_size = std::size_t{1} << 20;  // rounded up to a multiple of 256
  std::size_t blocks_to_preallocate = 128;        // blocks per chunk taken from upstream (0: 1)
};

struct FixedSizeInfo {
  std::uint64_t block_size = 0;     // after rounding
  std::uint64_t block_alignment = 0;
  std::uint64_t total_blocks = 0;   // blocks held from upstream
  std::uint64_t free_blocks = 0;    // of those, not handed out
  std::uint64_t chunk_count = 0;
};

// Throws Error(INVALID_ARGUMENT) for a null upstream or block_size 0,
// OutOfMemory if the first chunk cannot be obtained.
ResourcePtr make_fixed_size_resource(ResourcePtr upstream, const FixedSizeOptions& options);

// Throws Error(NOT_SUPPORTED) if r is not a fixed-size resource.
FixedSizeInfo fixed_size_info(const Resource& r);

}  // namespace tether::core
