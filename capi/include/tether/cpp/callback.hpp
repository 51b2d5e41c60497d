// tether/cpp/callback.hpp - callback_resource() (tether/callback.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_CALLBACK_HPP
#define TETHER_CPP_CALLBACK_HPP

#include <functional>
#include <memory>
#include <new>
#include <string>

#include "tether/cpp/kinds.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// A new callback resource over a C vtable and its context (see
/// tether_callback_resource_create(): on success the resource owns `context`
/// and calls vtable.destroy(context) once when it is destroyed; if this throws,
/// the caller keeps it).
inline resource callback_resource(const tether_callback_vtable_t& vtable, void* context,
                                  const callback_options& options = {}) {
  tether_callback_options_t o = TETHER_CALLBACK_OPTIONS_INIT;
  o.device = options.device;
  o.device_accessible = options.device_accessible ? 1 : 0;
  o.host_accessible = options.host_accessible ? 1 : 0;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_callback_resource_create(&vtable, context, &o, out); });
}

/// allocate(size, alignment, stream) -> pointer: return the memory or throw
/// (tether::out_of_memory_error or std::bad_alloc for out-of-memory).
using allocate_function = std::function<void*(std::size_t size, std::size_t alignment, tether_stream_t stream)>;
/// deallocate(ptr, size, alignment, stream): give the memory back, or throw to refuse.
using deallocate_function =
    std::function<void(void* ptr, std::size_t size, std::size_t alignment, tether_stream_t stream)>;

namespace detail {
struct callback_functions {
  allocate_function allocate;
  deallocate_function deallocate;
};

// Run f(); an exception becomes a status (and its text the failure's reason):
// no C++ exception crosses the C ABI.
template <class F>
tether_status_t callback_call(F&& f) noexcept {
  try {
    f();
    return TETHER_OK;
  } catch (const error& e) {
    return tether_callback_set_error(e.status(), e.what());
  } catch (const std::bad_alloc& e) {
    return tether_callback_set_error(TETHER_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const std::exception& e) {
    return tether_callback_set_error(TETHER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return tether_callback_set_error(TETHER_ERROR_INTERNAL, "unknown C++ exception");
  }
}

inline tether_status_t callback_allocate(void* ctx, std::size_t size, std::size_t alignment, tether_stream_t stream,
                                         void** out) {
  return callback_call([&] { *out = static_cast<callback_functions*>(ctx)->allocate(size, alignment, stream); });
}
inline tether_status_t callback_deallocate(void* ctx, void* ptr, std::size_t size, std::size_t alignment,
                                           tether_stream_t stream) {
  return callback_call([&] { static_cast<callback_functions*>(ctx)->deallocate(ptr, size, alignment, stream); });
}
inline void callback_destroy(void* ctx) { delete static_cast<callback_functions*>(ctx); }
}  // namespace detail

/// A new callback resource whose allocate/deallocate are C++ callables (kept,
/// with what they capture, until the resource is destroyed). They may be called
/// from any thread, concurrently. Exceptions they throw become the status of the
/// failing call (out-of-memory for tether::out_of_memory_error / std::bad_alloc),
/// never cross the C ABI.
inline resource callback_resource(allocate_function allocate, deallocate_function deallocate,
                                  const callback_options& options = {}) {
  if (!allocate || !deallocate)
    throw invalid_argument_error(TETHER_ERROR_INVALID_ARGUMENT,
                                 "tether::callback_resource: allocate and deallocate must not be empty");
  auto fns = std::make_unique<detail::callback_functions>(
      detail::callback_functions{std::move(allocate), std::move(deallocate)});
  tether_callback_vtable_t v = TETHER_CALLBACK_VTABLE_INIT;
  v.allocate = &detail::callback_allocate;
  v.deallocate = &detail::callback_deallocate;
  v.destroy = &detail::callback_destroy;
  resource r = callback_resource(v, fns.get(), options);
  fns.release();  // owned by the resource now
  return r;
}

}  // namespace tether

#endif  // TETHER_CPP_CALLBACK_HPP
