// tether::thrust_allocator (tether/thrust.hpp) with the host compiler, no GPU:
// the allocator over a statistics adaptor on host memory, reached the ways
// Thrust reaches it - allocator_traits, rebinding, and the temporary-buffer
// path of thrust::cuda::par_nosync(alloc).on(stream) that thrust::sort uses.
// The sort itself (nvcc, a GPU) is examples/cpp_thrust/thrust_sort.cu.
#include <gtest/gtest.h>

#include <thrust/detail/execute_with_allocator.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <cstring>
#include <type_traits>

#include "tether/thrust.hpp"

namespace {

using int_alloc = tether::thrust_allocator<int>;
using traits = thrust::detail::allocator_traits<int_alloc>;

// What containers and algorithms see.
static_assert(std::is_same_v<traits::pointer, thrust::device_ptr<int>>, "Thrust's device pointers");
static_assert(std::is_same_v<traits::rebind_alloc<char>, tether::thrust_allocator<char>>, "rebinds to itself");
static_assert(std::is_same_v<thrust::device_vector<int, int_alloc>::allocator_type, int_alloc>, "a container's allocator");
static_assert(std::is_nothrow_move_constructible_v<int_alloc>, "");

struct Counted {
  tether::resource stats = tether::statistics_adaptor(tether::host_resource());
  tether_statistics_t now() const { return stats.statistics(); }
};

TEST(ThrustAllocator, AllocatesAndFreesThroughItsResourceOnItsStream) {
  Counted c;
  const tether_stream_t stream = 0x1234;  // host memory ignores streams; the allocator keeps it
  int_alloc a(c.stats, stream);
  EXPECT_EQ(a.stream(), stream);
  EXPECT_EQ(reinterpret_cast<tether_stream_t>(a.cuda_stream()), stream);
  EXPECT_EQ(a.get_resource().get(), c.stats.get());

  thrust::device_ptr<int> p = traits::allocate(a, 1000);
  ASSERT_NE(p.get(), nullptr);
  std::memset(p.get(), 0xab, 1000 * sizeof(int));  // host memory: usable here
  EXPECT_EQ(c.now().current_bytes, 1000 * sizeof(int));
  EXPECT_EQ(c.now().current_count, 1u);
  traits::deallocate(a, p, 1000);
  EXPECT_EQ(c.now().current_bytes, 0u);
  EXPECT_EQ(c.now().total_count, 1u);
}

TEST(ThrustAllocator, RebindsShareTheResourceAndStreamAndCompareEqual) {
  Counted c;
  int_alloc a(c.stats, tether_stream_t{7});
  tether::thrust_allocator<double> d(a);
  EXPECT_EQ(d.get_resource().get(), c.stats.get());
  EXPECT_EQ(d.stream(), 7u);
  EXPECT_TRUE(int_alloc(d) == a);
  EXPECT_FALSE(int_alloc(c.stats, tether_stream_t{8}) == a);
  EXPECT_TRUE(int_alloc(tether::host_resource()) != a);

  // Memory from one is freed through an equal other.
  thrust::device_ptr<double> p = d.allocate(3);
  int_alloc(d).deallocate(thrust::device_ptr<int>(reinterpret_cast<int*>(p.get())), 6);
  EXPECT_EQ(c.now().current_bytes, 0u);
}

// thrust::sort(thrust::cuda::par_nosync(alloc).on(stream), ...) takes its
// temporary storage through get_temporary_buffer / return_temporary_buffer on
// the policy: the allocator rebound to Thrust's temporary type, sizes matched.
TEST(ThrustAllocator, ThrustsTemporaryStorageComesFromTether) {
  Counted c;
  int_alloc a(c.stats, tether_stream_t{0});
  auto policy = thrust::cuda::par_nosync(a).on(a.cuda_stream());
  auto tmp = thrust::detail::get_temporary_buffer<double>(policy, 1001);
  ASSERT_NE(tmp.first, nullptr);
  EXPECT_EQ(tmp.second, 1001);
  EXPECT_GE(c.now().current_bytes, 1001 * sizeof(double));
  EXPECT_EQ(c.now().current_count, 1u);
  thrust::detail::return_temporary_buffer(policy, tmp.first, tmp.second);
  EXPECT_EQ(c.now().current_bytes, 0u);  // given back with the size it was taken with
  EXPECT_EQ(c.now().total_count, 1u);
}

TEST(ThrustAllocator, KeepsItsResourceAlive) {
  int_alloc a(tether::statistics_adaptor(tether::host_resource()));  // the only reference is the allocator's
  thrust::device_ptr<int> p = a.allocate(10);
  int_alloc copy = a;
  a = int_alloc(tether::host_resource());  // a lets go of the first resource; copy still holds it
  EXPECT_EQ(copy.get_resource().statistics().current_bytes, 10 * sizeof(int));
  copy.deallocate(p, 10);
  EXPECT_EQ(copy.get_resource().statistics().current_bytes, 0u);
  EXPECT_EQ(copy.get_resource().statistics().total_count, 1u);
}

TEST(ThrustAllocator, TheDefaultIsTheCurrentResourceAtConstruction) {
  Counted c;
  tether::scoped_resource use(c.stats, TETHER_DEVICE_HOST);
  // The current device's slot needs CUDA; the host slot shows what the default
  // constructor takes by giving it explicitly.
  int_alloc a(tether::current_resource(TETHER_DEVICE_HOST));
  EXPECT_EQ(a.get_resource().get(), c.stats.get());
  try {
    int_alloc d;  // the current device's slot: without a GPU there is none
    EXPECT_TRUE(d.get_resource());
  } catch (const tether::no_device_error&) {
    SUCCEED() << "no CUDA device here";
  }
}

TEST(ThrustAllocator, RefusesAnEmptyResourceAndReportsABadFreeWithoutThrowing) {
  EXPECT_THROW(int_alloc(tether::resource()), tether::invalid_handle_error);
  Counted c;
  int_alloc a(c.stats);
  int local = 0;
  testing::internal::CaptureStderr();
  a.deallocate(thrust::device_ptr<int>(&local), 1);  // not the resource's: noexcept, reported
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("tether::thrust_allocator::deallocate"), std::string::npos) << said;
  EXPECT_EQ(c.now().current_bytes, 0u);
}

TEST(ThrustAllocator, OutOfMemoryReachesTheCaller) {
  int_alloc a(tether::host_resource());
  EXPECT_THROW(a.allocate(std::size_t(1) << 61), tether::out_of_memory_error);
}

}  // namespace
