// The fixed-size resource's C entry points (tether/fixed_size.h).

#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/fixed_size.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_fixed_size_resource_create(tether_resource_t* upstream,
                                                             const tether_fixed_size_options_t* options,
                                                             tether_resource_t** out) {
  return create_over_upstream(
      "tether_fixed_size_resource_create", upstream, options, kFixedSizeDefaults, "fixed_size", out,
      [&](const core::ResourcePtr& upstream_core, const tether_fixed_size_options_t& o) {
        core::FixedSizeOptions fo;
        fo.block_size = o.block_size;
        fo.blocks_to_preallocate = o.blocks_to_preallocate;
        return core::make_fixed_size_resource(upstream_core, fo);
      });
}

TETHER_API tether_status_t tether_fixed_size_get_info(tether_resource_t* resource, tether_fixed_size_info_t* out) {
  return guard("tether_fixed_size_get_info", [&] {
    ResourceRef r(resource);
    const core::FixedSizeInfo i = core::fixed_size_info(*r->core);
    tether_fixed_size_info_t c = TETHER_FIXED_SIZE_INFO_INIT;
    c.block_size = i.block_size;
    c.block_alignment = i.block_alignment;
    c.total_blocks = i.total_blocks;
    c.free_blocks = i.free_blocks;
    c.chunk_count = i.chunk_count;
    write_info(out, c, "out");
  });
}

}  // extern "C"
