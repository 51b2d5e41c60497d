// C glue of tether/pool.h: options, creation and pool_info of the pool resource.
#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/pool.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_pool_resource_create(tether_resource_t* upstream,
                                                       const tether_pool_options_t* options,
                                                       tether_resource_t** out) {
  return create_over_upstream(
      "tether_pool_resource_create", upstream, options, kPoolDefaults, "pool", out,
      [&](const core::ResourcePtr& upstream_core, const tether_pool_options_t& o) {
        core::PoolOptions po;
        po.initial_size = o.initial_size;
        po.maximum_size = o.maximum_size;
        po.growth_size = o.growth_size;
        return core::make_pool_resource(upstream_core, po);
      });
}

TETHER_API tether_status_t tether_resource_get_pool_info(tether_resource_t* resource,
                                                         tether_pool_info_t* out) {
  return guard("tether_resource_get_pool_info", [&] {
    ResourceRef r(resource);
    const core::PoolInfo i = core::pool_info(*r->core);
    tether_pool_info_t c = TETHER_POOL_INFO_INIT;
    c.pool_size = i.pool_size;
    c.free_bytes = i.free_bytes;
    c.largest_free_block = i.largest_free_block;
    c.chunk_count = i.chunk_count;
    c.free_blocks = i.free_blocks;
    write_info(out, c, "out");
  });
}

}  // extern "C"
