// Binning resource: requests routed by size to bin resources.
//
// A request of n bytes goes to the smallest bin whose size is >= n and that
// honours its alignment (a fixed-size bin: up to its blocks' alignment); a
// request that no bin takes goes to the fallback (by default the upstream). A bin added without a resource is a fixed-size resource of the
// bin's size over the upstream. Bins are only ever added, never removed. The
// binning resource keeps every bin resource and the fallback alive, takes
// memory from them in its own name (allocate_for), and frees it into the
// resource that served it, so frees of memory it did not hand out are
// refused by that resource, with nothing changed.
#pragma once

#include <cstdint>
#include <vector>

#include "tether_core/resource.hpp"

namespace tether::core {

struct BinningOptions {
  // Fixed-size bins of 2^min .. 2^max bytes over the upstream (both 0: none).
  unsigned min_size_exponent = 0;
  unsigned max_size_exponent = 0;
  // Blocks per upstream chunk of the fixed-size bins it creates (0: the fixed-size default, 128).
  std::size_t blocks_to_preallocate = 0;
};

struct BinningInfo {
  std::uint64_t bin_count = 0;
  std::uint64_t smallest_bin = 0;  // 0 if no bins
  std::uint64_t largest_bin = 0;   // requests above this go to the fallback
};

// fallback may be null (the upstream). Throws Error(INVALID_ARGUMENT) for a
// null upstream, a bad exponent range, or a fallback whose memory differs
// from the upstream's (device / accessibility).
ResourcePtr make_binning_resource(ResourcePtr upstream, ResourcePtr fallback, const BinningOptions& options);

// Add a bin for requests up to `size` bytes, served by `bin` (null: a new
// fixed-size resource over the upstream). INVALID_ARGUMENT for size 0, a size
// that already has a bin, or a bin resource whose memory differs from the
// upstream's; NOT_SUPPORTED if r is not a binning resource.
void binning_add_bin(Resource& r, std::size_t size, ResourcePtr bin);

// The bin sizes in ascending order; NOT_SUPPORTED if r is not a binning resource.
std::vector<std::size_t> binning_bin_sizes(const Resource& r);
BinningInfo binning_info(const Resource& r);

}  // namespace tether::core
