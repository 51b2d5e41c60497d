// Aligned adaptor: allocations of at least `threshold` bytes get at least
// `alignment` (the caller's alignment if larger); smaller ones keep the
// caller's. The upstream is asked for that alignment, so nothing is
// over-allocated here. A free applies the same rule to its size and
// alignment, so it reaches the upstream exactly as the allocation did.
#pragma once

#include <cstddef>

#include "tether_core/resource.hpp"

namespace tether::core {

struct AlignedOptions {
  std::size_t alignment = kDefaultAlignment;
  std::size_t threshold = 0;
};

// Throws INVALID_ARGUMENT for a null upstream or an alignment that is not a
// power of two in [1, kMaxAlignment].
ResourcePtr make_aligned_adaptor(ResourcePtr upstream, const AlignedOptions& options);

// The options a resource was made with; NOT_SUPPORTED if r is not an aligned adaptor.
AlignedOptions aligned_options(const Resource& r);

}  // namespace tether::core
