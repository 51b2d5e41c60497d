// libFuzzer target: random C ABI call sequences, each call checked against a
// model of what it must return (DESIGN.md section 2; issue 11).
//
// The input is an op byte stream: each op is one byte (op % kOpCount) followed
// by the argument bytes it reads (missing bytes read as 0). The model keeps
// every resource (kind, upstream, the caller's references and the references
// its dependents hold), every raw allocation (pointer, size, alignment, a tag
// written into its memory), every buffer (size, a shadow copy of its bytes),
// the host slot of the current-resource table and this thread's override
// stack. A call whose status, output or side effect differs from the model's
// answer stops the process with __builtin_trap(). At the end of each input
// everything is given back and the census (tether_debug_live_objects, the
// orphan count) must be where it was at start-up.
//
// Hostile ops (forged handles, stale handles, foreign pointers, double frees,
// cross-resource frees, a pool's memory freed into its upstream) each sit
// behind a bit of TETHER_FUZZ_HOSTILE (read once at start-up; default: all).
// Locking the host slot is irreversible for a process, so the lock op runs in
// a fork()ed child that checks the locked slot's answers and exits.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tether/tether.h"

namespace {

enum HostileBit : unsigned {
  kForged = 1u << 0,    // made-up handle values, handles of the wrong type
  kStale = 1u << 1,     // handles whose last reference was released
  kForeign = 1u << 2,   // pointers tether never handed out (static, stack, malloc, interior)
  kDouble = 1u << 3,    // a raw allocation freed twice
  kCross = 1u << 4,     // memory of resource A freed into B (B not A's upstream)
  kUpstream = 1u << 5,  // a pool's (or a pool's dependent's) memory freed into an upstream
};
unsigned g_hostile = ~0u;
bool g_trace = false;  // TETHER_FUZZ_TRACE=1: print each op (for reading a crash)

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "fuzz_capi: model mismatch at line %d: %s\n    last error: %s\n", \
                   __LINE__, #cond, tether_last_error_message());                         \
      __builtin_trap();                                                                  \
    }                                                                                    \
  } while (0)
#define EXPECT_STATUS(expected, call)                                                          \
  do {                                                                                         \
    tether_status_t got_ = (call);                                                             \
    if (got_ != (expected)) {                                                                  \
      std::fprintf(stderr, "fuzz_capi: line %d: %s returned %s, the model expects %s\n    last error: %s\n", \
                   __LINE__, #call, tether_status_name(got_), tether_status_name(expected),   \
                   tether_last_error_message());                                               \
      __builtin_trap();                                                                        \
    }                                                                                          \
  } while (0)

// ---- the input -----------------------------------------------------------------
struct Input {
  const uint8_t* p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
};

// ---- the model ---------------------------------------------------------------------
enum Kind { kHost, kPool, kStats };

struct Res {
  tether_resource_t* h = nullptr;
  Kind kind = kHost;
  int upstream = -1;   // index into g.res
  int caller = 0;      // references the fuzzer holds
  int deps = 0;        // references held by dependents, buffers and the table
  bool alive = false;  // caller + deps > 0
  bool limited = false;      // this pool, or a pool below it, has a maximum_size
  bool stats_exact = true;   // no pool draws through this adaptor (its counters are the model's)
  uint64_t cur_bytes = 0, cur_count = 0;
  size_t chunk_sizes[2] = {0, 0};  // a pool's initial_size and growth size: what its chunks may measure
};
struct Raw {
  void* ptr;
  size_t size, align;
  int res;
  uint8_t tag;
};
struct Buf {
  tether_buffer_t* h;
  int res;  // the resource index, or -1 for the table's default host resource
  int refs;
  tether_resource_t* from;  // the resource it retains
  std::vector<uint8_t> bytes;
};

constexpr int kMaxRes = 12, kMaxRaw = 32, kMaxBuf = 12, kMaxStale = 32, kMaxPush = 8;
constexpr size_t kMaxBufSize = 4096;

struct Model {
  std::vector<Res> res;
  std::vector<Raw> raw;
  std::vector<Buf> buf;
  std::vector<void*> stale_res, stale_buf;
  int slot = -1;          // resource set in the host slot, -1: unset
  bool default_exists = true;  // the table holds its lazily created default host resource
  tether_resource_t* default_h = nullptr;  // its handle then
  std::vector<int> push;  // this thread's override stack for the host slot
};
Model g;
size_t g_base_res, g_base_buf, g_base_orphans;
uint8_t g_static_block[256];

// Model resources alive, plus the defaults alive: the table's, and any older
// ones that buffers made from the default still retain.
int live_resources() {
  int n = 0;
  for (auto& r : g.res) n += r.alive;
  std::vector<tether_resource_t*> defaults;
  if (g.default_exists) defaults.push_back(g.default_h);
  for (auto& b : g.buf) {
    if (b.refs > 0 && b.res < 0) {
      bool seen = false;
      for (auto* d : defaults) seen |= d == b.from;
      if (!seen) defaults.push_back(b.from);
    }
  }
  return n + static_cast<int>(defaults.size());
}
int live_buffers() {
  int n = 0;
  for (auto& b : g.buf) n += b.refs > 0;
  return n;
}
void check_census() {
  if (g_trace)
    std::fprintf(stderr, "  census: resources %zu (model: base %zu - 1 + default %d, live %d), buffers %zu (model %zu + %d)\n",
                 tether_debug_live_objects(TETHER_OBJECT_RESOURCE), g_base_res, g.default_exists ? 1 : 0,
                 live_resources(), tether_debug_live_objects(TETHER_OBJECT_BUFFER), g_base_buf, live_buffers());
  FUZZ_CHECK(tether_debug_live_objects(TETHER_OBJECT_RESOURCE) ==
             g_base_res - 1 + static_cast<size_t>(live_resources()));
  FUZZ_CHECK(tether_debug_live_objects(TETHER_OBJECT_BUFFER) == g_base_buf + static_cast<size_t>(live_buffers()));
  FUZZ_CHECK(tether_debug_orphaned_resources() == g_base_orphans);
}

// Pick a live resource (the byte chooses among them), -1 if none.
int pick_res(uint8_t b) {
  std::vector<int> live;
  for (int i = 0; i < static_cast<int>(g.res.size()); ++i)
    if (g.res[i].alive) live.push_back(i);
  if (live.empty()) return -1;
  return live[b % live.size()];
}
int pick_buf(uint8_t b) {
  std::vector<int> live;
  for (int i = 0; i < static_cast<int>(g.buf.size()); ++i)
    if (g.buf[i].refs > 0) live.push_back(i);
  if (live.empty()) return -1;
  return live[b % live.size()];
}

size_t size_from(uint16_t v) {
  switch (v >> 14) {
    case 0: return v & 0xff;          // small
    case 1: return (v & 0x3fff) * 4;  // up to 64 KiB
    case 2: return v & 0x3fff;
    default: return (v & 1) ? (size_t{1} << 20) + (v & 0x3ffe) : SIZE_MAX - (v & 0xff);  // large / impossible
  }
}
size_t align_from(uint8_t b) {
  if (b >= 248) {
    static const size_t bad[] = {3, 24, 100, 257, 1000, 6, 12, 48};
    return bad[b & 7];
  }
  unsigned k = b % 16;
  return k == 0 ? 0 : size_t{1} << (k - 1);  // 0 (the default) or 1 .. 16384
}
bool pow2_or_zero(size_t a) { return (a & (a - 1)) == 0; }

// Raw memory gets a tag in its first and last byte: a second hand-out of live
// memory, or a write into it behind the caller's back, shows at the free.
void tag_raw(const Raw& r) {
  auto* b = static_cast<uint8_t*>(r.ptr);
  b[r.size - 1] = static_cast<uint8_t>(r.tag ^ 0x5a);
  b[0] = r.tag;
}
void check_tag(const Raw& r) {
  auto* b = static_cast<const uint8_t*>(r.ptr);
  FUZZ_CHECK(b[0] == r.tag);
  FUZZ_CHECK(r.size == 1 || b[r.size - 1] == static_cast<uint8_t>(r.tag ^ 0x5a));
}

// Counters of every statistics adaptor from `i` down its chain.
void stats_add(int i, int64_t bytes, int64_t count) {
  for (; i >= 0; i = g.res[i].upstream) {
    if (g.res[i].kind == kStats) {
      g.res[i].cur_bytes += static_cast<uint64_t>(bytes);
      g.res[i].cur_count += static_cast<uint64_t>(count);
    }
  }
}

void free_raw_at(size_t k) {
  Raw r = g.raw[k];
  check_tag(r);
  EXPECT_STATUS(TETHER_OK, tether_resource_deallocate(g.res[r.res].h, r.ptr, r.size, r.align, 0));
  stats_add(r.res, -static_cast<int64_t>(r.size), -1);
  g.raw.erase(g.raw.begin() + static_cast<long>(k));
}

// Before a call drops one reference to resource i: free the raw allocations of
// every resource whose handle it will make stale (the orphan rule is tested
// elsewhere; here no memory may outlive its input).
void before_drop(int i) {
  for (int x = i; x >= 0; x = g.res[x].upstream) {
    if (g.res[x].caller + g.res[x].deps - 1 > 0) break;
    for (size_t k = g.raw.size(); k-- > 0;)
      if (g.raw[k].res == x) free_raw_at(k);
  }
}
// After the call dropped it: the model's side of the same release.
void after_drop(int i, bool caller) {
  if (caller) --g.res[i].caller;
  else --g.res[i].deps;
  while (i >= 0 && g.res[i].alive && g.res[i].caller + g.res[i].deps == 0) {
    g.res[i].alive = false;
    if (static_cast<int>(g.stale_res.size()) < kMaxStale) g.stale_res.push_back(g.res[i].h);
    i = g.res[i].upstream;
    if (i >= 0) --g.res[i].deps;
  }
}

// The handle the table answers for the host slot now, as the model sees it;
// nullptr means "the default" (not a model resource).
tether_resource_t* model_current() {
  if (!g.push.empty()) return g.res[g.push.back()].h;
  if (g.slot >= 0) return g.res[g.slot].h;
  return nullptr;
}

bool is_model_handle(const void* h) {
  for (auto& r : g.res)
    if (r.alive && r.h == h) return true;
  for (auto& b : g.buf)
    if (b.refs > 0 && b.h == h) return true;
  return false;
}

// ---- ops ---------------------------------------------------------------------------
void op_create(Input& in, Kind kind) {
  if (static_cast<int>(g.res.size()) >= kMaxRes) {
    // Forget the oldest dead entry, so long inputs keep creating.
    for (size_t i = 0; i < g.res.size(); ++i) {
      bool referenced = false;
      for (auto& r : g.res) referenced |= r.upstream == static_cast<int>(i);
      for (auto& b : g.buf) referenced |= b.res == static_cast<int>(i);
      if (!g.res[i].alive && !referenced) {
        // Indices shift: fix every reference above i.
        g.res.erase(g.res.begin() + static_cast<long>(i));
        for (auto& r : g.res)
          if (r.upstream > static_cast<int>(i)) --r.upstream;
        for (auto& b : g.buf)
          if (b.res > static_cast<int>(i)) --b.res;
        for (auto& w : g.raw)
          if (w.res > static_cast<int>(i)) --w.res;
        for (auto& p : g.push)
          if (p > static_cast<int>(i)) --p;
        if (g.slot > static_cast<int>(i)) --g.slot;
        break;
      }
    }
    if (static_cast<int>(g.res.size()) >= kMaxRes) return;
  }
  Res r;
  r.kind = kind;
  tether_resource_t* h = nullptr;
  if (kind == kHost) {
    EXPECT_STATUS(TETHER_OK, tether_host_resource_create(&h));
  } else {
    int up = pick_res(in.u8());
    if (up < 0) return;
    r.upstream = up;
    r.limited = g.res[up].limited;
    if (kind == kStats) {
      EXPECT_STATUS(TETHER_OK, tether_statistics_adaptor_create(g.res[up].h, &h));
    } else {
      tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
      uint8_t b = in.u8();
      o.initial_size = (b & 3) ? size_t{in.u8()} * 1024 : 0;
      o.maximum_size = (b & 12) == 4 ? size_t{in.u16()} * 64 : 0;  // sometimes < 256, sometimes 0
      o.growth_size = (b & 48) ? size_t{in.u8()} * 4096 : 0;
      const bool opts = !(b & 64);
      if (opts && o.maximum_size != 0) r.limited = true;
      tether_status_t s = tether_pool_resource_create(g.res[up].h, opts ? &o : nullptr, &h);
      // Refused at creation: an initial size above the maximum, and a maximum below one
      // 256-byte granule (such a pool could never allocate).
      if (opts && o.maximum_size != 0 && (o.initial_size > o.maximum_size || o.maximum_size < 256)) {
        FUZZ_CHECK(s == TETHER_ERROR_INVALID_ARGUMENT && h == nullptr);
        return;
      }
      if (s == TETHER_ERROR_OUT_OF_MEMORY && g.res[up].limited && opts && o.initial_size > 0) {
        FUZZ_CHECK(h == nullptr);
        return;
      }
      EXPECT_STATUS(TETHER_OK, s);
      r.chunk_sizes[0] = opts ? o.initial_size : 0;
      r.chunk_sizes[1] = opts && o.growth_size ? o.growth_size : size_t{1} << 20;
      // The pool's chunks pass through every adaptor below it: their counters
      // are no longer the model's to predict.
      for (int x = up; x >= 0; x = g.res[x].upstream) g.res[x].stats_exact = false;
    }
    ++g.res[up].deps;
  }
  FUZZ_CHECK(h != nullptr && !is_model_handle(h));
  r.h = h;
  r.caller = 1;
  r.alive = true;
  g.res.push_back(r);
}

void op_retain(Input& in) {
  int i = pick_res(in.u8());
  if (i < 0 || g.res[i].caller > 8) return;
  EXPECT_STATUS(TETHER_OK, tether_resource_retain(g.res[i].h));
  ++g.res[i].caller;
}

void op_release(Input& in) {
  int i = pick_res(in.u8());
  if (i < 0 || g.res[i].caller == 0) return;
  before_drop(i);
  EXPECT_STATUS(TETHER_OK, tether_resource_release(g.res[i].h));
  after_drop(i, true);
}

void op_alloc(Input& in) {
  int i = pick_res(in.u8());
  size_t size = size_from(in.u16());
  size_t align = align_from(in.u8());
  uint8_t tag = in.u8();
  if (i < 0) return;
  void* p = reinterpret_cast<void*>(1);
  tether_status_t s = tether_resource_allocate(g.res[i].h, size, align, 0, &p);
  if (!pow2_or_zero(align)) {
    EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, s);
    return;
  }
  if (size > (size_t{1} << 40)) {
    EXPECT_STATUS(TETHER_ERROR_OUT_OF_MEMORY, s);
    FUZZ_CHECK(p == nullptr);
    return;
  }
  if (s == TETHER_ERROR_OUT_OF_MEMORY && g.res[i].limited) {
    FUZZ_CHECK(p == nullptr);
    return;
  }
  EXPECT_STATUS(TETHER_OK, s);
  if (size == 0) {
    FUZZ_CHECK(p == nullptr);
    return;
  }
  FUZZ_CHECK(p != nullptr);
  size_t eff = align == 0 ? TETHER_DEFAULT_ALIGNMENT : align;
  FUZZ_CHECK(reinterpret_cast<uintptr_t>(p) % eff == 0);
  Raw r{p, size, align, i, tag};
  tag_raw(r);
  stats_add(i, static_cast<int64_t>(size), 1);
  if (static_cast<int>(g.raw.size()) >= kMaxRaw) {
    // Keep the model small: give back the oldest first.
    free_raw_at(0);
  }
  g.raw.push_back(r);
}

void op_free(Input& in) {
  uint8_t b = in.u8();
  if (g.raw.empty()) return;
  free_raw_at(b % g.raw.size());
}

void op_buf_create(Input& in) {
  uint8_t b = in.u8();
  size_t size = in.u16() % (kMaxBufSize + 1);
  if (live_buffers() >= kMaxBuf) return;
  int i = (b & 1) ? pick_res(b >> 1) : -1;
  tether_buffer_t* h = nullptr;
  const bool explicit_res = i >= 0;
  if (!explicit_res) {
    // NULL: the current resource of the host slot.
    if (!g.push.empty()) i = g.push.back();
    else if (g.slot >= 0) i = g.slot;
    else g.default_exists = true;
  }
  tether_status_t s = tether_buffer_create(explicit_res ? g.res[i].h : nullptr, TETHER_DEVICE_HOST, size, 0, &h);
  if (s == TETHER_ERROR_OUT_OF_MEMORY && i >= 0 && g.res[i].limited) {
    FUZZ_CHECK(h == nullptr);
    return;
  }
  EXPECT_STATUS(TETHER_OK, s);
  FUZZ_CHECK(h != nullptr && !is_model_handle(h));
  tether_resource_t* from = nullptr;
  EXPECT_STATUS(TETHER_OK, tether_buffer_get_resource(h, &from));
  if (i < 0) {
    FUZZ_CHECK(from != nullptr && !is_model_handle(from));
    g.default_h = from;
  } else {
    FUZZ_CHECK(from == g.res[i].h);
    ++g.res[i].deps;
    stats_add(i, static_cast<int64_t>(size), size ? 1 : 0);
  }
  size_t got = 1;
  EXPECT_STATUS(TETHER_OK, tether_buffer_get_size(h, &got));
  FUZZ_CHECK(got == size);
  // Fresh memory has no promised contents: write a known pattern.
  Buf nb{h, i, 1, from, std::vector<uint8_t>(size)};
  for (size_t k = 0; k < size; ++k) nb.bytes[k] = static_cast<uint8_t>(k * 7 + b);
  if (size) EXPECT_STATUS(TETHER_OK, tether_buffer_copy_from_host(h, 0, nb.bytes.data(), size));
  g.buf.push_back(std::move(nb));
}

void buf_drop(int k) {
  Buf& b = g.buf[k];
  if (b.refs == 1 && b.res >= 0) before_drop(b.res);
  EXPECT_STATUS(TETHER_OK, tether_buffer_release(b.h));
  if (--b.refs == 0) {
    if (b.res >= 0) {
      stats_add(b.res, -static_cast<int64_t>(b.bytes.size()), b.bytes.empty() ? 0 : -1);
      after_drop(b.res, false);
    }
    if (static_cast<int>(g.stale_buf.size()) < kMaxStale) g.stale_buf.push_back(b.h);
    g.buf.erase(g.buf.begin() + k);
  }
}

void op_buf_ref(Input& in) {
  uint8_t b = in.u8();
  int k = pick_buf(b >> 1);
  if (k < 0) return;
  if ((b & 1) && g.buf[k].refs < 8) {
    EXPECT_STATUS(TETHER_OK, tether_buffer_retain(g.buf[k].h));
    ++g.buf[k].refs;
  } else {
    buf_drop(k);
  }
}

void op_buf_resize(Input& in) {
  int k = pick_buf(in.u8());
  size_t size = in.u16() % (kMaxBufSize + 1);
  if (k < 0) return;
  Buf& b = g.buf[k];
  tether_status_t s = tether_buffer_resize(b.h, size);
  if (s == TETHER_ERROR_OUT_OF_MEMORY && b.res >= 0 && g.res[b.res].limited) return;  // unchanged
  EXPECT_STATUS(TETHER_OK, s);
  if (b.res >= 0) {
    stats_add(b.res, static_cast<int64_t>(size) - static_cast<int64_t>(b.bytes.size()),
              (size ? 1 : 0) - (b.bytes.empty() ? 0 : 1));
  }
  size_t old = b.bytes.size();
  b.bytes.resize(size);
  // Bytes past the old size are unspecified: make them known.
  if (size > old) {
    for (size_t x = old; x < size; ++x) b.bytes[x] = static_cast<uint8_t>(x);
    EXPECT_STATUS(TETHER_OK, tether_buffer_copy_from_host(b.h, old, b.bytes.data() + old, size - old));
  }
  size_t got = 1;
  EXPECT_STATUS(TETHER_OK, tether_buffer_get_size(b.h, &got));
  FUZZ_CHECK(got == size);
}

void op_buf_write(Input& in) {
  int k = pick_buf(in.u8());
  size_t off = in.u16() % (kMaxBufSize + 64);
  size_t len = in.u8();
  uint8_t fill = in.u8();
  if (k < 0) return;
  Buf& b = g.buf[k];
  std::vector<uint8_t> src(len, fill);
  tether_status_t s = tether_buffer_copy_from_host(b.h, off, src.data(), len);
  if (off > b.bytes.size() || len > b.bytes.size() - off) {
    EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, s);
    return;
  }
  EXPECT_STATUS(TETHER_OK, s);
  if (len) std::memset(b.bytes.data() + off, fill, len);
}

void op_buf_read(Input& in) {
  int k = pick_buf(in.u8());
  size_t off = in.u16() % (kMaxBufSize + 64);
  size_t len = in.u16() % (kMaxBufSize + 64);
  if (k < 0) return;
  Buf& b = g.buf[k];
  std::vector<uint8_t> dst(len + 1, 0xee);
  tether_status_t s = tether_buffer_copy_to_host(b.h, off, dst.data(), len);
  if (off > b.bytes.size() || len > b.bytes.size() - off) {
    EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, s);
    FUZZ_CHECK(dst[0] == 0xee);  // nothing written
    return;
  }
  EXPECT_STATUS(TETHER_OK, s);
  FUZZ_CHECK(len == 0 || std::memcmp(dst.data(), b.bytes.data() + off, len) == 0);
  FUZZ_CHECK(dst[len] == 0xee);
}

void op_buf_copy(Input& in) {
  int d = pick_buf(in.u8());
  int s = pick_buf(in.u8());
  size_t doff = in.u16() % (kMaxBufSize + 64);
  size_t soff = in.u16() % (kMaxBufSize + 64);
  size_t len = in.u16() % (kMaxBufSize + 64);
  if (d < 0 || s < 0) return;
  Buf& bd = g.buf[d];
  Buf& bs = g.buf[s];
  tether_status_t st = tether_buffer_copy(bd.h, doff, bs.h, soff, len);
  if (doff > bd.bytes.size() || len > bd.bytes.size() - doff || soff > bs.bytes.size() ||
      len > bs.bytes.size() - soff) {
    EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, st);
    return;
  }
  EXPECT_STATUS(TETHER_OK, st);
  if (len) std::memmove(bd.bytes.data() + doff, bs.bytes.data() + soff, len);  // overlap: memmove's rule
}

void op_table_get(Input&) {
  tether_resource_t* h = nullptr;
  EXPECT_STATUS(TETHER_OK, tether_current_resource_get(TETHER_DEVICE_HOST, &h));
  FUZZ_CHECK(h != nullptr);
  tether_resource_t* want = model_current();
  if (want) {
    FUZZ_CHECK(h == want);
  } else {
    FUZZ_CHECK(!is_model_handle(h));
    FUZZ_CHECK(!g.default_exists || h == g.default_h);
    g.default_exists = true;
    g.default_h = h;
  }
  EXPECT_STATUS(TETHER_OK, tether_resource_release(h));
}

void op_table_set(Input& in) {
  uint8_t b = in.u8();
  int i = (b & 1) ? pick_res(b >> 1) : -1;
  tether_resource_t* prev = reinterpret_cast<tether_resource_t*>(1);
  const bool want_prev = b & 2;
  if (g.slot >= 0 && !want_prev) before_drop(g.slot);  // the call releases the table's reference
  EXPECT_STATUS(TETHER_OK, tether_current_resource_set(TETHER_DEVICE_HOST, i >= 0 ? g.res[i].h : nullptr,
                                                       want_prev ? &prev : nullptr));
  if (i >= 0) ++g.res[i].deps;
  const int old = g.slot;
  g.slot = i;
  if (old < 0) {
    // A slot nobody set: the lazily created default, if there is one, is what
    // was installed, and is handed back (+1) or released. (The header's
    // "*out_previous is NULL if the slot was unset" holds only while no default
    // was created.)
    if (want_prev) {
      if (g.default_exists) {
        FUZZ_CHECK(prev == g.default_h);
        EXPECT_STATUS(TETHER_OK, tether_resource_release(prev));
      } else {
        FUZZ_CHECK(prev == nullptr);
      }
    }
    g.default_exists = false;
    return;
  }
  if (want_prev) {
    FUZZ_CHECK(prev == g.res[old].h);
    // The table's reference is now the fuzzer's.
    --g.res[old].deps;
    ++g.res[old].caller;
  } else {
    // Released by the call: the model follows (memory of what it made stale was
    // freed first only if the table held the last reference - see before_drop).
    after_drop(old, false);
  }
}

void op_table_set_if_unset(Input& in) {
  int i = pick_res(in.u8());
  if (i < 0) return;
  int installed = -1;
  EXPECT_STATUS(TETHER_OK, tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, g.res[i].h, &installed));
  if (g.slot >= 0) {
    FUZZ_CHECK(installed == 0);
    return;
  }
  FUZZ_CHECK(installed == 1);
  g.slot = i;
  ++g.res[i].deps;
  g.default_exists = false;
}

void op_table_push(Input& in) {
  int i = pick_res(in.u8());
  if (i < 0 || static_cast<int>(g.push.size()) >= kMaxPush) return;
  EXPECT_STATUS(TETHER_OK, tether_current_resource_push(TETHER_DEVICE_HOST, g.res[i].h));
  g.push.push_back(i);
  ++g.res[i].deps;
}

void op_table_pop(Input&) {
  if (g.push.empty()) {
    EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_pop(TETHER_DEVICE_HOST));
    return;
  }
  int i = g.push.back();
  before_drop(i);
  EXPECT_STATUS(TETHER_OK, tether_current_resource_pop(TETHER_DEVICE_HOST));
  g.push.pop_back();
  after_drop(i, false);
}

// Locking is for the life of the process: check the locked slot in a child.
void op_table_lock(Input& in) {
  if (in.u8() != 0x4c) return;  // 'L': rare on purpose (a fork per lock)
  int i = pick_res(in.u8());
  std::fflush(nullptr);
  pid_t pid = fork();
  FUZZ_CHECK(pid >= 0);
  if (pid == 0) {
    int locked = -1;
    bool ok = tether_current_resource_lock(TETHER_DEVICE_HOST) == TETHER_OK &&
              tether_current_resource_is_locked(TETHER_DEVICE_HOST, &locked) == TETHER_OK && locked == 1;
    if (i >= 0) {
      int installed = -1;
      ok = ok && tether_current_resource_set(TETHER_DEVICE_HOST, g.res[i].h, nullptr) == TETHER_ERROR_LOCKED;
      ok = ok && tether_current_resource_push(TETHER_DEVICE_HOST, g.res[i].h) == TETHER_ERROR_LOCKED;
      ok = ok && tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, g.res[i].h, &installed) == TETHER_OK &&
           installed == 0;
    }
    tether_resource_t* h = nullptr;
    ok = ok && tether_current_resource_get(TETHER_DEVICE_HOST, &h) == TETHER_OK;
    tether_resource_t* want = model_current();
    ok = ok && (want ? h == want : h != nullptr);
    tether_resource_release(h);
    // Overrides pushed before the lock may still be popped.
    for (size_t k = 0; ok && k < g.push.size(); ++k) ok = tether_current_resource_pop(TETHER_DEVICE_HOST) == TETHER_OK;
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
  }  // libFuzzer's -timeout ticks with SIGALRM
  FUZZ_CHECK(w == pid);
  FUZZ_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  int locked = -1;
  EXPECT_STATUS(TETHER_OK, tether_current_resource_is_locked(TETHER_DEVICE_HOST, &locked));
  FUZZ_CHECK(locked == 0);
}

void op_query(Input& in) {
  int i = pick_res(in.u8());
  if (i < 0) {
    check_census();
    return;
  }
  Res& r = g.res[i];
  tether_resource_properties_t pr = TETHER_RESOURCE_PROPERTIES_INIT;
  EXPECT_STATUS(TETHER_OK, tether_resource_get_properties(r.h, &pr));
  const uint32_t kind = r.kind == kHost ? TETHER_RESOURCE_KIND_HOST
                        : r.kind == kPool ? TETHER_RESOURCE_KIND_POOL
                                          : TETHER_RESOURCE_KIND_STATISTICS;
  FUZZ_CHECK(pr.kind == kind && pr.device == TETHER_DEVICE_HOST && pr.host_accessible);
  tether_resource_t* up = reinterpret_cast<tether_resource_t*>(1);
  EXPECT_STATUS(TETHER_OK, tether_resource_get_upstream(r.h, &up));
  FUZZ_CHECK(up == (r.upstream >= 0 ? g.res[r.upstream].h : nullptr));
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  tether_status_t st = tether_resource_get_statistics(r.h, &s);
  if (r.kind == kStats) {
    EXPECT_STATUS(TETHER_OK, st);
    FUZZ_CHECK(s.peak_bytes >= s.current_bytes && s.total_bytes >= s.current_bytes);
    FUZZ_CHECK(s.peak_count >= s.current_count && s.total_count >= s.current_count);
    if (r.stats_exact) FUZZ_CHECK(s.current_bytes == r.cur_bytes && s.current_count == r.cur_count);
  } else {
    EXPECT_STATUS(TETHER_ERROR_NOT_SUPPORTED, st);
  }
  tether_pool_info_t pi = TETHER_POOL_INFO_INIT;
  st = tether_resource_get_pool_info(r.h, &pi);
  if (r.kind == kPool) {
    EXPECT_STATUS(TETHER_OK, st);
    FUZZ_CHECK(pi.free_bytes <= pi.pool_size && pi.largest_free_block <= pi.free_bytes);
  } else {
    EXPECT_STATUS(TETHER_ERROR_NOT_SUPPORTED, st);
  }
  if (in.u8() & 1) EXPECT_STATUS(TETHER_OK, tether_resource_trim(r.h));
  check_census();
}

// ---- hostile ops ------------------------------------------------------------------
void op_forged(Input& in) {
  if (!(g_hostile & kForged)) return;
  uint8_t how = in.u8();
  uint64_t bits = in.u64();
  struct {
    uint64_t words[8];
  } fake = {{bits, bits, bits, bits, bits, bits, bits, bits}};
  void* v;
  switch (how % 4) {
    case 0: v = reinterpret_cast<void*>(static_cast<uintptr_t>(bits)); break;
    case 1: v = &fake; break;
    case 2: v = g_static_block + (bits % 64) * 4; break;
    default: {
      // A live handle of the other type.
      int k = pick_buf(static_cast<uint8_t>(bits));
      int i = pick_res(static_cast<uint8_t>(bits));
      v = (how & 4) ? (k >= 0 ? static_cast<void*>(g.buf[k].h) : nullptr)
                    : (i >= 0 ? static_cast<void*>(g.res[i].h) : nullptr);
      if (!v) return;
      if (how & 4) break;  // a buffer used as a resource
      // a resource used as a buffer
      auto* fb = static_cast<tether_buffer_t*>(v);
      size_t sz;
      EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_retain(fb));
      EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_size(fb, &sz));
      EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release(fb));
      return;
    }
  }
  if (v == nullptr || (how % 4 != 3 && is_model_handle(v))) return;
  tether_resource_t* cur = nullptr;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &cur) == TETHER_OK) {
    if (model_current() == nullptr) {
      g.default_exists = true;
      g.default_h = cur;
    }
    tether_resource_release(cur);
    if (cur == v) return;  // guessed the default's handle: not forged
  }
  auto* fr = static_cast<tether_resource_t*>(v);
  auto* fb = static_cast<tether_buffer_t*>(v);
  void* p = nullptr;
  tether_buffer_t* nb = nullptr;
  tether_resource_t* out = nullptr;
  switch ((how >> 3) % 8) {
    case 0: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(fr)); break;
    case 1: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(fr)); break;
    case 2: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_allocate(fr, 64, 0, 0, &p)); break;
    case 3: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_deallocate(fr, g_static_block, 64, 0, 0)); break;
    case 4: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_create(fr, TETHER_DEVICE_HOST, 64, 0, &nb)); break;
    case 5: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_current_resource_set(TETHER_DEVICE_HOST, fr, nullptr)); break;
    case 6: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_pool_resource_create(fr, nullptr, &out)); break;
    default:
      if (how % 4 == 3) {
        EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(fr));
      } else {
        EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_retain(fb));
        EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release(fb));
      }
  }
  FUZZ_CHECK(nb == nullptr && out == nullptr);
}

void op_stale(Input& in) {
  if (!(g_hostile & kStale)) return;
  uint8_t how = in.u8();
  uint8_t k = in.u8();
  void* p = nullptr;
  if ((how & 1) && !g.stale_buf.empty()) {
    auto* b = static_cast<tether_buffer_t*>(g.stale_buf[k % g.stale_buf.size()]);
    if (is_model_handle(b)) return;
    size_t sz;
    switch ((how >> 1) % 4) {
      case 0: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release(b)); break;  // double release
      case 1: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_retain(b)); break;
      case 2: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_size(b, &sz)); break;
      default: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_resize(b, 16)); break;
    }
    return;
  }
  if (g.stale_res.empty()) return;
  auto* r = static_cast<tether_resource_t*>(g.stale_res[k % g.stale_res.size()]);
  if (is_model_handle(r)) return;
  tether_buffer_t* nb = nullptr;
  switch ((how >> 1) % 5) {
    case 0: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(r)); break;  // double release
    case 1: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(r)); break;
    case 2: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_allocate(r, 64, 0, 0, &p)); break;
    case 3: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_current_resource_push(TETHER_DEVICE_HOST, r)); break;
    default: EXPECT_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_create(r, TETHER_DEVICE_HOST, 8, 0, &nb)); break;
  }
  FUZZ_CHECK(nb == nullptr && p == nullptr);
}

void op_foreign(Input& in) {
  if (!(g_hostile & kForeign)) return;
  int i = pick_res(in.u8());
  uint8_t how = in.u8();
  size_t size = size_from(in.u16()) % 65536 + 1;
  size_t align = align_from(in.u8() % 248);
  if (i < 0) return;
  uint8_t stack_block[512];
  void* heap = nullptr;
  void* p;
  switch (how % 6) {
    case 0: p = g_static_block + 64; break;
    case 1: p = stack_block + 256; break;
    case 2: p = heap = std::malloc(size + 64); break;
    case 3: p = reinterpret_cast<void*>(uintptr_t{4096} * (1 + how)); break;
    case 4: {
      // Inside a live raw allocation (not its start).
      if (g.raw.empty()) return;
      const Raw& r = g.raw[how % g.raw.size()];
      if (r.size < 2) return;
      p = static_cast<uint8_t*>(r.ptr) + 1 + (how % (r.size - 1));
      break;
    }
    default: p = reinterpret_cast<void*>(~uintptr_t{0} << 12); break;
  }
  EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(g.res[i].h, p, size, align, 0));
  std::free(heap);
  for (auto& r : g.raw) check_tag(r);
}

void op_double(Input& in) {
  if (!(g_hostile & kDouble)) return;
  uint8_t b = in.u8();
  if (g.raw.empty()) return;
  Raw r = g.raw[b % g.raw.size()];
  free_raw_at(b % g.raw.size());
  EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(g.res[r.res].h, r.ptr, r.size, r.align, 0));
}

// Memory of resource A given to resource B: always INVALID_ARGUMENT, and the
// memory stays A's, untouched (equal resources included).
void op_cross(Input& in) {
  uint8_t b = in.u8();
  int j = pick_res(in.u8());
  if (g.raw.empty() || j < 0) return;
  size_t k = b % g.raw.size();
  Raw r = g.raw[k];
  if (r.res == j) return;
  bool below = false;  // B is in A's upstream chain with a pool in between or at A
  bool pool_seen = false;
  for (int x = r.res; x >= 0; x = g.res[x].upstream) {
    if (x == j) {
      below = pool_seen;
      break;
    }
    pool_seen |= g.res[x].kind == kPool;
  }
  if (!(g_hostile & (below ? kUpstream : kCross))) return;
  if (below) {
    // A pool's memory given to a resource below it, also with the size of the
    // pool's chunks (the first block of a fresh chunk starts where the chunk does).
    for (int x = r.res; x != j; x = g.res[x].upstream) {
      for (size_t cs : g.res[x].chunk_sizes) {
        if (cs != 0 && cs != r.size) {
          EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(g.res[j].h, r.ptr, cs, 0, 0));
        }
      }
    }
  }
  // The rule (docs/ownership.rst): a resource accepts only memory it handed out
  // itself - not an equal resource's (equality is for comparison only), not an
  // adaptor's or a dependent's. The memory stays untouched and stays A's.
  int eq = -1;
  EXPECT_STATUS(TETHER_OK, tether_resource_is_equal(g.res[r.res].h, g.res[j].h, &eq));
  EXPECT_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(g.res[j].h, r.ptr, r.size, r.align, 0));
  check_tag(r);
}

// A resource spec assembled from tokens (a byte with the high bit set is itself a
// character): tether_resource_create_from_spec() either builds the stack -
// whose spec then rebuilds an identical one - or fails with a status a spec may
// give; whatever it built is released again and the census is unchanged.
void op_spec(Input& in) {
  static const char* const kTokens[] = {
      "pool(", "statistics(", "host", "cuda(", "async(", "managed(", "pinned_host(", ")", ",", "(", "=",
      "initial_size=", "maximum_size=", "growth_size=", "upstream=", "device=", "initial_pool_size=",
      "use_default_pool=", "64MiB", "1GiB", "4096", "1.5", "%", "KiB", "true", "'", "\"", " ", "0", "1", "x"};
  constexpr unsigned kTokenCount = sizeof kTokens / sizeof kTokens[0];
  std::string spec;
  const unsigned n = in.u8() % 48;
  for (unsigned i = 0; i < n && !in.empty(); ++i) {
    const uint8_t b = in.u8();
    if (b & 0x80) spec += static_cast<char>(b & 0x7f ? b & 0x7f : ' ');
    else spec += kTokens[b % kTokenCount];
  }
  const size_t before = tether_debug_live_objects(TETHER_OBJECT_RESOURCE);
  tether_resource_t* r = reinterpret_cast<tether_resource_t*>(&r);
  const tether_status_t st = tether_resource_create_from_spec(spec.c_str(), &r);
  if (st != TETHER_OK) {
    FUZZ_CHECK(r == nullptr);
    FUZZ_CHECK(st == TETHER_ERROR_INVALID_ARGUMENT || st == TETHER_ERROR_OUT_OF_MEMORY ||
               st == TETHER_ERROR_NO_DEVICE || st == TETHER_ERROR_NOT_SUPPORTED);
    FUZZ_CHECK(std::strlen(tether_last_error_message()) > 0);
  } else {
    size_t len = 0;
    EXPECT_STATUS(TETHER_OK, tether_resource_get_spec(r, nullptr, 0, &len));
    std::vector<char> first(len + 1), second(len + 1);
    EXPECT_STATUS(TETHER_OK, tether_resource_get_spec(r, first.data(), first.size(), &len));
    tether_resource_t* again = nullptr;
    EXPECT_STATUS(TETHER_OK, tether_resource_create_from_spec(first.data(), &again));
    size_t len2 = 0;
    EXPECT_STATUS(TETHER_OK, tether_resource_get_spec(again, second.data(), second.size(), &len2));
    FUZZ_CHECK(len2 == len && std::memcmp(first.data(), second.data(), len) == 0);
    EXPECT_STATUS(TETHER_OK, tether_resource_release(again));
    EXPECT_STATUS(TETHER_OK, tether_resource_release(r));
  }
  FUZZ_CHECK(tether_debug_live_objects(TETHER_OBJECT_RESOURCE) == before);
}

// ---- one input ---------------------------------------------------------------------
enum Op {
  OP_HOST, OP_POOL, OP_STATS, OP_RETAIN, OP_RELEASE, OP_ALLOC, OP_FREE, OP_BUF_CREATE, OP_BUF_REF,
  OP_BUF_RESIZE, OP_BUF_WRITE, OP_BUF_READ, OP_BUF_COPY, OP_GET, OP_SET, OP_SET_IF_UNSET, OP_PUSH,
  OP_POP, OP_LOCK, OP_QUERY, OP_FORGED, OP_STALE, OP_FOREIGN, OP_DOUBLE, OP_CROSS, OP_SPEC, kOpCount
};

void run_op(uint8_t op, Input& in) {
  if (g_trace) std::fprintf(stderr, "op %d (%zu bytes left)\n", op % kOpCount, in.n);
  switch (op % kOpCount) {
    case OP_HOST: op_create(in, kHost); break;
    case OP_POOL: op_create(in, kPool); break;
    case OP_STATS: op_create(in, kStats); break;
    case OP_RETAIN: op_retain(in); break;
    case OP_RELEASE: op_release(in); break;
    case OP_ALLOC: op_alloc(in); break;
    case OP_FREE: op_free(in); break;
    case OP_BUF_CREATE: op_buf_create(in); break;
    case OP_BUF_REF: op_buf_ref(in); break;
    case OP_BUF_RESIZE: op_buf_resize(in); break;
    case OP_BUF_WRITE: op_buf_write(in); break;
    case OP_BUF_READ: op_buf_read(in); break;
    case OP_BUF_COPY: op_buf_copy(in); break;
    case OP_GET: op_table_get(in); break;
    case OP_SET: op_table_set(in); break;
    case OP_SET_IF_UNSET: op_table_set_if_unset(in); break;
    case OP_PUSH: op_table_push(in); break;
    case OP_POP: op_table_pop(in); break;
    case OP_LOCK: op_table_lock(in); break;
    case OP_QUERY: op_query(in); break;
    case OP_FORGED: op_forged(in); break;
    case OP_STALE: op_stale(in); break;
    case OP_FOREIGN: op_foreign(in); break;
    case OP_DOUBLE: op_double(in); break;
    case OP_CROSS: op_cross(in); break;
    default: op_spec(in); break;
  }
}

// Give everything back, in an order the input chose, and check the census.
void teardown() {
  while (!g.push.empty()) {
    int i = g.push.back();
    before_drop(i);
    EXPECT_STATUS(TETHER_OK, tether_current_resource_pop(TETHER_DEVICE_HOST));
    g.push.pop_back();
    after_drop(i, false);
  }
  if (g.slot >= 0) {
    int old = g.slot;
    before_drop(old);
    EXPECT_STATUS(TETHER_OK, tether_current_resource_set(TETHER_DEVICE_HOST, nullptr, nullptr));
    g.slot = -1;
    after_drop(old, false);
  }
  while (!g.raw.empty()) free_raw_at(g.raw.size() - 1);
  while (!g.buf.empty()) {
    while (!g.buf.empty() && g.buf.back().refs > 0) buf_drop(static_cast<int>(g.buf.size()) - 1);
  }
  for (int i = 0; i < static_cast<int>(g.res.size()); ++i) {
    while (g.res[i].caller > 0) {
      before_drop(i);
      EXPECT_STATUS(TETHER_OK, tether_resource_release(g.res[i].h));
      after_drop(i, true);
    }
  }
  for (auto& r : g.res) FUZZ_CHECK(!r.alive);
  // The default host resource exists again after a get.
  tether_resource_t* h = nullptr;
  EXPECT_STATUS(TETHER_OK, tether_current_resource_get(TETHER_DEVICE_HOST, &h));
  EXPECT_STATUS(TETHER_OK, tether_resource_release(h));
  g.default_exists = true;
  g.default_h = h;
  check_census();
  g = Model();
  g.default_h = h;
}

}  // namespace

extern "C" const char* __asan_default_options() {
  // Impossible sizes are asked for on purpose: tether must answer OUT_OF_MEMORY.
  return "allocator_may_return_null=1:detect_leaks=1";
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* m = std::getenv("TETHER_FUZZ_HOSTILE")) g_hostile = static_cast<unsigned>(std::strtoul(m, nullptr, 0));
  g_trace = std::getenv("TETHER_FUZZ_TRACE") != nullptr;
  std::fprintf(stderr, "fuzz_capi: TETHER_FUZZ_HOSTILE=0x%x (forged 0x1, stale 0x2, foreign 0x4, double 0x8, "
               "cross 0x10, upstream 0x20)\n", g_hostile);
  // The default host resource exists from here on (the census counts it).
  tether_resource_t* h = nullptr;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &h) != TETHER_OK) __builtin_trap();
  tether_resource_release(h);
  g.default_h = h;
  g_base_res = tether_debug_live_objects(TETHER_OBJECT_RESOURCE);
  g_base_buf = tether_debug_live_objects(TETHER_OBJECT_BUFFER);
  g_base_orphans = tether_debug_orphaned_resources();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  int ops = 0;
  while (!in.empty() && ops++ < 512) run_op(in.u8(), in);
  teardown();
  return 0;
}
