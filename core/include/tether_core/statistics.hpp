// Statistics adaptor: forwards to its upstream and counts what passes through.
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

}  // namespace tether::core
