// The arena resource's C entry points (tether/arena.h).

#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/arena.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_arena_resource_create(tether_resource_t* upstream,
                                                        const tether_arena_options_t* options,
                                                        tether_resource_t** out) {
  return create_over_upstream(
      "tether_arena_resource_create", upstream, options, kArenaDefaults, "arena", out,
      [&](const core::ResourcePtr& upstream_core, const tether_arena_options_t& o) {
        core::ArenaOptions ao;
        ao.arena_size = o.arena_size;
        ao.superblock_size = o.superblock_size;
        return core::make_arena_resource(upstream_core, ao);
      });
}

TETHER_API tether_status_t tether_arena_get_info(tether_resource_t* resource, tether_arena_info_t* out) {
  return guard("tether_arena_get_info", [&] {
    ResourceRef r(resource);
    const core::ArenaInfo i = core::arena_info(*r->core);
    tether_arena_info_t c = TETHER_ARENA_INFO_INIT;
    c.arena_size = i.arena_size;
    c.superblock_size = i.superblock_size;
    c.global_free_bytes = i.global_free_bytes;
    c.arena_count = i.arena_count;
    c.arena_superblocks = i.arena_superblocks;
    c.large_bytes = i.large_bytes;
    c.chunk_count = i.chunk_count;
    write_info(out, c, "out");
  });
}

}  // extern "C"
