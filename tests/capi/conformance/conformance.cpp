// The conformance checks: behaviour every tether resource and adaptor owes its
// users, whatever it is built on, checked through the C ABI. The list of
// configurations is in factories.cpp (add a resource there, not here).
//
// Every check runs once per configuration: ctest names them
// Host/Conformance.<Check>/<factory> (label capi) and Gpu/Conformance.<Check>/<factory>
// (labels capi;gpu; skipped with the reason where no CUDA device is usable).
// Around every check the fixture verifies, with the public census
// (tether_debug_*), that once the test has released its handles no tether
// object is left alive and nothing is orphaned, and, before releasing, that
// every statistics adaptor and pool in the stack is back to zero outstanding:
// with no trim, and for stacks that cache upstream memory
// (caches_upstream_memory) once more after a trim.
//
// Memory the host cannot touch is written and read with the CUDA driver
// (cuMemsetD8 / cuMemcpyDtoH from libcuda.so.1, loaded at run time).
//
// CONFORMANCE_SCALE (a compile definition, default 1) divides the operation
// counts of the long checks; the ThreadSanitizer build sets it.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "conformance.hpp"

#ifndef CONFORMANCE_SCALE
#define CONFORMANCE_SCALE 1
#endif

namespace tether_conformance {

namespace {

// The largest alignment tether accepts (tether_resource_allocate: a power of two up to 1 GiB).
constexpr std::size_t kMaxAlignment = GiB;
constexpr int kScale = CONFORMANCE_SCALE;

bool aligned_to(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

std::string status_text(tether_status_t s) {
  return std::string(tether_status_name(s)) + " (" + tether_last_error_message() + ")";
}

// ---- the CUDA driver, for memory the host cannot touch ---------------------------------

struct Driver {
  using CUresult = int;
  using CUdevice = int;
  using CUcontext = void*;
  using CUdeviceptr = unsigned long long;
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*CtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*CtxSynchronize)() = nullptr;
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, std::size_t) = nullptr;
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, std::size_t) = nullptr;
  CUcontext ctx = nullptr;
  bool ok = false;

  static const Driver& get() {
    static const Driver d = load();
    return d;
  }

  static Driver load() {
    Driver d;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return d;
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
    sym(d.Init, "cuInit");
    sym(d.DeviceGet, "cuDeviceGet");
    sym(d.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(d.CtxPushCurrent, "cuCtxPushCurrent_v2");
    sym(d.CtxPopCurrent, "cuCtxPopCurrent_v2");
    sym(d.CtxSynchronize, "cuCtxSynchronize");
    sym(d.MemsetD8, "cuMemsetD8_v2");
    sym(d.MemcpyDtoH, "cuMemcpyDtoH_v2");
    if (!d.Init || !d.DeviceGet || !d.PrimaryCtxRetain || !d.CtxPushCurrent || !d.CtxPopCurrent ||
        !d.CtxSynchronize || !d.MemsetD8 || !d.MemcpyDtoH)
      return d;
    CUdevice dev = 0;
    // The primary context of device 0 (tether's resources live in it); never released.
    d.ok = d.Init(0) == 0 && d.DeviceGet(&dev, 0) == 0 && d.PrimaryCtxRetain(&d.ctx, dev) == 0;
    return d;
  }

  // Runs `f` with device 0's primary context current, then waits for the device.
  template <class F>
  void in_context(F&& f) const {
    ASSERT_EQ(CtxPushCurrent(ctx), 0);
    const CUresult r = f();
    const CUresult s = CtxSynchronize();
    CUcontext popped = nullptr;
    (void)CtxPopCurrent(&popped);
    ASSERT_EQ(r, 0) << "CUDA driver call failed";
    ASSERT_EQ(s, 0) << "cuCtxSynchronize failed";
  }
  void fill(void* p, unsigned char byte, std::size_t n) const {
    in_context([&] { return MemsetD8(reinterpret_cast<CUdeviceptr>(p), byte, n); });
  }
  void read(void* host, const void* p, std::size_t n) const {
    in_context([&] { return MemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(p), n); });
  }
};

// ---- what the stack holds: every link's counters ----------------------------------------

// The counters of every statistics adaptor and pool in the stack, top first.
struct Snapshot {
  struct Link {
    uint32_t kind = 0;
    bool has_statistics = false;
    tether_statistics_t statistics = TETHER_STATISTICS_INIT;
    bool has_pool = false;
    tether_pool_info_t pool = TETHER_POOL_INFO_INIT;
  };
  std::vector<Link> links;

  bool operator==(const Snapshot& o) const {
    if (links.size() != o.links.size()) return false;
    for (std::size_t i = 0; i < links.size(); ++i) {
      const Link& a = links[i];
      const Link& b = o.links[i];
      if (a.kind != b.kind || a.has_statistics != b.has_statistics || a.has_pool != b.has_pool) return false;
      const tether_statistics_t& x = a.statistics;
      const tether_statistics_t& y = b.statistics;
      if (a.has_statistics && (x.current_bytes != y.current_bytes || x.peak_bytes != y.peak_bytes ||
                               x.total_bytes != y.total_bytes || x.current_count != y.current_count ||
                               x.peak_count != y.peak_count || x.total_count != y.total_count))
        return false;
      if (a.has_pool && (a.pool.pool_size != b.pool.pool_size || a.pool.free_bytes != b.pool.free_bytes ||
                         a.pool.largest_free_block != b.pool.largest_free_block ||
                         a.pool.chunk_count != b.pool.chunk_count))
        return false;
    }
    return true;
  }
  bool operator!=(const Snapshot& o) const { return !(*this == o); }
};

std::ostream& operator<<(std::ostream& os, const Snapshot& s) {
  for (const auto& l : s.links) {
    os << "[kind " << l.kind;
    if (l.has_statistics)
      os << " statistics: current " << l.statistics.current_bytes << " B/" << l.statistics.current_count
         << ", peak " << l.statistics.peak_bytes << " B/" << l.statistics.peak_count << ", total "
         << l.statistics.total_bytes << " B/" << l.statistics.total_count;
    if (l.has_pool)
      os << " pool: size " << l.pool.pool_size << ", free " << l.pool.free_bytes << ", largest free "
         << l.pool.largest_free_block << ", chunks " << l.pool.chunk_count;
    os << "] ";
  }
  return os;
}

// The stack from r down: r, its upstream, its upstream's upstream... (borrowed).
std::vector<tether_resource_t*> chain_of(tether_resource_t* r) {
  std::vector<tether_resource_t*> chain;
  while (r != nullptr && chain.size() < 64) {
    chain.push_back(r);
    tether_resource_t* up = nullptr;
    if (tether_resource_get_upstream(r, &up) != TETHER_OK) break;
    r = up;
  }
  return chain;
}

Snapshot snapshot(tether_resource_t* r) {
  Snapshot s;
  for (tether_resource_t* link : chain_of(r)) {
    Snapshot::Link l;
    tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
    if (tether_resource_get_properties(link, &p) == TETHER_OK) l.kind = p.kind;
    l.has_statistics = tether_resource_get_statistics(link, &l.statistics) == TETHER_OK;
    l.has_pool = tether_resource_get_pool_info(link, &l.pool) == TETHER_OK;
    s.links.push_back(l);
  }
  return s;
}

struct Allocation {
  void* p;
  std::size_t size;
  std::size_t alignment;
  unsigned char byte;
};

// The byte ranges checked in an allocation of n bytes: all of it up to 256 KiB,
// else its head, middle and tail (a 1 GiB allocation is not written whole).
std::vector<std::pair<std::size_t, std::size_t>> windows(std::size_t n) {
  constexpr std::size_t w = 64 * KiB;
  if (n <= 4 * w) return {{0, n}};
  return {{0, w}, {n / 2, 4 * KiB}, {n - w, w}};
}

}  // namespace

// ---- the fixture -------------------------------------------------------------------------

class Conformance : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override {
    const Factory& f = GetParam();
    if (f.needs == Needs::gpu) {
      const std::string reason = gpu_skip_reason();
      if (!reason.empty()) GTEST_SKIP() << reason;
    }
    live_before_ = tether_debug_live_objects(TETHER_OBJECT_ANY);
    orphans_before_ = tether_debug_orphaned_resources();
    orphaned_bytes_before_ = tether_debug_orphaned_bytes();
    try {
      owned_ = f.make();
    } catch (const NotSupported& e) {
      // A GPU that lacks what the kind needs (e.g. pageable memory access): skipped, saying why.
      if (f.needs == Needs::gpu) GTEST_SKIP() << e.what();
      FAIL() << e.what();
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
    mr = owned_.get();
    ASSERT_NE(mr, nullptr);
    tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
    ASSERT_EQ(tether_resource_get_properties(mr, &p), TETHER_OK);
    props = p;
    host_access_ = p.host_accessible != 0;
    device_access_ = !host_access_ && p.device_accessible != 0 && Driver::get().ok;
    at_start_ = snapshot(mr);
  }

  void TearDown() override {
    if (mr == nullptr) return;
    if (!HasFatalFailure()) {
      // Everything the test allocated is back, first as the stack stands: a
      // stack that caches nothing must balance with no trim, and a pool's books
      // are checked while it still holds its chunks. A stack that caches
      // upstream memory gives it back on trim: then all of it is checked again.
      const Snapshot end = snapshot(mr);
      expect_balanced(end, false);
      if (std::any_of(end.links.begin(), end.links.end(),
                      [](const Snapshot::Link& l) { return caches_upstream_memory(l.kind); })) {
        EXPECT_EQ(tether_resource_trim(mr), TETHER_OK) << tether_last_error_message();
        expect_balanced(snapshot(mr), true);
      }
    }
    owned_.reset();
    mr = nullptr;
    // No handle left behind, nothing kept alive because of an outstanding allocation.
    EXPECT_EQ(tether_debug_live_objects(TETHER_OBJECT_ANY), live_before_) << "the test leaked tether objects";
    EXPECT_EQ(tether_debug_orphaned_resources(), orphans_before_) << "allocations left outstanding";
    EXPECT_EQ(tether_debug_orphaned_bytes(), orphaned_bytes_before_);
  }

  // Nothing outstanding in any link above the first pool; just under a pool,
  // exactly the pool's chunks. Before a trim (`trimmed` false) the check
  // stops at a caching link that reports no pool figures (arena, binning,
  // fixed-size): what it holds from below is invisible until it is trimmed.
  static void expect_balanced(const Snapshot& end, bool trimmed) {
    const char* when = trimmed ? "after trim: " : "with no trim: ";
    for (std::size_t i = 0; i < end.links.size(); ++i) {
      const Snapshot::Link& l = end.links[i];
      const Snapshot::Link* above = i > 0 ? &end.links[i - 1] : nullptr;
      if (above != nullptr && above->has_pool) {
        if (l.has_statistics) {
          EXPECT_EQ(l.statistics.current_bytes, above->pool.pool_size) << when << "link " << i << ": " << end;
          EXPECT_EQ(l.statistics.current_count, above->pool.chunk_count) << when << "link " << i << ": " << end;
        }
        if (l.has_pool) {
          EXPECT_EQ(l.pool.pool_size - l.pool.free_bytes, above->pool.pool_size)
              << when << "link " << i << ": " << end;
        }
        return;  // further down, the upstream's own business
      }
      if (!trimmed && caches_upstream_memory(l.kind) && !l.has_pool) return;
      if (l.has_statistics) {
        EXPECT_EQ(l.statistics.current_bytes, 0u) << when << "link " << i << ": " << end;
        EXPECT_EQ(l.statistics.current_count, 0u) << when << "link " << i << ": " << end;
      }
      if (l.has_pool) {
        EXPECT_EQ(l.pool.free_bytes, l.pool.pool_size) << when << "link " << i << ": " << end;
      }
    }
  }

  const Factory& factory() const { return GetParam(); }
  // Sizes this configuration can be asked for and must serve.
  bool can_serve(std::size_t bytes) const {
    return (factory().capacity == 0 || bytes <= factory().capacity / 2) &&
           (factory().max_request == 0 || bytes <= factory().max_request);
  }

  void* allocate(std::size_t size, std::size_t alignment = 0, tether_resource_t* r = nullptr) {
    void* p = nullptr;
    const tether_status_t s = tether_resource_allocate(r ? r : mr, size, alignment, 0, &p);
    EXPECT_EQ(s, TETHER_OK) << size << " B aligned to " << alignment << ": " << status_text(s);
    if (size != 0) {
      EXPECT_NE(p, nullptr) << size << " B";
    }
    return p;
  }
  void deallocate(void* p, std::size_t size, std::size_t alignment = 0, tether_resource_t* r = nullptr) {
    const tether_status_t s = tether_resource_deallocate(r ? r : mr, p, size, alignment, 0);
    EXPECT_EQ(s, TETHER_OK) << p << ", " << size << " B: " << status_text(s);
  }

  bool can_touch() const { return host_access_ || device_access_; }

  // Write `byte` into (the checked windows of) n bytes at p.
  void fill(void* p, unsigned char byte, std::size_t n) const {
    if (p == nullptr || n == 0) return;
    for (auto [off, len] : windows(n)) {
      char* at = static_cast<char*>(p) + off;
      if (host_access_) {
        std::memset(at, byte, len);
      } else if (device_access_) {
        Driver::get().fill(at, byte, len);
      }
    }
  }

  // Do (the checked windows of) n bytes at p hold `byte`?
  ::testing::AssertionResult holds(const void* p, unsigned char byte, std::size_t n) const {
    if (!can_touch() || p == nullptr || n == 0) return ::testing::AssertionSuccess();
    std::vector<unsigned char> copy;
    for (auto [off, len] : windows(n)) {
      const unsigned char* bytes = static_cast<const unsigned char*>(p) + off;
      if (!host_access_) {
        copy.resize(len);
        Driver::get().read(copy.data(), bytes, len);
        bytes = copy.data();
      }
      for (std::size_t i = 0; i < len; ++i) {
        if (bytes[i] != byte)
          return ::testing::AssertionFailure() << "byte " << off + i << " of " << n << " at " << p << " is "
                                               << int(bytes[i]) << ", expected " << int(byte);
      }
    }
    return ::testing::AssertionSuccess();
  }

  // `call` fails with `expected`, with a message containing `needle` (if given), and changes nothing.
  template <class Call>
  void expect_refused(tether_status_t expected, Call&& call, const char* what, const std::string& needle = "") {
    const Snapshot before = snapshot(mr);
    tether_clear_last_error();
    const tether_status_t s = call();
    EXPECT_EQ(s, expected) << what << ": got " << status_text(s);
    const std::string msg = tether_last_error_message();
    EXPECT_FALSE(msg.empty()) << what << ": no error message";
    if (!needle.empty()) {
      EXPECT_NE(msg.find(needle), std::string::npos) << what << ": \"" << msg << "\" lacks " << needle;
    }
    EXPECT_EQ(snapshot(mr), before) << what << " changed the counters";
  }

  tether_resource_t* mr = nullptr;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;

 private:
  Handle owned_;
  Snapshot at_start_;
  bool host_access_ = false;
  bool device_access_ = false;
  std::size_t live_before_ = 0;
  std::size_t orphans_before_ = 0;
  std::uint64_t orphaned_bytes_before_ = 0;
};

// The pointer as the hex digits messages print (%p and 0x%x styles both contain them).
std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIxPTR, reinterpret_cast<std::uintptr_t>(p));
  return buf;
}

// ---- the checks ---------------------------------------------------------------------------

TEST_P(Conformance, DescribesItself) {
  EXPECT_GE(props.kind, 1u);  // open-ended: new kinds are appended
  EXPECT_TRUE(props.host_accessible || props.device_accessible);
  if (props.device == TETHER_DEVICE_HOST) {
    EXPECT_TRUE(props.host_accessible) << "host memory that the host cannot access";
  } else {
    int count = 0;
    ASSERT_EQ(tether_cuda_get_device_count(&count), TETHER_OK) << tether_last_error_message();
    EXPECT_GE(props.device, 0);
    EXPECT_LT(props.device, count);
    EXPECT_TRUE(props.device_accessible) << "device memory that its device cannot access";
  }
  const std::string name = tether_resource_get_name(mr);
  EXPECT_FALSE(name.empty());
  EXPECT_TRUE(std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }))
      << name;
  EXPECT_EQ(name, tether_resource_get_name(mr));
  int equal = 0;
  ASSERT_EQ(tether_resource_is_equal(mr, mr, &equal), TETHER_OK);
  EXPECT_EQ(equal, 1);
  // The stack ends, never loops, and every link describes itself too.
  const std::vector<tether_resource_t*> chain = chain_of(mr);
  EXPECT_LT(chain.size(), 64u);
  for (std::size_t i = 1; i < chain.size(); ++i) {
    EXPECT_NE(chain[i], chain[i - 1]);
    tether_resource_properties_t up = TETHER_RESOURCE_PROPERTIES_INIT;
    EXPECT_EQ(tether_resource_get_properties(chain[i], &up), TETHER_OK);
    EXPECT_GE(up.kind, 1u);
    EXPECT_STRNE(tether_resource_get_name(chain[i]), "");
  }
  // The wrong kind of query is refused with NOT_SUPPORTED, not answered with garbage.
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  const tether_status_t s = tether_resource_get_statistics(mr, &st);
  EXPECT_TRUE(s == TETHER_OK || s == TETHER_ERROR_NOT_SUPPORTED) << status_text(s);
  if (props.kind == TETHER_RESOURCE_KIND_STATISTICS) {
    EXPECT_EQ(s, TETHER_OK) << status_text(s);
  }
  if (s == TETHER_OK) {
    EXPECT_LE(st.current_count, st.total_count);
  }
  tether_pool_info_t pi = TETHER_POOL_INFO_INIT;
  const tether_status_t q = tether_resource_get_pool_info(mr, &pi);
  EXPECT_TRUE(q == TETHER_OK || q == TETHER_ERROR_NOT_SUPPORTED) << status_text(q);
  if (props.kind == TETHER_RESOURCE_KIND_POOL) {
    EXPECT_EQ(q, TETHER_OK) << status_text(q);
  }
  if (q == TETHER_OK) {
    EXPECT_LE(pi.free_bytes, pi.pool_size);
  }
  EXPECT_EQ(tether_resource_trim(mr), TETHER_OK) << tether_last_error_message();
}

TEST_P(Conformance, ZeroSizeGivesNullAndChangesNothing) {
  const Snapshot before = snapshot(mr);
  for (std::size_t alignment : {std::size_t{0}, std::size_t{1}, std::size_t{4096}}) {
    void* p = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(tether_resource_allocate(mr, 0, alignment, 0, &p), TETHER_OK) << tether_last_error_message();
    EXPECT_EQ(p, nullptr);
  }
  EXPECT_EQ(tether_resource_deallocate(mr, nullptr, 0, 0, 0), TETHER_OK);
  EXPECT_EQ(snapshot(mr), before);
}

TEST_P(Conformance, SizesFromOneByteToOneGiB) {
  // 1, 4, 16 ... 1 GiB, and sizes either side of the usual boundaries.
  std::vector<std::size_t> sizes;
  for (std::size_t s = 1; s <= GiB; s *= 4) sizes.push_back(s);
  for (std::size_t s : {3, 255, 257, 4095, 4097, 65537}) sizes.push_back(s);
  sizes.push_back(MiB + 1);
  sizes.push_back(5 * MiB + 3);
  std::sort(sizes.begin(), sizes.end());
  std::vector<Allocation> small;  // kept live together, checked at the end
  unsigned char byte = 1;
  for (std::size_t size : sizes) {
    if (!can_serve(size)) {
      std::printf("[   INFO   ] %zu B skipped: above what %s can hold\n", size, factory().name.c_str());
      continue;
    }
    void* p = allocate(size);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_TRUE(aligned_to(p, TETHER_DEFAULT_ALIGNMENT)) << p << " for " << size << " B";
    fill(p, byte, size);
    EXPECT_TRUE(holds(p, byte, size)) << size;
    if (size <= MiB) {
      small.push_back({p, size, 0, byte});
    } else {
      deallocate(p, size);
    }
    byte = static_cast<unsigned char>(byte % 250 + 1);
  }
  for (const Allocation& a : small) {
    EXPECT_TRUE(holds(a.p, a.byte, a.size)) << a.size;
    deallocate(a.p, a.size);
  }
}

TEST_P(Conformance, HonoursEveryAlignment) {
  std::vector<Allocation> live;
  unsigned char byte = 1;
  for (std::size_t alignment = 1; alignment <= 64 * KiB; alignment *= 2) {
    for (std::size_t size : {std::size_t{1}, std::size_t{100}, std::size_t{256}, std::size_t{5000}}) {
      void* p = allocate(size, alignment);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, std::max<std::size_t>(alignment, 1))) << p << " alignment " << alignment;
      fill(p, byte, size);
      live.push_back({p, size, alignment, byte});
      byte = static_cast<unsigned char>(byte % 250 + 1);
    }
  }
  for (const Allocation& a : live) {
    EXPECT_TRUE(holds(a.p, a.byte, a.size));
    deallocate(a.p, a.size, a.alignment);
  }
  // The largest alignment accepted, where the configuration can hold it.
  if (can_serve(2 * kMaxAlignment)) {
    void* p = allocate(4096, kMaxAlignment);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, kMaxAlignment)) << p;
    fill(p, 0x7e, 4096);
    EXPECT_TRUE(holds(p, 0x7e, 4096));
    deallocate(p, 4096, kMaxAlignment);
  } else {
    std::printf("[   INFO   ] alignment %zu skipped: above what %s can hold\n", kMaxAlignment,
                factory().name.c_str());
  }
}

TEST_P(Conformance, RejectsBadAlignment) {
  for (std::size_t bad : {std::size_t{3}, std::size_t{48}, std::size_t{100}, kMaxAlignment + 1, kMaxAlignment * 2,
                          std::size_t{1} << 40}) {
    void* p = reinterpret_cast<void*>(0x1);
    expect_refused(TETHER_ERROR_INVALID_ARGUMENT, [&] { return tether_resource_allocate(mr, 64, bad, 0, &p); },
                   "allocate with a bad alignment", "alignment");
    EXPECT_EQ(p, nullptr) << bad;
  }
  expect_refused(TETHER_ERROR_INVALID_ARGUMENT, [&] { void* p; return tether_resource_allocate(mr, 0, 3, 0, &p); },
                 "allocate 0 B with a bad alignment", "alignment");
  expect_refused(TETHER_ERROR_INVALID_ARGUMENT, [&] { return tether_resource_allocate(mr, 64, 0, 0, nullptr); },
                 "allocate into NULL", "out_ptr");
}

TEST_P(Conformance, ManyLiveAllocations) {
  const int n = 4096 / kScale;
  std::mt19937_64 rng(99);
  std::vector<Allocation> live;
  for (int i = 0; i < n; ++i) {
    const std::size_t size = 1 + rng() % 700;
    void* p = allocate(size);
    ASSERT_NE(p, nullptr);
    live.push_back({p, size, 0, static_cast<unsigned char>(i % 251 + 1)});
  }
  // Distinct, non-overlapping.
  std::vector<Allocation> sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const Allocation& a, const Allocation& b) { return a.p < b.p; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    ASSERT_LE(static_cast<char*>(sorted[i - 1].p) + sorted[i - 1].size, static_cast<char*>(sorted[i].p))
        << "allocations overlap";
  }
  if (can_touch()) {
    for (const Allocation& a : live) fill(a.p, a.byte, a.size);
    for (const Allocation& a : live) ASSERT_TRUE(holds(a.p, a.byte, a.size));
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (const Allocation& a : live) deallocate(a.p, a.size);
}

TEST_P(Conformance, RandomAllocateAndFreeKeepContents) {
  std::mt19937_64 rng(20261203);  // seeded: a failure reproduces
  const std::size_t alignments[] = {0, 1, 8, 64, 256, 512, 4096};
  const std::size_t largest = can_serve(8 * MiB) ? 2 * MiB : 64 * KiB;
  std::vector<Allocation> live;
  unsigned char byte = 1;
  const int ops = 3000 / kScale;
  for (int op = 0; op < ops; ++op) {
    if (live.empty() || (live.size() < 64 && rng() % 3 != 0)) {
      // log-uniform sizes: many small, some large
      const std::size_t size = 1 + rng() % std::max<std::size_t>(1, largest >> (rng() % 16));
      const std::size_t alignment = alignments[rng() % 7];
      void* p = allocate(size, alignment);
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(aligned_to(p, alignment == 0 ? TETHER_DEFAULT_ALIGNMENT : alignment));
      fill(p, byte, size);
      live.push_back({p, size, alignment, byte});
      byte = static_cast<unsigned char>(byte % 250 + 1);
    } else {
      const std::size_t i = rng() % live.size();
      ASSERT_TRUE(holds(live[i].p, live[i].byte, live[i].size)) << "op " << op;
      deallocate(live[i].p, live[i].size, live[i].alignment);
      live[i] = live.back();
      live.pop_back();
    }
  }
  for (const Allocation& a : live) {
    EXPECT_TRUE(holds(a.p, a.byte, a.size));
    deallocate(a.p, a.size, a.alignment);
  }
}

TEST_P(Conformance, AllocateOnOneThreadFreeOnAnother) {
  // One thread allocates, another frees; then a pipeline of producers and consumers.
  std::vector<Allocation> handed;
  std::thread producer([&] {
    for (int i = 0; i < 256; ++i) {
      const std::size_t size = 64 + 37 * i;
      void* p = allocate(size);
      fill(p, static_cast<unsigned char>(i + 1), size);
      handed.push_back({p, size, 0, static_cast<unsigned char>(i + 1)});
    }
  });
  producer.join();
  std::thread consumer([&] {
    for (const Allocation& a : handed) {
      EXPECT_TRUE(holds(a.p, a.byte, a.size));
      deallocate(a.p, a.size);
    }
  });
  consumer.join();

  std::mutex m;
  std::condition_variable cv;
  std::deque<Allocation> queue;
  int producers_left = 4;
  std::atomic<int> freed{0};
  const int per_producer = 1000 / kScale;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < per_producer; ++i) {
        const std::size_t size = 1 + rng() % 4096;
        const auto byte = static_cast<unsigned char>(t * 50 + i % 50 + 1);
        void* p = allocate(size, 64);
        fill(p, byte, size);
        std::lock_guard<std::mutex> lock(m);
        queue.push_back({p, size, 64, byte});
        cv.notify_one();
      }
      std::lock_guard<std::mutex> lock(m);
      if (--producers_left == 0) cv.notify_all();
    });
    threads.emplace_back([&] {
      for (;;) {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return !queue.empty() || producers_left == 0; });
        if (queue.empty()) return;
        const Allocation a = queue.front();
        queue.pop_front();
        lock.unlock();
        EXPECT_TRUE(holds(a.p, a.byte, a.size));
        deallocate(a.p, a.size, a.alignment);
        freed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(freed.load(), 4 * per_producer);
}

TEST_P(Conformance, ConcurrentThreadsKeepTheirContents) {
  constexpr int kThreads = 8;
  const int ops = 2000 / kScale;
  std::atomic<int> errors{0};
  auto work = [&](int tid) {
    std::mt19937_64 rng(1000 + tid);
    const std::size_t alignments[] = {0, 16, 64, 256, 1024};
    std::vector<Allocation> live;
    unsigned counter = 0;
    auto release = [&](std::size_t i) {
      const Allocation a = live[i];
      if (!holds(a.p, a.byte, a.size)) errors.fetch_add(1);
      if (tether_resource_deallocate(mr, a.p, a.size, a.alignment, 0) != TETHER_OK) errors.fetch_add(1);
      live[i] = live.back();
      live.pop_back();
    };
    for (int op = 0; op < ops; ++op) {
      if (live.empty() || (live.size() < 32 && rng() % 2 == 0)) {
        const std::size_t size = 1 + rng() % 8192;
        const std::size_t alignment = alignments[rng() % 5];
        void* p = nullptr;
        if (tether_resource_allocate(mr, size, alignment, 0, &p) != TETHER_OK || p == nullptr) {
          errors.fetch_add(1);
          continue;
        }
        if (!aligned_to(p, alignment == 0 ? TETHER_DEFAULT_ALIGNMENT : alignment)) errors.fetch_add(1);
        const auto byte = static_cast<unsigned char>(tid * 31 + ++counter);
        fill(p, byte, size);
        live.push_back({p, size, alignment, byte});
      } else {
        release(rng() % live.size());
      }
    }
    while (!live.empty()) release(live.size() - 1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
}

TEST_P(Conformance, StatisticsAdaptorOverItAgreesWithTheTest) {
  tether_resource_t* raw = nullptr;
  ASSERT_EQ(tether_statistics_adaptor_create(mr, &raw), TETHER_OK) << tether_last_error_message();
  Handle stats(raw);
  // If the resource counts too (a statistics adaptor), it must agree by the same deltas.
  tether_statistics_t own_before = TETHER_STATISTICS_INIT;
  const bool own = tether_resource_get_statistics(mr, &own_before) == TETHER_OK;

  std::mt19937_64 rng(5);
  std::vector<Allocation> live;
  uint64_t cur_b = 0, peak_b = 0, tot_b = 0, cur_n = 0, peak_n = 0, tot_n = 0;
  auto check = [&](const char* when) {
    tether_statistics_t s = TETHER_STATISTICS_INIT;
    ASSERT_EQ(tether_resource_get_statistics(stats.get(), &s), TETHER_OK);
    EXPECT_EQ(s.current_bytes, cur_b) << when;
    EXPECT_EQ(s.current_count, cur_n) << when;
    EXPECT_EQ(s.peak_bytes, peak_b) << when;
    EXPECT_EQ(s.peak_count, peak_n) << when;
    EXPECT_EQ(s.total_bytes, tot_b) << when;
    EXPECT_EQ(s.total_count, tot_n) << when;
    if (own) {
      tether_statistics_t o = TETHER_STATISTICS_INIT;
      ASSERT_EQ(tether_resource_get_statistics(mr, &o), TETHER_OK);
      EXPECT_EQ(o.current_bytes, own_before.current_bytes + cur_b) << when;
      EXPECT_EQ(o.current_count, own_before.current_count + cur_n) << when;
      EXPECT_EQ(o.total_bytes, own_before.total_bytes + tot_b) << when;
      EXPECT_EQ(o.total_count, own_before.total_count + tot_n) << when;
    }
  };
  check("at the start");
  for (int op = 0; op < 600 / kScale; ++op) {
    if (live.empty() || rng() % 5 < 3) {
      const std::size_t size = 1 + rng() % (64 * KiB);
      void* p = allocate(size, 0, stats.get());
      ASSERT_NE(p, nullptr);
      live.push_back({p, size, 0, 0});
      cur_b += size, tot_b += size, ++cur_n, ++tot_n;
      peak_b = std::max(peak_b, cur_b), peak_n = std::max(peak_n, cur_n);
    } else {
      const std::size_t i = rng() % live.size();
      deallocate(live[i].p, live[i].size, 0, stats.get());
      cur_b -= live[i].size, --cur_n;
      live[i] = live.back();
      live.pop_back();
    }
    // A refused operation is not counted.
    if (op % 97 == 0) {
      void* p = nullptr;
      EXPECT_EQ(tether_resource_allocate(stats.get(), SIZE_MAX / 2, 0, 0, &p), TETHER_ERROR_OUT_OF_MEMORY);
      int local = 0;
      EXPECT_EQ(tether_resource_deallocate(stats.get(), &local, 4, 0, 0), TETHER_ERROR_INVALID_ARGUMENT);
    }
    if (op % 50 == 0) check("during the run");
  }
  check("after the run");
  ASSERT_EQ(tether_resource_reset_peak_statistics(stats.get()), TETHER_OK);
  peak_b = cur_b, peak_n = cur_n;
  check("after reset_peak");
  for (const Allocation& a : live) deallocate(a.p, a.size, 0, stats.get());
  cur_b = 0, cur_n = 0;
  check("when all is freed");
}

TEST_P(Conformance, HandlesReleasedInAnyOrder) {
  // Two more stacks from the same factory: in one every upstream handle the test
  // holds goes first (the adaptor last), in the other the adaptor goes first.
  for (bool adaptor_first : {false, true}) {
    SCOPED_TRACE(adaptor_first ? "adaptor released first" : "upstreams released first");
    Handle top = factory().make();
    std::vector<tether_resource_t*> links = chain_of(top.get());
    for (std::size_t i = 1; i < links.size(); ++i) ASSERT_EQ(tether_resource_retain(links[i]), TETHER_OK);
    // Memory from every link, given back through the link it came from.
    std::vector<std::pair<tether_resource_t*, void*>> held;
    for (tether_resource_t* l : links) held.emplace_back(l, allocate(1000, 0, l));
    for (auto [l, p] : held) deallocate(p, 1000, 0, l);
    void* p = allocate(5000, 0, top.get());
    fill(p, 0x42, 5000);
    if (adaptor_first) {
      deallocate(p, 5000, 0, top.get());
      top.reset();
      for (std::size_t i = 1; i < links.size(); ++i) {  // still usable on their own
        void* q = allocate(64, 0, links[i]);
        deallocate(q, 64, 0, links[i]);
        EXPECT_EQ(tether_resource_release(links[i]), TETHER_OK);
      }
    } else {
      for (std::size_t i = links.size(); i-- > 1;) EXPECT_EQ(tether_resource_release(links[i]), TETHER_OK);
      // The adaptor keeps what it stands on: its memory and its upstream still work.
      EXPECT_TRUE(holds(p, 0x42, 5000));
      void* q = allocate(70000, 0, top.get());
      fill(q, 0x43, 70000);
      EXPECT_TRUE(holds(q, 0x43, 70000));
      deallocate(q, 70000, 0, top.get());
      deallocate(p, 5000, 0, top.get());
      top.reset();
    }
    // The fixture checks the census (no object left, nothing orphaned) at the end.
  }
}

TEST_P(Conformance, OutOfMemoryLeavesItUsableAndUnchanged) {
  void* before = allocate(1000);
  fill(before, 0x5a, 1000);
  // Larger than any host or device: every stack must say OUT_OF_MEMORY and change nothing.
  for (std::size_t huge : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX - 255, std::size_t{1} << 50}) {
    for (std::size_t alignment : {std::size_t{0}, std::size_t{4096}}) {
      void* p = reinterpret_cast<void*>(0x1);
      expect_refused(TETHER_ERROR_OUT_OF_MEMORY,
                     [&] { return tether_resource_allocate(mr, huge, alignment, 0, &p); }, "a huge request");
      EXPECT_EQ(p, nullptr) << huge;
    }
  }
  // A bounded configuration: above its capacity, and when it is full.
  if (factory().capacity != 0) {
    const std::size_t cap = factory().capacity;
    void* p = reinterpret_cast<void*>(0x1);
    expect_refused(TETHER_ERROR_OUT_OF_MEMORY, [&] { return tether_resource_allocate(mr, cap + 1, 0, 0, &p); },
                   "a request above the capacity");
    EXPECT_EQ(p, nullptr);
    std::vector<void*> full;
    const std::size_t block = cap / 8;
    for (int i = 0; i < 16; ++i) {
      void* q = nullptr;
      if (tether_resource_allocate(mr, block, 0, 0, &q) != TETHER_OK) break;
      full.push_back(q);
    }
    EXPECT_LE(full.size(), 8u) << "held more than its capacity";
    EXPECT_GE(full.size(), 4u) << "could not hold half its capacity";
    expect_refused(TETHER_ERROR_OUT_OF_MEMORY, [&] { return tether_resource_allocate(mr, block, 0, 0, &p); },
                   "a request when full");
    for (void* q : full) deallocate(q, block);
  }
  // A configuration with a largest request: one byte more is refused.
  if (factory().max_request != 0) {
    void* p = reinterpret_cast<void*>(0x1);
    expect_refused(TETHER_ERROR_OUT_OF_MEMORY,
                   [&] { return tether_resource_allocate(mr, factory().max_request + 1, 0, 0, &p); },
                   "a request above the largest one it serves");
    EXPECT_EQ(p, nullptr);
  }
  // Still usable; what it held is intact.
  void* after = allocate(64 * KiB);
  ASSERT_NE(after, nullptr);
  fill(after, 0x33, 64 * KiB);
  EXPECT_TRUE(holds(before, 0x5a, 1000));
  EXPECT_TRUE(holds(after, 0x33, 64 * KiB));
  deallocate(after, 64 * KiB);
  deallocate(before, 1000);
}

TEST_P(Conformance, ForeignAndDoubleFreesAreRejected) {
  void* p = allocate(8 * KiB);
  ASSERT_NE(p, nullptr);
  fill(p, 0x22, 8 * KiB);
  // The message names the pointer (or the argument that is wrong in itself).
  auto refuse_free = [&](void* ptr, std::size_t size, std::size_t alignment, const char* what,
                         const char* names = nullptr) {
    expect_refused(TETHER_ERROR_INVALID_ARGUMENT,
                   [&] { return tether_resource_deallocate(mr, ptr, size, alignment, 0); }, what,
                   names ? std::string(names) : ptr ? hex(ptr) : std::string());
  };
  // Memory it never handed out: a host buffer of the test's (never read or written).
  std::vector<unsigned char> host(64 * KiB, 0);
  void* foreign = host.data() + 4096 + (256 - reinterpret_cast<std::uintptr_t>(host.data()) % 256);
  refuse_free(foreign, 100, 0, "a foreign host pointer");
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char c) { return c == 0; }))
      << "a refused free wrote to memory that was not its";
  refuse_free(static_cast<char*>(p) + 256, 1000, 0, "a pointer inside an allocation");
  refuse_free(nullptr, 100, 0, "NULL with a size");
  // Its own allocation with the wrong size or alignment.
  refuse_free(p, 0, 0, "size 0", "size");
  refuse_free(p, 8 * KiB - 1, 0, "a smaller size");
  refuse_free(p, 8 * KiB + 1, 0, "a larger size");
  refuse_free(p, 8 * KiB, 4096, "another alignment");
  refuse_free(p, 8 * KiB, 3, "a bad alignment", "alignment");
  // Memory of its upstream, and its memory freed into the upstream.
  const std::vector<tether_resource_t*> links = chain_of(mr);
  if (links.size() > 1) {
    tether_resource_t* up = links[1];
    void* u = allocate(4096, 0, up);
    refuse_free(u, 4096, 0, "the upstream's memory");
    const Snapshot before = snapshot(mr);
    EXPECT_EQ(tether_resource_deallocate(up, p, 8 * KiB, 0, 0), TETHER_ERROR_INVALID_ARGUMENT)
        << "the upstream accepted the adaptor's memory";
    EXPECT_EQ(snapshot(mr), before);
    deallocate(u, 4096, 0, up);
  }
  // Memory of a twin (another resource from the same factory).
  if (!(factory().traits & kTwinsShareFrees)) {
    Handle twin = factory().make();
    void* t = allocate(8 * KiB, 0, twin.get());
    refuse_free(t, 8 * KiB, 0, "a twin's memory");
    deallocate(t, 8 * KiB, 0, twin.get());
  }
  EXPECT_TRUE(holds(p, 0x22, 8 * KiB)) << "a refused free damaged the allocation";
  deallocate(p, 8 * KiB);
  refuse_free(p, 8 * KiB, 0, "a double free");
}

TEST_P(Conformance, MemoryIsReachableWhereThePropertiesSay) {
  const std::size_t n = 64 * KiB;
  void* p = allocate(n);
  ASSERT_NE(p, nullptr);
  if (props.host_accessible) {  // the test writes and reads it directly
    auto* bytes = static_cast<unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 7);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7)) << i;
  }
  if (props.device_accessible) {  // the device writes it (cuMemsetD8), the host reads what it wrote
    if (!Driver::get().ok) {
      std::printf("[   INFO   ] device access not checked: the CUDA driver could not be loaded\n");
    } else {
      Driver::get().fill(p, 0x6b, n);
      std::vector<unsigned char> back(n);
      if (props.host_accessible) {
        std::memcpy(back.data(), p, n);
      } else {
        Driver::get().read(back.data(), p, n);
      }
      EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0x6b; }));
    }
  }
  deallocate(p, n);
}

// ---- instances: every entry of factories.cpp, by what it needs ---------------------------

std::string gpu_skip_reason() {
  int count = 0;
  const tether_status_t s = tether_cuda_get_device_count(&count);
  if (s != TETHER_OK) return std::string("no usable CUDA device: ") + tether_last_error_message();
  return count > 0 ? "" : "no CUDA device";
}

namespace {

std::vector<Factory> needing(Needs needs) {
  std::vector<Factory> out;
  for (const Factory& f : all_factories())
    if (f.needs == needs) out.push_back(f);
  return out;
}

std::string factory_name(const ::testing::TestParamInfo<Factory>& info) { return info.param.name; }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Host, Conformance, ::testing::ValuesIn(needing(Needs::host)), factory_name);
INSTANTIATE_TEST_SUITE_P(Gpu, Conformance, ::testing::ValuesIn(needing(Needs::gpu)), factory_name);

}  // namespace tether_conformance
