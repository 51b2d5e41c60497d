// tether/cpp/statistics.hpp - statistics_adaptor() (tether/statistics.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_STATISTICS_HPP
#define TETHER_CPP_STATISTICS_HPP

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// A new statistics adaptor forwarding to `upstream` (kept alive by the adaptor);
/// read its counters with resource::statistics().
inline resource statistics_adaptor(const resource& upstream) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_statistics_adaptor_create(upstream.get(), out); });
}

}  // namespace tether

#endif  // TETHER_CPP_STATISTICS_HPP
