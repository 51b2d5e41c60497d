// The conformance suite over the limiting, tracking and aligned adaptors on
// host upstreams, alone and stacked with a pool. (Prefetch needs managed
// memory: tests/core/cuda covers it on a GPU.)
#include <vector>

#include "conformance.hpp"
#include "tether_core/aligned.hpp"
#include "tether_core/host.hpp"
#include "tether_core/limiting.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/tracking.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using tether::test::ResourceFactory;

core::ResourcePtr pool(core::ResourcePtr upstream) { return core::make_pool_resource(std::move(upstream), {}); }

core::ResourcePtr aligned(core::ResourcePtr upstream, std::size_t alignment, std::size_t threshold) {
  core::AlignedOptions o;
  o.alignment = alignment;
  o.threshold = threshold;
  return core::make_aligned_adaptor(std::move(upstream), o);
}

constexpr std::size_t kHuge = std::size_t{1} << 46;  // a limit the suite never reaches

std::vector<ResourceFactory> adaptor_factories() {
  using core::make_host_resource;
  return {
      {"limiting_host", [] { return core::make_limiting_adaptor(make_host_resource(), kHuge); }},
      {"pool_limiting_host", [] { return pool(core::make_limiting_adaptor(make_host_resource(), kHuge)); }},
      {"limiting_pool_host", [] { return core::make_limiting_adaptor(pool(make_host_resource()), kHuge); }},
      {"tracking_host", [] { return core::make_tracking_adaptor(make_host_resource(), false); }},
      {"tracking_stacks_host", [] { return core::make_tracking_adaptor(make_host_resource(), true); }},
      {"pool_tracking_host", [] { return pool(core::make_tracking_adaptor(make_host_resource(), false)); }},
      // Thresholds above the suite's 1000-byte wrong-alignment probe: at or
      // above the threshold, caller alignments up to `alignment` are one and
      // the same (test_aligned.cpp, FreeAlignmentFollowsTheRule).
      {"aligned_host", [] { return aligned(make_host_resource(), 65536, 1024); }},
      {"aligned_pool_host", [] { return aligned(pool(make_host_resource()), 4096, 1024); }},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(Adaptors, adaptor_factories());

}  // namespace
