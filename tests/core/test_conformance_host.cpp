// The conformance suite applied to the host-side resources and their stacks.
#include <vector>

#include "conformance.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using tether::test::ResourceFactory;

core::ResourcePtr pool(core::ResourcePtr upstream, std::size_t initial = 0, std::size_t maximum = 0,
                       std::size_t growth = 0) {
  core::PoolOptions o;
  o.initial_size = initial;
  o.maximum_size = maximum;
  o.growth_size = growth;
  return core::make_pool_resource(std::move(upstream), o);
}

std::vector<ResourceFactory> host_factories() {
  using core::make_host_resource;
  using core::make_statistics_adaptor;
  using test::KiB;
  using test::MiB;
  return {
      {"host", [] { return make_host_resource(); }},
      {"pool_host", [] { return pool(make_host_resource()); }},
      {"pool_host_small_growth", [] { return pool(make_host_resource(), 0, 0, 16 * KiB); }},
      {"pool_host_bounded", [] { return pool(make_host_resource(), 4 * MiB, 96 * MiB, 0); }},
      {"statistics_host", [] { return make_statistics_adaptor(make_host_resource()); }},
      {"statistics_pool_host", [] { return make_statistics_adaptor(pool(make_host_resource())); }},
      {"pool_statistics_host", [] { return pool(make_statistics_adaptor(make_host_resource())); }},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(Host, host_factories());

}  // namespace
