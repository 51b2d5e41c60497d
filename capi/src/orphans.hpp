// Orphans: resources whose last handle was released while raw allocations
// were outstanding. They are kept alive (their memory is never freed behind
// the caller's back) and reported by tether_debug_* and, if enabled, at exit.
#pragma once

#include <cstdint>

#include "tether_core/resource.hpp"

namespace tether::capi::orphans {

void adopt(core::ResourcePtr resource, std::int64_t count, std::int64_t bytes) noexcept;
std::size_t count() noexcept;
std::uint64_t bytes() noexcept;
void set_report(bool on) noexcept;

}  // namespace tether::capi::orphans
