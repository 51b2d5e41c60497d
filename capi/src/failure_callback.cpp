// tether_failure_callback_adaptor_create: the core FailureCallbackAdaptor
// over the C function pointer.
#include "internal.hpp"
#include "tether_core/failure_callback.hpp"
#include "user_context.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_failure_callback_adaptor_create(tether_resource_t* upstream,
                                                                  const tether_failure_callback_options_t* options,
                                                                  tether_resource_t** out) {
  return guard("tether_failure_callback_adaptor_create", [&] {
    require_out(out);
    *out = nullptr;
    require_out(options, "options");
    ResourceRef up(upstream);
    const tether_failure_callback_options_t o = read_options(options, kFailureCallbackDefaults, "options");
    if (o.callback == nullptr) core::throw_invalid_argument("options->callback must not be NULL");
    UserContext user(o.destroy, o.user);
    core::FailureCallbackOptions fo;
    fo.callback = [cb = o.callback, u = o.user](std::size_t bytes) { return cb(bytes, u) != 0; };
    fo.destroy = user.destroyer();
    *out = make_resource_handle(core::make_failure_callback_adaptor(up->core, std::move(fo)), upstream);
    user.arm();
  });
}

}  // extern "C"
