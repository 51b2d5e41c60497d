// CurrentTable: lazy defaults, swaps, locking, slot checks, concurrency,
// per-thread overrides (push/pop) and set_if_unset.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
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

// try_get() never creates and never waits: an unset slot and a slot another
// thread holds (here: making its default) are refused; a value and a
// thread's override are read.
TEST(CurrentTable, TryGetReadsOnlyWhatIsThereWithoutWaiting) {
  std::mutex m;
  std::condition_variable cv;
  bool making = false, release = false;
  Table t([&](int slot) {
    std::unique_lock<std::mutex> lock(m);
    making = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return std::make_shared<int>(1000 + slot);
  });
  Ref out;
  EXPECT_FALSE(t.try_get(0, out));
  EXPECT_FALSE(out);
  std::thread maker([&] { (void)t.get(0); });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return making; });
  }
  EXPECT_FALSE(t.try_get(0, out));  // the maker holds the slot
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  maker.join();
  ASSERT_TRUE(t.try_get(0, out));
  EXPECT_EQ(*out, 1000);
  Ref mine = std::make_shared<int>(7);
  t.push(0, mine);
  Ref top;
  ASSERT_TRUE(t.try_get(0, top));
  EXPECT_EQ(*top, 7);
  Ref popped = t.pop(0);
  Ref again;
  ASSERT_TRUE(t.try_get(0, again));
  EXPECT_EQ(again, out);
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

// ---- per-thread overrides ---------------------------------------------------

TEST(CurrentTableOverride, PushPopNestPerSlot) {
  Defaults d;
  Table t(d.maker());
  auto a = std::make_shared<int>(1);
  auto b = std::make_shared<int>(2);
  Ref host_default = t.get(Table::kHostSlot);
  t.push(Table::kHostSlot, a);
  EXPECT_EQ(a.use_count(), 2);  // retained by the stack
  EXPECT_EQ(t.get(Table::kHostSlot), a);
  EXPECT_EQ(t.depth(Table::kHostSlot), 1u);
  t.push(Table::kHostSlot, b);
  EXPECT_EQ(t.get(Table::kHostSlot), b);
  // Other slots are not overridden, and pushing made no default for them.
  EXPECT_EQ(t.depth(0), 0u);
  EXPECT_EQ(d.made, 1);
  EXPECT_EQ(*t.get(0), 1000);
  EXPECT_EQ(t.pop(Table::kHostSlot), b);
  EXPECT_EQ(t.get(Table::kHostSlot), a);
  EXPECT_EQ(t.pop(Table::kHostSlot), a);
  EXPECT_EQ(t.get(Table::kHostSlot), host_default);
  EXPECT_EQ(t.depth(Table::kHostSlot), 0u);
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 1);
}

TEST(CurrentTableOverride, PushHidesNoDefaultCreation) {
  Defaults d;
  Table t(d.maker());
  auto a = std::make_shared<int>(1);
  t.push(4, a);
  EXPECT_EQ(t.get(4), a);
  EXPECT_EQ(d.made, 0);  // an overridden slot makes no default
  t.pop(4);
}

TEST(CurrentTableOverride, PopWithoutPushIsAnError) {
  Defaults d;
  Table t(d.maker());
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.pop(3); }));
  EXPECT_NE(test::error_message([&] { t.pop(3); }).find("nothing was pushed for device 3 on this thread"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] { t.pop(Table::kHostSlot); }).find("host slot"), std::string::npos);
  t.push(0, std::make_shared<int>(1));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.pop(1); }));  // another slot
  t.pop(0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.pop(0); }));  // popped already
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.push(0, nullptr); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.push(-2, std::make_shared<int>(1)); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.pop(Table::kMaxDevices); }));
}

TEST(CurrentTableOverride, OverridesAreKeptPerTable) {
  Defaults d;
  Table t1(d.maker());
  Table t2(d.maker());
  auto a = std::make_shared<int>(1);
  t1.push(0, a);
  EXPECT_EQ(t1.get(0), a);
  EXPECT_EQ(*t2.get(0), 1000);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t2.pop(0); }));
  t1.pop(0);
}

TEST(CurrentTableOverride, OtherThreadsSeeTheProcessSlot) {
  Defaults d;
  Table t(d.maker());
  auto process = std::make_shared<int>(5);
  auto mine = std::make_shared<int>(6);
  t.set(0, process);
  t.push(0, mine);
  Ref seen_by_other;
  std::thread([&] { seen_by_other = t.get(0); }).join();
  EXPECT_EQ(seen_by_other, process);
  EXPECT_EQ(t.get(0), mine);
  // The other thread cannot pop what this one pushed.
  bool other_failed = false;
  std::thread([&] { other_failed = fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.pop(0); }); }).join();
  EXPECT_TRUE(other_failed);
  t.pop(0);
}

TEST(CurrentTableOverride, SetWhileOverriddenChangesOnlyTheProcessSlot) {
  Defaults d;
  Table t(d.maker());
  auto mine = std::make_shared<int>(1);
  auto other = std::make_shared<int>(2);
  t.push(Table::kHostSlot, mine);
  EXPECT_EQ(t.set(Table::kHostSlot, other), nullptr);
  EXPECT_EQ(t.get(Table::kHostSlot), mine);  // still the override
  t.pop(Table::kHostSlot);
  EXPECT_EQ(t.get(Table::kHostSlot), other);  // now the process slot
  t.set(Table::kHostSlot, nullptr);
}

TEST(CurrentTableOverride, LockRefusesPushButAllowsPop) {
  Defaults d;
  Table t(d.maker());
  auto early = std::make_shared<int>(1);
  t.push(2, early);
  t.lock(2);
  EXPECT_TRUE(fails_with(TETHER_ERROR_LOCKED, [&] { t.push(2, std::make_shared<int>(3)); }));
  EXPECT_EQ(t.depth(2), 1u);
  EXPECT_EQ(t.get(2), early);  // the override pushed before the lock stays
  EXPECT_EQ(t.pop(2), early);  // and can be popped
  EXPECT_EQ(*t.get(2), 1002);  // the locked default
  EXPECT_EQ(early.use_count(), 1);
  EXPECT_NO_THROW(t.push(3, early));  // other slots are not locked
  t.pop(3);
}

TEST(CurrentTableOverride, ThreadExitDropsItsOverrides) {
  Defaults d;
  Table t(d.maker());
  auto a = std::make_shared<int>(1);
  auto b = std::make_shared<int>(2);
  std::thread([&] {
    t.push(0, a);
    t.push(0, b);
    t.push(Table::kHostSlot, a);
  }).join();  // exits without popping
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 1);
  EXPECT_EQ(*t.get(0), 1000);
}

TEST(CurrentTableOverride, ThreadsInterleavingKeepTheProcessSlot) {
  // The RMM failure mode: A pushes, B pushes, A pops, B pops. With a process-wide
  // save/restore, A's restore would install B's resource for good.
  Defaults d;
  Table t(d.maker());
  auto process = std::make_shared<int>(9);
  t.set(0, process);
  auto ra = std::make_shared<int>(1);
  auto rb = std::make_shared<int>(2);
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return step == s; });
  };
  auto advance = [&] {
    std::lock_guard<std::mutex> l(m);
    ++step;
    cv.notify_all();
  };
  Ref a_saw, b_saw, a_after, b_after;
  std::thread ta([&] {
    wait_for(0);
    t.push(0, ra);
    advance();
    wait_for(2);
    a_saw = t.get(0);
    t.pop(0);
    a_after = t.get(0);
    advance();
  });
  std::thread tb([&] {
    wait_for(1);
    t.push(0, rb);
    advance();
    wait_for(3);
    b_saw = t.get(0);
    t.pop(0);
    b_after = t.get(0);
    advance();
  });
  ta.join();
  tb.join();
  EXPECT_EQ(a_saw, ra);
  EXPECT_EQ(b_saw, rb);
  EXPECT_EQ(a_after, process);
  EXPECT_EQ(b_after, process);
  EXPECT_EQ(t.get(0), process);
  a_saw.reset();
  b_saw.reset();
  EXPECT_EQ(ra.use_count(), 1);
  EXPECT_EQ(rb.use_count(), 1);
  t.set(0, nullptr);
}

TEST(CurrentTableOverride, ConcurrentPushersAndSetters) {
  Defaults d;
  Table t(d.maker());
  constexpr int kThreads = 8, kOps = 2000;
  std::vector<Ref> own;
  for (int i = 0; i < kThreads; ++i) own.push_back(std::make_shared<int>(100 + i));
  auto process_a = std::make_shared<int>(1);
  auto process_b = std::make_shared<int>(2);
  std::atomic<int> bad{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th)
    threads.emplace_back([&, th] {
      for (int i = 0; i < kOps; ++i) {
        t.push(0, own[static_cast<std::size_t>(th)]);
        if (t.get(0) != own[static_cast<std::size_t>(th)]) ++bad;
        if (t.pop(0) != own[static_cast<std::size_t>(th)]) ++bad;
        Ref r = t.get(0);  // the process slot: a default or one of the main thread's
        if (!r || (*r >= 100 && *r < 100 + kThreads)) ++bad;
      }
    });
  std::thread setter([&] {
    for (int i = 0; !stop.load(); ++i) {
      t.set(0, i % 3 == 0 ? nullptr : (i % 3 == 1 ? process_a : process_b));
      t.set_if_unset(0, process_a);
      Ref r = t.get(0);
      if (!r || (*r >= 100 && *r < 100 + kThreads)) ++bad;
    }
  });
  for (auto& x : threads) x.join();
  stop = true;
  setter.join();
  EXPECT_EQ(bad, 0);
  t.set(0, nullptr);
  for (const Ref& v : own) EXPECT_EQ(v.use_count(), 1);
  EXPECT_EQ(process_a.use_count(), 1);
}

// ---- set_if_unset ---------------------------------------------------------------

TEST(CurrentTableSetIfUnset, InstallsOnlyIntoAnUnsetSlot) {
  Defaults d;
  Table t(d.maker());
  auto lib = std::make_shared<int>(1);
  auto app = std::make_shared<int>(2);
  auto lib2 = std::make_shared<int>(3);
  EXPECT_TRUE(t.set_if_unset(0, lib));  // never touched: installs
  EXPECT_EQ(t.get(0), lib);
  EXPECT_TRUE(t.is_set(0));
  EXPECT_FALSE(t.set_if_unset(0, lib2));  // a set-if-unset counts as set
  EXPECT_EQ(t.get(0), lib);
  EXPECT_EQ(t.set(0, app), lib);  // the application may still override it
  EXPECT_FALSE(t.set_if_unset(0, lib2));
  EXPECT_EQ(t.get(0), app);
  EXPECT_EQ(t.set(0, nullptr), app);  // reset: unset again
  EXPECT_FALSE(t.is_set(0));
  EXPECT_TRUE(t.set_if_unset(0, lib2));
  EXPECT_EQ(t.get(0), lib2);
  t.set(0, nullptr);
  EXPECT_EQ(d.made, 0);
  EXPECT_EQ(lib.use_count(), 1);
  EXPECT_EQ(lib2.use_count(), 1);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.set_if_unset(0, nullptr); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { t.set_if_unset(-5, lib); }));
}

TEST(CurrentTableSetIfUnset, TheDefaultDoesNotCountAsSet) {
  Defaults d;
  Table t(d.maker());
  Ref dflt = t.get(1);
  EXPECT_FALSE(t.is_set(1));
  auto lib = std::make_shared<int>(1);
  EXPECT_TRUE(t.set_if_unset(1, lib));
  EXPECT_EQ(t.get(1), lib);
  EXPECT_EQ(*dflt, 1001);         // a holder of the replaced default keeps it
  EXPECT_EQ(dflt.use_count(), 1);  // and the table let go of it
  t.set(1, nullptr);
}

TEST(CurrentTableSetIfUnset, LockedSlotsInstallNothing) {
  Defaults d;
  Table t(d.maker());
  auto lib = std::make_shared<int>(1);
  t.lock(2);  // unset: locks its default
  EXPECT_FALSE(t.set_if_unset(2, lib));
  EXPECT_EQ(*t.get(2), 1002);
  auto app = std::make_shared<int>(2);
  t.set(3, app);
  t.lock(3);
  EXPECT_FALSE(t.set_if_unset(3, lib));
  EXPECT_EQ(t.get(3), app);
  EXPECT_EQ(lib.use_count(), 1);
}

TEST(CurrentTableSetIfUnset, IgnoresTheCallersOverride) {
  Defaults d;
  Table t(d.maker());
  auto mine = std::make_shared<int>(1);
  auto lib = std::make_shared<int>(2);
  t.push(0, mine);
  EXPECT_TRUE(t.set_if_unset(0, lib));  // the process slot was unset
  EXPECT_EQ(t.get(0), mine);            // this thread still sees its override
  Ref other;
  std::thread([&] { other = t.get(0); }).join();
  EXPECT_EQ(other, lib);
  t.pop(0);
  EXPECT_EQ(t.get(0), lib);
  t.set(0, nullptr);
}

}  // namespace
