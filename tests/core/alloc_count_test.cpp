// Costs that must not grow with a count, checked by counting heap allocations
// (deterministic, unlike a timed test). Its own executable: it replaces the
// global operator new/delete, which counts only while a test asks it to.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "tether_core/host.hpp"
#include "tether_core/statistics.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

void* counted(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

// Counts the allocations `body` makes.
template <class F>
long allocations_of(F&& body) {
  allocations = 0;
  counting = true;
  body();
  counting = false;
  return allocations.load();
}
}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {
using namespace tether;

// Issue #21 row 5: push_counters was quadratic (the stack was copied on every
// push: 100k pushes took 103 s from Python). Amortised O(1) means the stack
// grows geometrically: n pushes reallocate it O(log n) times, and popping them
// all allocates nothing.
TEST(StatisticsStack, PushesReallocateTheStackLogarithmicallyOften) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  constexpr std::size_t kPushes = 100000;
  const long pushing = allocations_of([&] {
    for (std::size_t i = 0; i < kPushes; ++i) core::push_statistics_counters(*stats);
  });
  EXPECT_EQ(core::statistics_depth(*stats), kPushes + 1);
  EXPECT_LE(pushing, 40) << kPushes << " pushes made " << pushing << " allocations";  // log2(1e5) ~ 17
  const long popping = allocations_of([&] {
    for (std::size_t i = 0; i < kPushes; ++i) core::pop_statistics_counters(*stats);
  });
  EXPECT_EQ(core::statistics_depth(*stats), 1u);
  EXPECT_EQ(popping, 0);
  // The stack keeps its capacity: pushing back to the same depth allocates nothing.
  const long again = allocations_of([&] {
    for (std::size_t i = 0; i < kPushes; ++i) core::push_statistics_counters(*stats);
  });
  EXPECT_EQ(again, 0);
}
}  // namespace
