// tether/cpp/failure_callback.hpp - failure_callback_adaptor() (tether/failure_callback.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_FAILURE_CALLBACK_HPP
#define TETHER_CPP_FAILURE_CALLBACK_HPP

#include <functional>
#include <memory>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Called with the size of an allocation that failed for lack of memory;
/// return true to try again (after freeing something), false to fail.
/// An exception counts as false (it does not cross the C ABI).
using failure_function = std::function<bool(std::size_t size)>;

namespace detail {
inline int failure_trampoline(std::size_t size, void* user) {
  try {
    return (*static_cast<failure_function*>(user))(size) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}
inline void failure_destroy(void* user) { delete static_cast<failure_function*>(user); }
}  // namespace detail

/// A new failure-callback adaptor over `upstream` (kept alive by the adaptor):
/// on out-of-memory it calls `callback` (kept until the adaptor is destroyed)
/// and retries while it returns true.
inline resource failure_callback_adaptor(const resource& upstream, failure_function callback) {
  if (!callback)
    throw invalid_argument_error(TETHER_ERROR_INVALID_ARGUMENT,
                                 "tether::failure_callback_adaptor: callback must not be empty");
  auto fn = std::make_unique<failure_function>(std::move(callback));
  tether_failure_callback_options_t o = TETHER_FAILURE_CALLBACK_OPTIONS_INIT;
  o.callback = &detail::failure_trampoline;
  o.user = fn.get();
  o.destroy = &detail::failure_destroy;
  resource r = detail::make_resource(
      [&](tether_resource_t** out) { return tether_failure_callback_adaptor_create(upstream.get(), &o, out); });
  fn.release();  // owned by the adaptor now
  return r;
}

}  // namespace tether

#endif  // TETHER_CPP_FAILURE_CALLBACK_HPP
