// HostResource specifics: properties, equality, misuse detection.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

TEST(Host, DescribesHostMemory) {
  auto host = core::make_host_resource();
  EXPECT_EQ(host->properties().kind, TETHER_RESOURCE_KIND_HOST);
  EXPECT_EQ(host->properties().device, TETHER_DEVICE_HOST);
  EXPECT_TRUE(host->properties().host_accessible);
  EXPECT_FALSE(host->properties().device_accessible);
  EXPECT_STREQ(host->name(), "host");
  EXPECT_EQ(host->upstream(), nullptr);
  EXPECT_EQ(host->stream_order(), nullptr);
}

TEST(Host, HostResourcesCompareEqualButFreeOnlyTheirOwn) {
  auto a = core::make_host_resource();
  auto b = core::make_host_resource();
  EXPECT_TRUE(a->is_equal(*b));
  EXPECT_TRUE(b->is_equal(*a));
  void* p = a->allocate(1000, 512, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { b->deallocate(p, 1000, 512, 0); }));
  EXPECT_NO_THROW(a->deallocate(p, 1000, 512, 0));
  auto pool = core::make_pool_resource(a, core::PoolOptions{});
  EXPECT_FALSE(a->is_equal(*pool));
  EXPECT_FALSE(pool->is_equal(*a));
}

TEST(Host, MisalignedPointerIsRejected) {
  auto host = core::make_host_resource();
  void* p = host->allocate(100, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(static_cast<char*>(p) + 1, 99, 0, 0); }));
  host->deallocate(p, 100, 0, 0);
}

TEST(Host, PoolMemoryIsNotHostMemory) {
  auto host = core::make_host_resource();
  core::PoolOptions o;
  o.initial_size = 1 << 20;
  auto pool = core::make_pool_resource(host, o);
  void* first = pool->allocate(4096, 0, 0);
  void* p = pool->allocate(4096, 0, 0);  // inside the chunk, not at its start
  std::memset(first, 0, 4096);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 4096, 0, 0); }));
  pool->deallocate(p, 4096, 0, 0);
  pool->deallocate(first, 4096, 0, 0);
}

TEST(Host, DoubleFreeIsRejected) {
  // The side table answers without reading the freed memory (also under AddressSanitizer).
  auto host = core::make_host_resource();
  for (std::size_t alignment : {std::size_t{8}, std::size_t{256}, std::size_t{4096}}) {
    void* p = host->allocate(3000, alignment, 0);
    host->deallocate(p, 3000, alignment, 0);
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 3000, alignment, 0); }));
  }
}

}  // namespace
