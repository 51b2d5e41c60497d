// C glue of the limiting adaptor (tether/limiting.h).
#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/limiting.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_limiting_adaptor_create(tether_resource_t* upstream,
                                                          const tether_limiting_options_t* options,
                                                          tether_resource_t** out) {
  return create_over_upstream(
      "tether_limiting_adaptor_create", upstream, options, kLimitingDefaults, "limiting", out,
      [&](const core::ResourcePtr& upstream_core, const tether_limiting_options_t& o) {
        return core::make_limiting_adaptor(upstream_core, o.limit);
      });
}

TETHER_API tether_status_t tether_limiting_adaptor_get_used_bytes(tether_resource_t* resource, uint64_t* out) {
  return guard("tether_limiting_adaptor_get_used_bytes", [&] {
    require_out(out);
    ResourceRef r(resource);
    *out = core::limiting_used_bytes(*r->core);
  });
}

TETHER_API tether_status_t tether_limiting_adaptor_get_limit(tether_resource_t* resource, uint64_t* out) {
  return guard("tether_limiting_adaptor_get_limit", [&] {
    require_out(out);
    ResourceRef r(resource);
    *out = core::limiting_limit(*r->core);
  });
}

}  // extern "C"
