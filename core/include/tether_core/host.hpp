// Host resource: aligned allocations from the C heap. Each allocation carries
// a small header (before the returned pointer) naming its owner, size and
// alignment, so freeing memory this resource did not hand out, or with the
// wrong size/alignment, is a clear INVALID_ARGUMENT instead of heap corruption.
#pragma once

#include "tether_core/resource.hpp"

namespace tether::core {

ResourcePtr make_host_resource();

}  // namespace tether::core
