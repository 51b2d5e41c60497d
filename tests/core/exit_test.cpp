// Teardown once the process is exiting. Its own executable: marking the
// process as exiting cannot be undone.
#include <gtest/gtest.h>

#include "fakes.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/process.hpp"
#include "tether_core/statistics.hpp"

namespace {

using namespace tether;

TEST(ProcessExit, StreamOrderedPoolsLeakAndHostPoolsFree) {
  EXPECT_FALSE(core::process_is_exiting());
  auto cuda_like = std::make_shared<test::OrderedUpstream>();
  auto host_stats = core::make_statistics_adaptor(core::make_host_resource());
  core::PoolOptions o;
  o.initial_size = 1 << 20;
  auto ordered_pool = core::make_pool_resource(cuda_like, o);
  auto host_pool = core::make_pool_resource(host_stats, o);
  // Before exit, a stream-ordered pool gives its chunks back.
  core::make_pool_resource(cuda_like, o).reset();
  EXPECT_EQ(cuda_like->upstream_frees(), 1u);

  core::mark_process_exiting();
  EXPECT_TRUE(core::process_is_exiting());
  ordered_pool.reset();
  EXPECT_EQ(cuda_like->upstream_frees(), 1u) << "no call into (what stands for) CUDA after exit began";
  EXPECT_EQ(cuda_like->outstanding_count(), 1u);
  host_pool.reset();
  EXPECT_EQ(core::statistics_of(*host_stats).current_bytes, 0u) << "host memory is still freed";
}

}  // namespace
