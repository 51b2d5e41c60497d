// Statistics adaptor: forwards to its upstream and counts what passes through.
//
// Counter stack (as RMM's statistics_resource_adaptor): the adaptor keeps a
// stack of counter sets, one at first. Allocations and frees change only the
// set on top, and statistics_of() reads the top. push_statistics_counters()
// puts a new zeroed set on top. pop_statistics_counters() removes the top set,
// returns it, and folds it into the set below: below.peak = max(below.peak,
// below.current + popped.peak), below.current += popped.current,
// below.total += popped.total (bytes and counts alike). A free of memory
// allocated before the push lowers the top set's current below zero; such a
// set reports current 0 (its exact, negative value is what pop folds).
// Allocations and frees take no lock: each counts wholly into the set on top,
// and a push or pop waits only for the calls already counting (a handful of
// atomic adds each); see statistics.cpp.
#pragma once

#include <cstdint>

#include "tether_core/resource.hpp"

namespace tether::core {

struct Statistics {
  std::uint64_t current_bytes = 0, peak_bytes = 0, total_bytes = 0;
  std::uint64_t current_count = 0, peak_count = 0, total_count = 0;
};

ResourcePtr make_statistics_adaptor(ResourcePtr upstream);

// Throw Error(NOT_SUPPORTED) if r is not a statistics adaptor.
Statistics statistics_of(const Resource& r);
void reset_peak_statistics(Resource& r);
// Throw NOT_SUPPORTED if r is not a statistics adaptor; the pop also
// INVALID_ARGUMENT when only the first set is left.
void push_statistics_counters(Resource& r);
Statistics pop_statistics_counters(Resource& r);
// Counter sets on the stack (1 when nothing was pushed).
std::size_t statistics_depth(const Resource& r);

}  // namespace tether::core
