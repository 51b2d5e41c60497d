// tether/cpp/prefetch.hpp - C++ factory of the prefetch adaptor (tether/prefetch.h).
// Included by tether/tether.hpp; usable on its own.
#ifndef TETHER_CPP_PREFETCH_HPP
#define TETHER_CPP_PREFETCH_HPP

#include "tether/tether.hpp"

namespace tether {

/// A new prefetch adaptor over `upstream` (kept alive by the adaptor), which
/// must give managed memory (invalid_argument_error otherwise): each
/// allocation is prefetched to the device on its stream.
inline resource prefetch_adaptor(const resource& upstream) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_prefetch_adaptor_create(upstream.get(), out); });
}

}  // namespace tether

#endif  // TETHER_CPP_PREFETCH_HPP
