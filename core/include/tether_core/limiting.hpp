// Limiting adaptor: forwards to its upstream while the bytes it has handed out
// and not yet taken back stay within a limit. A request that would pass the
// limit is OutOfMemory and changes nothing. Bytes are counted as requested
// (not rounded to the alignment). Exact under concurrent threads: the bytes
// are reserved with one compare-and-swap before the upstream is asked, and
// given back if the upstream fails, so no interleaving passes the limit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tether_core/resource.hpp"

namespace tether::core {

// Throws INVALID_ARGUMENT for a null upstream.
ResourcePtr make_limiting_adaptor(ResourcePtr upstream, std::size_t limit);

// Bytes handed out and not yet freed / the limit. Throw NOT_SUPPORTED if r is
// not a limiting adaptor.
std::uint64_t limiting_used_bytes(const Resource& r);
std::uint64_t limiting_limit(const Resource& r);

}  // namespace tether::core
