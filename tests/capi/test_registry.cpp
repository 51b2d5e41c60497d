// The handle registry on its own (capi/src/handles.cpp built into this test):
// what no C ABI test can reach in reasonable time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <thread>

#include "entered.hpp"  // registry::try_enter()/leave() (inline)
#include "internal.hpp"
#include "thread_blocks.hpp"

namespace reg = tether::capi::registry;
using tether::capi::Object;
using tether::capi::ObjectType;

namespace {

int g_destroyed = 0;
struct Counted : Object {
  ~Counted() override { ++g_destroyed; }
};

std::uint32_t index_of(std::uintptr_t h) { return static_cast<std::uint32_t>(h & 0xffffffffu) - 1; }
std::uint32_t generation_of(std::uintptr_t h) { return static_cast<std::uint32_t>(h >> 32); }

// After 2^32 create/release cycles of one slot (the free list hands the most
// recently freed slot out again) its generation would wrap and an old handle
// value would be live again: a stale holder's release would destroy the new
// owner's object. The slot is aged to its last generations instead of cycled
// 2^32 times.
TEST(Registry, GenerationsNeverWrapAHandleBackToLife) {
  const std::uintptr_t first = reg::create(ObjectType::Resource, new Counted);
  const std::uint32_t slot = index_of(first);
  ASSERT_TRUE(reg::release(first, ObjectType::Resource));
  ASSERT_TRUE(reg::testing::set_generation(slot, 0xfffffffeu));
  const std::uint64_t retired_before = reg::testing::retired_slots();

  std::set<std::uintptr_t> issued{first};
  for (int i = 0; i < 2; ++i) {  // generations 2^32 - 2 and 2^32 - 1 of that slot
    const std::uintptr_t h = reg::create(ObjectType::Resource, new Counted);
    EXPECT_EQ(index_of(h), slot);
    EXPECT_TRUE(issued.insert(h).second) << "handle value issued twice: " << std::hex << h;
    ASSERT_TRUE(reg::release(h, ObjectType::Resource));
  }
  EXPECT_EQ(reg::testing::retired_slots(), retired_before + 1);

  // Past the last generation: never the first value again, nor any other.
  const int destroyed = g_destroyed;
  const std::uintptr_t next = reg::create(ObjectType::Resource, new Counted);
  EXPECT_TRUE(issued.insert(next).second) << "handle value issued twice: " << std::hex << next;
  EXPECT_NE(index_of(next), slot) << "a slot at its last generation is retired, not reused";
  // Every stale value is dead, and its release leaves the new owner's object alone.
  for (std::uintptr_t stale : issued)
    if (stale != next) {
      EXPECT_EQ(reg::acquire(stale, ObjectType::Resource), nullptr);
      EXPECT_FALSE(reg::release(stale, ObjectType::Resource));
    }
  EXPECT_EQ(g_destroyed, destroyed);
  EXPECT_NE(reg::acquire(next, ObjectType::Resource), nullptr);
  EXPECT_TRUE(reg::release(next, ObjectType::Resource));
  EXPECT_TRUE(reg::release(next, ObjectType::Resource));
  EXPECT_EQ(g_destroyed, destroyed + 1);
  EXPECT_EQ(reg::live(0), 0u);
}

// Ordinary reuse: a freed slot comes back with the next generation.
TEST(Registry, ReuseBumpsTheGeneration) {
  const std::uintptr_t a = reg::create(ObjectType::Buffer, new Counted);
  ASSERT_TRUE(reg::release(a, ObjectType::Buffer));
  const std::uintptr_t b = reg::create(ObjectType::Buffer, new Counted);
  EXPECT_EQ(index_of(b), index_of(a));
  EXPECT_EQ(generation_of(b), generation_of(a) + 1);
  EXPECT_FALSE(reg::release(a, ObjectType::Buffer));
  EXPECT_TRUE(reg::release(b, ObjectType::Buffer));
}

// The hook refuses live slots (it is only for aging free ones).
TEST(Registry, TestHookLeavesLiveSlotsAlone) {
  const std::uintptr_t a = reg::create(ObjectType::Resource, new Counted);
  EXPECT_FALSE(reg::testing::set_generation(index_of(a), 7));
  EXPECT_NE(reg::acquire(a, ObjectType::Resource), nullptr);
  EXPECT_TRUE(reg::release(a, ObjectType::Resource));
  EXPECT_TRUE(reg::release(a, ObjectType::Resource));
}

// ---- registry::try_enter()/leave(): the hot path's gate + borrow in one step ----

// Claims the calling thread's block (the general path does that on a
// thread's first call; try_enter() never does).
void claim_block() {
  tether::capi::fork_gate_enter();
  tether::capi::fork_gate_leave();
}

// try_enter() takes only the common case; everything else comes back false with
// nothing held, for the general path to handle (and report).
TEST(RegistryEnter, FallsBackOffTheCommonCaseHoldingNothing) {
  const std::uintptr_t h = reg::create(ObjectType::Resource, new Counted);
  std::thread([&] {
    reg::Entered e;
    EXPECT_FALSE(reg::try_enter(h, ObjectType::Resource, e)) << "no block yet on a new thread";
    claim_block();
    ASSERT_TRUE(reg::try_enter(h, ObjectType::Resource, e));
    Object* obj = e.object;
    ASSERT_NE(obj, nullptr);
    reg::leave(e);
    EXPECT_FALSE(reg::try_enter(h, ObjectType::Buffer, e)) << "wrong type";
    EXPECT_FALSE(reg::try_enter(0, ObjectType::Resource, e)) << "NULL";
    EXPECT_FALSE(reg::try_enter(h + (std::uintptr_t{1} << 32), ObjectType::Resource, e)) << "other generation";
    EXPECT_FALSE(reg::try_enter(h + 12345, ObjectType::Resource, e)) << "slot that does not exist";
    tether::capi::fork_gate_enter();  // a call from inside another call (a callback)
    EXPECT_FALSE(reg::try_enter(h, ObjectType::Resource, e)) << "nested";
    tether::capi::fork_gate_leave();
    tether::capi::g_forking.store(true);  // what fork()'s prepare handler raises
    EXPECT_FALSE(reg::try_enter(h, ObjectType::Resource, e)) << "fork in progress";
    tether::capi::g_forking.store(false);
    EXPECT_TRUE(reg::try_enter(h, ObjectType::Resource, e) && e.object == obj) << "a failed enter left something held";
    reg::leave(e);
  }).join();
  // Nothing stayed published: the last release destroys at once.
  const int destroyed = g_destroyed;
  EXPECT_TRUE(reg::release(h, ObjectType::Resource));
  EXPECT_EQ(g_destroyed, destroyed + 1);
}

// The last release from inside the entered call (a callback releasing the
// handle the call uses) kills the handle at once but destroys the object only
// when the call leaves.
TEST(RegistryEnter, OwnReleaseIsDeferredToLeave) {
  claim_block();
  const std::uintptr_t h = reg::create(ObjectType::Resource, new Counted);
  const int destroyed = g_destroyed;
  reg::Entered e;
  ASSERT_TRUE(reg::try_enter(h, ObjectType::Resource, e) && e.object != nullptr);
  EXPECT_TRUE(reg::release(h, ObjectType::Resource));
  EXPECT_EQ(g_destroyed, destroyed) << "destroyed while the call still uses it";
  EXPECT_EQ(reg::acquire(h, ObjectType::Resource), nullptr) << "the handle is dead at once";
  reg::leave(e);
  EXPECT_EQ(g_destroyed, destroyed + 1);
  EXPECT_EQ(reg::live(0), 0u);
  // The thread is outside again: a new call enters normally.
  const std::uintptr_t g = reg::create(ObjectType::Resource, new Counted);
  ASSERT_TRUE(reg::try_enter(g, ObjectType::Resource, e) && e.object != nullptr);
  reg::leave(e);
  EXPECT_TRUE(reg::release(g, ObjectType::Resource));
}

// Another thread's last release waits until an entered call leaves.
TEST(RegistryEnter, ReleaseWaitsForAnotherThreadsCall) {
  const std::uintptr_t h = reg::create(ObjectType::Resource, new Counted);
  const int destroyed = g_destroyed;
  std::atomic<int> stage{0};
  std::thread caller([&] {
    claim_block();
    reg::Entered e;
    ASSERT_TRUE(reg::try_enter(h, ObjectType::Resource, e) && e.object != nullptr);
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the release is waiting now (or soon)
    EXPECT_EQ(g_destroyed, destroyed) << "destroyed under a call that uses it";
    reg::leave(e);
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::thread releaser([&] {
    stage.store(2);
    EXPECT_TRUE(reg::release(h, ObjectType::Resource));
  });
  releaser.join();
  caller.join();
  EXPECT_EQ(g_destroyed, destroyed + 1);
}

}  // namespace
