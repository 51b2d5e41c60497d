// The user-callback types from C++ (tether.hpp): a resource written against
// the C vtable, pooled and installed as the current resource, then used
// through tether::current_resource(); the C++-callable factories, whose
// exceptions become statuses and never cross the C ABI.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "tether/tether.hpp"

namespace {

struct Heap {
  std::atomic<int> live{0};
  std::atomic<int> destroyed{0};
};

// Plain C-ABI functions, as a C library would write them.
extern "C" tether_status_t heap_allocate(void* ctx, size_t size, size_t alignment, tether_stream_t, void** out) {
  *out = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (*out == nullptr) return TETHER_ERROR_OUT_OF_MEMORY;
  ++static_cast<Heap*>(ctx)->live;
  return TETHER_OK;
}
extern "C" tether_status_t heap_deallocate(void* ctx, void* ptr, size_t, size_t, tether_stream_t) {
  std::free(ptr);
  --static_cast<Heap*>(ctx)->live;
  return TETHER_OK;
}
extern "C" void heap_destroy(void* ctx) { ++static_cast<Heap*>(ctx)->destroyed; }

TEST(CallbacksCpp, CVtableResourcePooledAndCurrentUsedFromCpp) {
  Heap heap;
  {
    tether_callback_vtable_t v = TETHER_CALLBACK_VTABLE_INIT;
    v.allocate = heap_allocate;
    v.deallocate = heap_deallocate;
    v.destroy = heap_destroy;
    tether::resource pool = tether::pool_resource(tether::callback_resource(v, &heap));
    tether::resource previous = tether::set_current_resource(pool, tether::device_host);
    {
      tether::resource current = tether::current_resource(tether::device_host);
      EXPECT_EQ(current, pool);
      void* p = current.allocate(4096);
      std::memset(p, 1, 4096);
      EXPECT_GE(heap.live.load(), 1);
      current.deallocate(p, 4096);
      tether::buffer b(current, 100);
      EXPECT_NE(b.data(), nullptr);
    }
    tether::set_current_resource(previous, tether::device_host);
    EXPECT_EQ(heap.destroyed.load(), 0);
  }
  EXPECT_EQ(heap.live.load(), 0);
  EXPECT_EQ(heap.destroyed.load(), 1);
}

TEST(CallbacksCpp, CallableResourceExceptionsBecomeStatuses) {
  std::atomic<bool> dry{false};
  tether::resource r = tether::callback_resource(
      [&](std::size_t size, std::size_t alignment, tether_stream_t) -> void* {
        if (dry) throw std::bad_alloc();
        if (size == 13) throw std::runtime_error("thirteen is unlucky");
        return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
      },
      [](void* p, std::size_t, std::size_t, tether_stream_t) { std::free(p); });
  EXPECT_EQ(r.kind(), TETHER_RESOURCE_KIND_CALLBACK);
  void* p = r.allocate(64);
  r.deallocate(p, 64);
  try {
    r.allocate(13);
    FAIL() << "no exception";
  } catch (const tether::internal_error& e) {
    EXPECT_NE(std::string(e.what()).find("thirteen is unlucky"), std::string::npos) << e.what();
  }
  dry = true;
  EXPECT_THROW(r.allocate(64), tether::out_of_memory_error);
}

TEST(CallbacksCpp, LoggingAndFailureCallbackFactories) {
  std::mutex m;
  std::vector<std::string> lines;
  tether::resource host = tether::host_resource();
  tether::resource log = tether::logging_adaptor(host, [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(m);
    lines.emplace_back(line);
  });
  void* p = log.allocate(32);
  log.deallocate(p, 32);
  tether::flush_log(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[1].find(",allocate,"), std::string::npos);
  EXPECT_NE(lines[2].find(",free,"), std::string::npos);
  EXPECT_THROW(tether::flush_log(host), tether::not_supported_error);

  std::vector<void*> held;
  tether::resource limited = tether::pool_resource(host, {0, 2u << 20, 0});
  tether::resource spilling;
  spilling = tether::failure_callback_adaptor(limited, [&](std::size_t) {
    if (held.empty()) return false;
    for (void* h : held) spilling.deallocate(h, 1u << 20);
    held.clear();
    return true;
  });
  held.push_back(spilling.allocate(1u << 20));
  void* big = spilling.allocate(2u << 20);  // spills, then fits
  EXPECT_TRUE(held.empty());
  EXPECT_THROW(spilling.allocate(2u << 20), tether::out_of_memory_error);
  spilling.deallocate(big, 2u << 20);
  spilling = tether::resource();  // the callback captured it by reference: drop it first
}

}  // namespace
