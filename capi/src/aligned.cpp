// C glue of the aligned adaptor (tether/aligned.h).
#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/aligned.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_aligned_adaptor_create(tether_resource_t* upstream,
                                                         const tether_aligned_options_t* options,
                                                         tether_resource_t** out) {
  return create_over_upstream(
      "tether_aligned_adaptor_create", upstream, options, kAlignedDefaults, "aligned", out,
      [&](const core::ResourcePtr& upstream_core, const tether_aligned_options_t& o) {
        core::AlignedOptions ao;
        ao.alignment = o.alignment;
        ao.threshold = o.threshold;
        return core::make_aligned_adaptor(upstream_core, ao);
      });
}

TETHER_API tether_status_t tether_aligned_adaptor_get_options(tether_resource_t* resource,
                                                              tether_aligned_options_t* out) {
  return guard("tether_aligned_adaptor_get_options", [&] {
    ResourceRef r(resource);
    const core::AlignedOptions ao = core::aligned_options(*r->core);
    tether_aligned_options_t c = TETHER_ALIGNED_OPTIONS_INIT;
    c.alignment = ao.alignment;
    c.threshold = ao.threshold;
    write_info(out, c, "out");
  });
}

}  // extern "C"
