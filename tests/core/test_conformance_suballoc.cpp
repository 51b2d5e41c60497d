// The conformance suite applied to the arena, binning and fixed-size
// resources over host upstreams.
#include <vector>

#include "conformance.hpp"
#include "tether_core/arena.hpp"
#include "tether_core/binning.hpp"
#include "tether_core/fixed_size.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using tether::test::ResourceFactory;

core::ResourcePtr arena(core::ResourcePtr upstream, std::size_t arena_size = 0, std::size_t superblock = 0) {
  core::ArenaOptions o;
  o.arena_size = arena_size;
  o.superblock_size = superblock;
  return core::make_arena_resource(std::move(upstream), o);
}

core::ResourcePtr binning(core::ResourcePtr upstream, unsigned lo, unsigned hi) {
  core::BinningOptions o;
  o.min_size_exponent = lo;
  o.max_size_exponent = hi;
  o.blocks_to_preallocate = 4;
  return core::make_binning_resource(std::move(upstream), nullptr, o);
}

std::vector<ResourceFactory> suballoc_factories() {
  using core::make_host_resource;
  using test::MiB;
  return {
      {"arena_host", [] { return arena(make_host_resource()); }},
      {"arena_host_fixed", [] { return arena(make_host_resource(), 64 * MiB); }},
      {"arena_host_small_superblocks", [] { return arena(make_host_resource(), 0, 64 * 1024); }},
      {"arena_pool_host", [] { return arena(core::make_pool_resource(make_host_resource(), core::PoolOptions{})); }},
      {"binning_host", [] { return binning(make_host_resource(), 8, 16); }},
      {"binning_no_bins_host", [] { return binning(make_host_resource(), 0, 0); }},
      {"binning_arena_fallback",
       [] {
         auto host = make_host_resource();
         core::BinningOptions o;
         o.min_size_exponent = 10;
         o.max_size_exponent = 14;
         o.blocks_to_preallocate = 2;
         return core::make_binning_resource(host, arena(host), o);
       }},
      {"fixed_size_host",
       [] {
         core::FixedSizeOptions o;
         o.block_size = 8 * MiB;  // the suite's largest request is 5 MiB
         o.blocks_to_preallocate = 4;
         return core::make_fixed_size_resource(make_host_resource(), o);
       }},
      {"statistics_arena_host", [] { return core::make_statistics_adaptor(arena(make_host_resource())); }},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(Suballoc, suballoc_factories());

}  // namespace
