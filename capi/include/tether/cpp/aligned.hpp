// tether/cpp/aligned.hpp - C++ factory of the aligned adaptor (tether/aligned.h).
// Included by tether/tether.hpp; usable on its own.
#ifndef TETHER_CPP_ALIGNED_HPP
#define TETHER_CPP_ALIGNED_HPP

#include <cstddef>

#include "tether/tether.hpp"

namespace tether {

/// A new aligned adaptor over `upstream` (kept alive by the adaptor):
/// allocations of at least `threshold` bytes get at least `alignment` (a power
/// of two up to 1 GiB; invalid_argument_error otherwise).
inline resource aligned_adaptor(const resource& upstream, std::size_t alignment, std::size_t threshold = 0) {
  tether_aligned_options_t o = TETHER_ALIGNED_OPTIONS_INIT;
  o.alignment = alignment;
  o.threshold = threshold;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_aligned_adaptor_create(upstream.get(), &o, out); });
}

}  // namespace tether

#endif  // TETHER_CPP_ALIGNED_HPP
