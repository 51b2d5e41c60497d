// tether_callback_resource_create: a core CallbackResource over the C vtable.
// A vtable function's status becomes a core exception (OUT_OF_MEMORY as
// core::OutOfMemory, so pools over the resource recover as from any
// upstream), carrying the reason the function gave tether_callback_set_error().
#include <cstring>
#include <string>

#include "internal.hpp"
#include "tether_core/callback.hpp"
#include "user_context.hpp"

namespace tether::capi {
namespace {

const tether_callback_vtable_t kVtableDefaults = TETHER_CALLBACK_VTABLE_INIT;

// The reason the last failing vtable function of this thread gave.
thread_local char t_reason[kMaxErrorMessage + 1];

void clear_reason() noexcept { t_reason[0] = '\0'; }

[[noreturn]] void throw_callback_failure(const char* function, tether_status_t status) {
  if (status < TETHER_ERROR_INVALID_ARGUMENT || status > TETHER_ERROR_INTERNAL) status = TETHER_ERROR_INTERNAL;
  std::string m = std::string("callback resource: the ") + function + " callback failed with " +
                  tether_status_name(status);
  if (t_reason[0] != '\0') m += std::string(": ") + t_reason;
  clear_reason();
  if (status == TETHER_ERROR_OUT_OF_MEMORY) throw core::OutOfMemory(m);
  throw core::Error(status, m);
}

}  // namespace
}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_callback_vtable_init(tether_callback_vtable_t* vtable, size_t struct_size) {
  return guard("tether_callback_vtable_init", [&] { init_options(vtable, struct_size, kVtableDefaults, "vtable"); });
}

TETHER_API tether_status_t tether_callback_set_error(tether_status_t status, const char* message) {
  if (message == nullptr) {
    t_reason[0] = '\0';
  } else {
    std::strncpy(t_reason, message, kMaxErrorMessage);
    t_reason[kMaxErrorMessage] = '\0';
  }
  return status;
}

TETHER_API tether_status_t tether_callback_resource_create(const tether_callback_vtable_t* vtable, void* context,
                                                           const tether_callback_options_t* options,
                                                           tether_resource_t** out) {
  return guard("tether_callback_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    require_out(vtable, "vtable");
    const tether_callback_vtable_t v = read_options(vtable, kVtableDefaults, "vtable");
    if (v.allocate == nullptr) core::throw_invalid_argument("vtable->allocate must not be NULL");
    if (v.deallocate == nullptr) core::throw_invalid_argument("vtable->deallocate must not be NULL");
    const tether_callback_options_t o = read_options(options, kCallbackDefaults, "options");

    UserContext user(v.destroy, context);
    core::CallbackFunctions f;
    f.allocate = [alloc = v.allocate, context](std::size_t bytes, std::size_t alignment,
                                               core::stream_t stream) -> void* {
      void* p = nullptr;
      clear_reason();
      const tether_status_t s = alloc(context, bytes, alignment, stream, &p);
      if (s != TETHER_OK) throw_callback_failure("allocate", s);
      return p;
    };
    f.deallocate = [dealloc = v.deallocate, context](void* p, std::size_t bytes, std::size_t alignment,
                                                     core::stream_t stream) {
      clear_reason();
      const tether_status_t s = dealloc(context, p, bytes, alignment, stream);
      if (s != TETHER_OK) throw_callback_failure("deallocate", s);
    };
    f.destroy = user.destroyer();
    core::CallbackProperties p;
    p.device = o.device;
    p.device_accessible = o.device_accessible != 0;
    p.host_accessible = o.host_accessible != 0;
    *out = make_resource_handle(core::make_callback_resource(std::move(f), p), nullptr);
    user.arm();
  });
}

}  // extern "C"
