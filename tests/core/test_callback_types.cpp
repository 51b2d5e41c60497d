// The user-callback types: CallbackResource (user allocate/deallocate),
// LoggingAdaptor (one CSV line per event), FailureCallbackAdaptor (retry on
// out-of-memory) - their books, their callbacks' lifetimes and the
// conformance suite over each.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tether_core/callback.hpp"
#include "tether_core/failure_callback.hpp"
#include "tether_core/host.hpp"
#include "tether_core/logging.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

// A user allocator over aligned_alloc that counts its live blocks and can be
// told to run dry.
struct MallocCallbacks {
  std::atomic<int> live{0};
  std::atomic<int> destroyed{0};
  std::atomic<bool> dry{false};
  std::atomic<bool> refuse_free{false};

  core::CallbackFunctions functions() {
    core::CallbackFunctions f;
    f.allocate = [this](std::size_t bytes, std::size_t alignment, core::stream_t) -> void* {
      if (dry) throw core::OutOfMemory("dry");
      void* p = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
      if (p != nullptr) ++live;
      return p;
    };
    f.deallocate = [this](void* p, std::size_t, std::size_t, core::stream_t) {
      if (refuse_free) throw core::Error(TETHER_ERROR_INTERNAL, "refused");
      std::free(p);
      --live;
    };
    f.destroy = [this] { ++destroyed; };
    return f;
  }
};

TEST(CallbackResource, CallsTheUserFunctionsAndReportsItsProperties) {
  MallocCallbacks cb;
  {
    core::CallbackProperties props;
    props.device = 3;
    props.device_accessible = true;
    props.host_accessible = false;
    auto r = core::make_callback_resource(cb.functions(), props);
    EXPECT_STREQ(r->name(), "callback");
    EXPECT_EQ(r->properties().kind, TETHER_RESOURCE_KIND_CALLBACK);
    EXPECT_EQ(r->properties().device, 3);
    EXPECT_TRUE(r->properties().device_accessible);
    EXPECT_FALSE(r->properties().host_accessible);
    void* p = r->allocate(100, 64, 0);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    EXPECT_EQ(cb.live, 1);
    EXPECT_EQ(r->allocate(0, 0, 0), nullptr);  // size 0 never reaches the callback
    EXPECT_EQ(cb.live, 1);
    r->deallocate(p, 100, 64, 0);
    EXPECT_EQ(cb.live, 0);
    EXPECT_EQ(cb.destroyed, 0);
  }
  EXPECT_EQ(cb.destroyed, 1);  // exactly once, when the resource dies
}

TEST(CallbackResource, RefusesForeignDoubleAndMismatchedFreesBeforeTheCallback) {
  MallocCallbacks cb;
  auto r = core::make_callback_resource(cb.functions(), {});
  void* p = r->allocate(64, 0, 0);
  int local = 0;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(&local, 4, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 65, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 64, 512, 0); }));
  EXPECT_EQ(cb.live, 1);
  EXPECT_EQ(r->outstanding_count(), 1u);
  r->deallocate(p, 64, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 64, 0, 0); }));
  EXPECT_EQ(cb.live, 0);
  EXPECT_EQ(r->outstanding_count(), 0u);
}

TEST(CallbackResource, ARefusedFreeKeepsTheAllocation) {
  MallocCallbacks cb;
  auto r = core::make_callback_resource(cb.functions(), {});
  void* p = r->allocate(64, 0, 0);
  cb.refuse_free = true;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INTERNAL, [&] { r->deallocate(p, 64, 0, 0); }));
  EXPECT_EQ(r->outstanding_count(), 1u);
  cb.refuse_free = false;
  r->deallocate(p, 64, 0, 0);  // still recorded: the retry works
  EXPECT_EQ(cb.live, 0);
}

TEST(CallbackResource, OutOfMemoryAndBrokenCallbacks) {
  MallocCallbacks cb;
  auto r = core::make_callback_resource(cb.functions(), {});
  cb.dry = true;
  EXPECT_THROW(r->allocate(64, 0, 0), core::OutOfMemory);
  EXPECT_EQ(r->outstanding_count(), 0u);

  // NULL without an exception counts as out of memory.
  core::CallbackFunctions nul;
  nul.allocate = [](std::size_t, std::size_t, core::stream_t) -> void* { return nullptr; };
  nul.deallocate = [](void*, std::size_t, std::size_t, core::stream_t) {};
  EXPECT_THROW(core::make_callback_resource(nul, {})->allocate(8, 0, 0), core::OutOfMemory);

  // A misaligned pointer is given back and refused.
  static char arena[1024];
  std::atomic<int> given_back{0};
  core::CallbackFunctions odd;
  odd.allocate = [](std::size_t, std::size_t, core::stream_t) -> void* { return arena + 1; };
  odd.deallocate = [&](void* p, std::size_t, std::size_t, core::stream_t) {
    EXPECT_EQ(p, arena + 1);
    ++given_back;
  };
  auto o = core::make_callback_resource(odd, {});
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { o->allocate(8, 16, 0); }));
  EXPECT_EQ(given_back, 1);
  EXPECT_EQ(o->outstanding_count(), 0u);

  // Handing out a live pointer twice is refused (and the live one is not freed).
  core::CallbackFunctions twice;
  twice.allocate = [](std::size_t, std::size_t, core::stream_t) -> void* { return arena; };
  twice.deallocate = [&](void*, std::size_t, std::size_t, core::stream_t) { ++given_back; };
  auto t = core::make_callback_resource(twice, {});
  void* p = t->allocate(8, 1, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INTERNAL, [&] { t->allocate(8, 1, 0); }));
  EXPECT_EQ(given_back, 1);
  t->deallocate(p, 8, 1, 0);
  EXPECT_EQ(given_back, 2);

  core::CallbackFunctions empty;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::make_callback_resource(empty, {}); }));
}

TEST(CallbackResource, AnAddressReusedWhileItsFreeIsFinishingIsANewAllocation) {
  // One slot: freed inside deallocate, then handed out again before the
  // freeing thread has updated the books (here: from inside the callback).
  alignas(256) static char slot[256];
  bool taken = false;
  core::Resource* self = nullptr;
  void* again = nullptr;
  core::CallbackFunctions f;
  f.allocate = [&](std::size_t, std::size_t, core::stream_t) -> void* {
    if (taken) return nullptr;
    taken = true;
    return slot;
  };
  f.deallocate = [&](void*, std::size_t, std::size_t, core::stream_t) {
    taken = false;
    if (again == nullptr) again = self->allocate(64, 0, 0);
  };
  auto r = core::make_callback_resource(f, {});
  self = r.get();
  void* p = r->allocate(64, 0, 0);
  r->deallocate(p, 64, 0, 0);
  EXPECT_EQ(again, p);
  EXPECT_EQ(r->outstanding_count(), 1u);
  r->deallocate(again, 64, 0, 0);  // the new allocation's record survived the old free
  EXPECT_EQ(r->outstanding_count(), 0u);
  EXPECT_FALSE(taken);
}

TEST(CallbackResource, APoolOverItRecoversFromItsOutOfMemory) {
  MallocCallbacks cb;
  auto r = core::make_callback_resource(cb.functions(), {});
  auto pool = core::make_pool_resource(r, {});
  void* p = pool->allocate(1000, 0, 0);
  EXPECT_GE(cb.live, 1);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 1000, 0, 0); }))
      << "the pool's memory is not the caller's to free at the callback resource";
  cb.dry = true;
  EXPECT_THROW(pool->allocate(64 * test::MiB, 0, 0), core::OutOfMemory);
  cb.dry = false;
  pool->deallocate(p, 1000, 0, 0);
  pool->trim();
  EXPECT_EQ(cb.live, 0);
}

// ---- logging -------------------------------------------------------------------

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, ',')) out.push_back(field);
  return out;
}

TEST(LoggingAdaptor, OneLinePerEventAfterAHeader) {
  std::mutex m;
  std::vector<std::string> lines;
  core::LoggingOptions o;
  o.sink = [&](const char* line, std::size_t n) {
    std::lock_guard<std::mutex> lock(m);
    lines.emplace_back(line, n);
  };
  auto log = core::make_logging_adaptor(core::make_host_resource(), std::move(o));
  EXPECT_EQ(log->properties().kind, TETHER_RESOURCE_KIND_LOGGING);
  EXPECT_STREQ(log->name(), "logging");
  void* p = log->allocate(100, 0, 7);
  EXPECT_THROW(log->allocate(SIZE_MAX / 2, 0, 0), core::OutOfMemory);
  int local = 0;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { log->deallocate(&local, 4, 0, 0); }));
  log->deallocate(p, 100, 0, 7);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "time_ns,thread,action,pointer,size,stream,status");
  const auto a = split(lines[1]);
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a[2], "allocate");
  EXPECT_EQ(std::stoull(a[3], nullptr, 16), reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(a[4], "100");
  EXPECT_EQ(a[5], "7");
  EXPECT_EQ(a[6], "TETHER_OK");
  const auto oom = split(lines[2]);
  EXPECT_EQ(oom[2], "allocate");
  EXPECT_EQ(oom[3], "0x0");
  EXPECT_EQ(oom[6], "TETHER_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(split(lines[3])[6], "TETHER_ERROR_INVALID_ARGUMENT");
  const auto f = split(lines[4]);
  EXPECT_EQ(f[2], "free");
  EXPECT_EQ(f[3], a[3]);
  EXPECT_EQ(f[6], "TETHER_OK");
  EXPECT_LE(std::stoull(a[0]), std::stoull(f[0]));  // time is monotonic
  EXPECT_EQ(a[1], f[1]);                            // same thread
}

TEST(LoggingAdaptor, WritesAFileFlushedOnFlushAndOnDestruction) {
  const std::string path = ::testing::TempDir() + "tether_logging_test.csv";
  auto read = [&] {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  };
  {
    core::LoggingOptions o;
    o.path = path;
    auto log = core::make_logging_adaptor(core::make_host_resource(), std::move(o));
    void* p = log->allocate(10, 0, 0);
    core::flush_log(*log);
    EXPECT_EQ(read().size(), 2u);
    log->deallocate(p, 10, 0, 0);
  }
  const auto lines = read();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(split(lines[2])[2], "free");
  std::remove(path.c_str());

  core::LoggingOptions bad;
  bad.path = "/nonexistent-dir/x.csv";
  const std::string m = test::error_message([&] { core::make_logging_adaptor(core::make_host_resource(), bad); });
  EXPECT_NE(m.find("/nonexistent-dir/x.csv"), std::string::npos) << m;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                         [&] { core::make_logging_adaptor(core::make_host_resource(), core::LoggingOptions{}); }));
  auto host = core::make_host_resource();
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::flush_log(*host); }));
}

// ---- failure callback ----------------------------------------------------------

TEST(FailureCallbackAdaptor, SpillsAndRetries) {
  // A pool bounded at 4 MiB; the "spill" frees held buffers when asked.
  core::PoolOptions po;
  po.maximum_size = 4 * test::MiB;
  auto pool = core::make_pool_resource(core::make_host_resource(), po);
  std::vector<void*> held;
  core::Resource* adaptor_raw = nullptr;
  std::vector<std::size_t> asked;
  core::FailureCallbackOptions o;
  o.callback = [&](std::size_t bytes) {
    asked.push_back(bytes);
    if (held.empty()) return false;
    for (void* p : held) adaptor_raw->deallocate(p, test::MiB, 0, 0);
    held.clear();
    return true;
  };
  int destroyed = 0;
  o.destroy = [&] { ++destroyed; };
  {
    auto a = core::make_failure_callback_adaptor(pool, std::move(o));
    adaptor_raw = a.get();
    EXPECT_EQ(a->properties().kind, TETHER_RESOURCE_KIND_FAILURE_CALLBACK);
    for (int i = 0; i < 3; ++i) held.push_back(a->allocate(test::MiB, 0, 0));
    void* big = a->allocate(3 * test::MiB, 0, 0);  // fails once, spills, succeeds
    EXPECT_EQ(asked, std::vector<std::size_t>{3 * test::MiB});
    EXPECT_TRUE(held.empty());
    EXPECT_THROW(a->allocate(3 * test::MiB, 0, 0), core::OutOfMemory);  // nothing left to spill
    EXPECT_EQ(asked.size(), 2u);
    a->deallocate(big, 3 * test::MiB, 0, 0);
    int local = 0;
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(&local, 4, 0, 0); }));
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(FailureCallbackAdaptor, OtherErrorsAndThrowingCallbacksDoNotRetry) {
  int calls = 0;
  core::FailureCallbackOptions o;
  o.callback = [&](std::size_t) -> bool {
    ++calls;
    throw std::runtime_error("boom");
  };
  auto a = core::make_failure_callback_adaptor(core::make_host_resource(), std::move(o));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->allocate(8, 3, 0); }));
  EXPECT_EQ(calls, 0);
  EXPECT_THROW(a->allocate(SIZE_MAX / 2, 0, 0), core::OutOfMemory);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                         [&] { core::make_failure_callback_adaptor(core::make_host_resource(), {}); }));
}

// (Their conformance runs over the C ABI: tests/capi/conformance/factories.cpp.)


}  // namespace
