// CurrentTable: lazy defaults, swaps, locking, slot checks, concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tether_core/current_table.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;
using Ref = std::shared_ptr<int>;
using Table = core::CurrentTable<Ref>;

struct Defaults {
  std::atomic<int> made{0};
  std::function<Ref(int)> maker() {
    return [this](int slot) {
      ++made;
      return std::make_shared<int>(1000 + slot);
    };
  }
};

TEST(CurrentTable, DefaultIsCreatedLazilyOncePerSlot) {
  Defaults d;
  Table t(d.maker());
  EXPECT_EQ(d.made, 0);
  Ref host = t.get(Table::kHostSlot);
  EXPECT_EQ(*host, 999);
  EXPECT_EQ(t.get(Table::kHostSlot), host);
  EXPECT_EQ(d.made, 1);
  EXPECT_EQ(*t.get(0), 1000);
  EXPECT_EQ(*t.get(Table::kMaxDevices - 1), 1000 + Table::kMaxDevices - 1);
  EXPECT_EQ(d.made, 3);
}

TEST(CurrentTable, SetReturnsThePrevious) {
  Defaults d;
  Table t(d.maker());
  auto a = std::make_shared<int>(1);
  auto b = std::make_shared<int>(2);
  EXPECT_EQ(t.set(3, a), nullptr);  // unset before: no default is made just to be replaced
  EXPECT_EQ(d.made, 0);
  EXPECT_EQ(t.get(3), a);
  EXPECT_EQ(t.set(3, b), a);
  EXPECT_EQ(t.get(3), b);
  EXPECT_EQ(t.set(3, nullptr), b);  // back to the default
  EXPECT_EQ(*t.get(3), 1003);
  EXPECT_EQ(d.made, 1);
  EXPECT_EQ(a.use_count(), 1);  // the table let go of it
}

TEST(CurrentTable, LockedSlotRefusesSet) {
  Defaults d;
  Table t(d.maker());
  auto a = std::make_shared<int>(1);
  t.set(Table::kHostSlot, a);
  EXPECT_FALSE(t.is_locked(Table::kHostSlot));
  t.lock(Table::kHostSlot);
  EXPECT_TRUE(t.is_locked(Table::kHostSlot));
  EXPECT_TRUE(fails_with(TETHER_ERROR_LOCKED, [&] { t.set(Table::kHostSlot, std::make_shared<int>(2)); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_LOCKED, [&] { t.set(Table::kHostSlot, nullptr); }));
  EXPECT_EQ(t.get(Table::kHostSlot), a);
  EXPECT_FALSE(t.is_locked(0));  // other slots unaffected
  EXPECT_NO_THROW(t.set(0, a));
}

TEST(CurrentTable, LockingAnUnsetSlotPinsTheDefault) {
  Defaults d;
  Table t(d.maker());
  t.lock(5);
  EXPECT_EQ(d.made, 1);
  EXPECT_EQ(*t.get(5), 1005);
}

TEST(CurrentTable, BadSlotsAreInvalid) {
  Defaults d;
  Table t(d.maker());
  for (int bad : {-2, -100, Table::kMaxDevices, 100000}) {
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.get(bad); })) << bad;
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.set(bad, nullptr); })) << bad;
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.lock(bad); })) << bad;
  }
  EXPECT_EQ(d.made, 0);
}

TEST(CurrentTable, FailingDefaultLeavesTheSlotUnset) {
  int calls = 0;
  Table t([&](int) -> Ref {
    if (++calls == 1) throw core::Error(TETHER_ERROR_NO_DEVICE, "no device");
    return std::make_shared<int>(7);
  });
  EXPECT_TRUE(fails_with(TETHER_ERROR_NO_DEVICE, [&] { t.get(0); }));
  EXPECT_EQ(*t.get(0), 7);
  EXPECT_EQ(calls, 2);
}

TEST(CurrentTable, ConcurrentGetAndSet) {
  Defaults d;
  Table t(d.maker());
  constexpr int kThreads = 8, kOps = 5000;
  std::vector<Ref> values;
  for (int i = 0; i < 4; ++i) values.push_back(std::make_shared<int>(i));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < kOps; ++i) {
        const int slot = (th + i) % 3 - 1;  // host, 0, 1
        if ((i + th) % 2 == 0) {
          Ref prev = t.set(slot, values[static_cast<std::size_t>(i % 4)]);
          if (prev && (*prev < 0 || (*prev > 3 && *prev < 999))) ++bad;
        } else {
          Ref r = t.get(slot);
          if (!r || (*r < 0 || (*r > 3 && *r < 999))) ++bad;
        }
      }
    });
  }
  for (auto& x : threads) x.join();
  EXPECT_EQ(bad, 0);
  EXPECT_LE(d.made, 3);  // at most one default per slot
  for (int slot : {-1, 0, 1}) t.set(slot, nullptr);
  for (const Ref& v : values) EXPECT_EQ(v.use_count(), 1);
}

}  // namespace
