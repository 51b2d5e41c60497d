// The C++ factories of the adaptors (tether/cpp/*.hpp) and the counter stack.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "tether/tether.hpp"

namespace {

class CppAdaptors : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)tether::current_resource(tether::device_host);
    base_ = tether::live_objects();
  }
  void TearDown() override { EXPECT_EQ(tether::live_objects(), base_); }
  std::size_t base_ = 0;
};

TEST_F(CppAdaptors, Limiting) {
  auto host = tether::host_resource();
  auto lim = tether::limiting_adaptor(host, 4096);
  EXPECT_EQ(lim.kind(), TETHER_RESOURCE_KIND_LIMITING);
  EXPECT_EQ(lim.upstream(), host);
  void* p = lim.allocate(4000);
  EXPECT_THROW(lim.allocate(97), tether::out_of_memory_error);
  EXPECT_EQ(tether::limiting_used_bytes(lim), 4000u);
  EXPECT_EQ(tether::limiting_limit(lim), 4096u);
  EXPECT_THROW(tether::limiting_used_bytes(host), tether::not_supported_error);
  lim.deallocate(p, 4000);
}

TEST_F(CppAdaptors, TrackingRecordsAndReport) {
  auto tr = tether::tracking_adaptor(tether::host_resource(), true);
  void* a = tr.allocate(100);
  void* b = tr.allocate(200, 0, 3);
  auto recs = tether::tracking_outstanding(tr);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].ptr, a);
  EXPECT_EQ(recs[1].ptr, b);
  EXPECT_EQ(recs[1].stream, 3u);
  EXPECT_EQ(recs[0].stack.rfind("  #0 ", 0), 0u);
  const std::string rep = tether::tracking_report(tr);
  EXPECT_EQ(rep.rfind("tether tracking adaptor: 2 outstanding allocations, 300 bytes\n", 0), 0u) << rep;
  tr.deallocate(a, 100);
  tr.deallocate(b, 200, 0, 3);
  EXPECT_TRUE(tether::tracking_outstanding(tr).empty());
}

TEST_F(CppAdaptors, Aligned) {
  auto al = tether::aligned_adaptor(tether::host_resource(), 1 << 16, 1024);
  void* p = al.allocate(1024);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (1 << 16), 0u);
  al.deallocate(p, 1024);
  EXPECT_THROW(tether::aligned_adaptor(tether::host_resource(), 3), tether::invalid_argument_error);
}

TEST_F(CppAdaptors, PrefetchRefusesHostMemory) {
  EXPECT_THROW(tether::prefetch_adaptor(tether::host_resource()), tether::invalid_argument_error);
}

TEST_F(CppAdaptors, CounterStack) {
  auto st = tether::statistics_adaptor(tether::host_resource());
  void* a = st.allocate(1000);
  {
    tether::scoped_counters scope(st);
    void* b = st.allocate(24);
    EXPECT_EQ(st.statistics().current_bytes, 24u);
    st.deallocate(b, 24);
    const tether_statistics_t s = scope.pop();
    EXPECT_EQ(s.total_bytes, 24u);
    EXPECT_EQ(s.peak_bytes, 24u);
  }
  {
    tether::scoped_counters scope(st);  // popped by the destructor
    st.deallocate(st.allocate(8), 8);
  }
  EXPECT_THROW(tether::pop_counters(st), tether::invalid_argument_error);
  tether::push_counters(st);
  EXPECT_EQ(tether::pop_counters(st).total_count, 0u);
  const tether_statistics_t s = st.statistics();
  EXPECT_EQ(s.total_bytes, 1032u);
  EXPECT_EQ(s.current_bytes, 1000u);
  EXPECT_THROW(tether::push_counters(tether::host_resource()), tether::not_supported_error);
  st.deallocate(a, 1000);
}

}  // namespace
