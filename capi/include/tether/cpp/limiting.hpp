// tether/cpp/limiting.hpp - C++ factory and queries of the limiting adaptor
// (tether/limiting.h). Included by tether/tether.hpp; usable on its own.
#ifndef TETHER_CPP_LIMITING_HPP
#define TETHER_CPP_LIMITING_HPP

#include <cstddef>
#include <cstdint>

#include "tether/tether.hpp"

namespace tether {

/// A new limiting adaptor over `upstream` (kept alive by the adaptor): at most
/// `limit` bytes handed out at once; a request past it throws
/// out_of_memory_error and changes nothing.
inline resource limiting_adaptor(const resource& upstream, std::size_t limit) {
  tether_limiting_options_t o = TETHER_LIMITING_OPTIONS_INIT;
  o.limit = limit;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_limiting_adaptor_create(upstream.get(), &o, out); });
}

/// Bytes a limiting adaptor has handed out and not taken back;
/// not_supported_error for other resources.
inline std::uint64_t limiting_used_bytes(const resource& r) {
  std::uint64_t v = 0;
  check(tether_limiting_adaptor_get_used_bytes(r.get(), &v));
  return v;
}

/// The limit of a limiting adaptor; not_supported_error for other resources.
inline std::uint64_t limiting_limit(const resource& r) {
  std::uint64_t v = 0;
  check(tether_limiting_adaptor_get_limit(r.get(), &v));
  return v;
}

}  // namespace tether

#endif  // TETHER_CPP_LIMITING_HPP
