// PoolResource: a coalescing suballocator over any upstream.
//
// Chunks from upstream are carved into blocks. Free blocks are indexed by
// size in TLSF indexes (pool_free_index.hpp); allocated ones by address in
// hash tables (pool_block_table.hpp). Records live in host memory, outside
// the pooled memory, so the upstream may be device memory.
//
// Arenas. A host pool (upstream without stream_order()) has one arena. A
// stream-ordered pool has one per stream that used it: the blocks the stream
// freed, the blocks it handed out, spare records, and a mutex. The hot path
// (an allocation served from the stream's own free blocks, a free on the
// stream the block was allocated on) locks only its arena, found through a
// per-thread cache, plus the spin lock of the block's chunk while it touches
// physical neighbours. So threads on different streams do not contend. Slow
// paths (taking another stream's memory, growing, cross-stream frees, trim,
// info) take the World: the pool mutex and every arena mutex in id order.
//
// Slabs and extents. An extent is one allocation from upstream, given back
// whole; a chunk is a contiguous piece of one extent, the unit of physical
// layout (blocks merge only within a chunk) and of the chunk lock. A grown
// extent is one chunk. The initial size of a stream-ordered pool starts as
// memory no stream has used (`untouched_`), which streams take in slabs, each
// cut off as a chunk of its own: at least the growth size, then as much as
// the stream already took (capped at kMaxGeometricGrowth), so each stream
// comes back a few times only, and afterwards allocates and frees in its own
// chunks without touching a lock or counter another stream uses. Running out
// of memory joins the slabs of each extent again (join_slabs), so a request
// as large as the initial size can still be served.
//
// Stream ordering. A block freed on stream A goes into A's `fresh` index and
// is reused on A at once (stream order makes that safe). Every kRecordEvery
// frees, A records its event (a CUDA event on A, recorded while A is surely
// alive) and moves its fresh blocks to `settled`: they are covered by the
// event. Another stream B takes only settled blocks, after making B wait on
// A's event (cuStreamWaitEvent: the host never blocks, and A's handle is never
// used after the free, since A may be destroyed by then). When B finds no
// settled block and A has fresh ones, A is asked to record at its next free.
// What B takes, in an unbounded pool: a chunk of A's that is wholly free and
// settled moves to B whole; then pieces of A's memory as large as what A
// received from other streams' frees (Arena::received: a consumer stream
// freeing a producer's blocks); otherwise the pool grows, and B carves from
// the rest of A's partly used chunks only when upstream has no more memory.
// Threads on their own streams that took pieces of each other's chunks
// shared chunk locks and kept taking them back (growth order, in
// allocate_slow, has the figures).
// A bounded pool, and any pool once it has run out of memory, records at
// every free, so all its free memory is always available to every stream,
// and takes another stream's settled block before it grows.
// Physical neighbours coalesce only within one arena (fresh into fresh or
// settled-into-fresh, settled into settled).
//
// Where the device is synchronised (never on the hot path): trim(), the
// destructor and the out-of-memory step wait on the events of every arena;
// if some frees are not covered by an event yet (the stream may be gone, so
// it cannot be recorded now) they synchronise the device once instead.
//
// Upstream allocate/deallocate run with every lock released.
//
// Files: pool_block.hpp (block and chunk records), pool_free_index.hpp (the
// size index), pool_block_table.hpp (the address table), pool_arena.hpp
// (arenas and the block operations on them), pool_order.hpp (stream-ordering
// waits); this file is the resource: construction, the fast paths, the slow
// path's steps, trim and info.
#include "tether_core/pool.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pool_arena.hpp"
#include "pool_block.hpp"
#include "pool_order.hpp"
#include "tether_core/process.hpp"

namespace tether::core {

namespace {

using pool_detail::Block;
using pool_detail::BlockTable;
using pool_detail::Chunk;
using pool_detail::Extent;
using pool_detail::FreeIndex;
using pool_detail::kGranule;

constexpr std::size_t kDefaultGrowth = std::size_t{1} << 20;
// The pool grows by at least 1/kGrowthDivisor of its current size
// (geometric growth: O(log) chunks), but never by more than this unless a
// single request needs it. Growing by the whole current size (RMM's policy)
// can leave nearly half the pool unused after the last growth: replaying the
// random pattern (256 B - 4 MiB, <= 1000 live, 3 times) with eight seeds,
// held / peak live was 1.15 - 2.08 (mean 1.59); growing by a quarter,
// 1.20 - 1.43 (mean 1.28), for about three times as many chunks; by a
// sixteenth (with take_own's best fit in the request's own class first),
// 1.15 - 1.22 (median 1.18), for 54 chunks instead of 21 (the last step
// overshoots less; most of what is left is fragmentation while the pool
// fills: requests up to 4 MiB that no free piece of a chunk can hold).
//
// Where the rest goes (issue 22, bench_pool_vs_malloc_core footprint, 8
// seeds): with a sixteenth the steps are 3 - 4.5 MiB at 50 - 70 MiB held,
// about one large request each, so each chunk holds at most one of the
// largest requests, and a chunk sized for a 3.5 MiB request can never hold
// a 4 MiB one. Late growths came with 48 MiB of 76 MiB free (largest free
// block 3.7 MiB, request 3.9 MiB): fragmentation across chunks, not the
// last step's overshoot. So growth first gives back the pool's wholly free
// grown chunks and asks for one chunk of their size plus the step
// (merge_free_chunks): held grows by the step as before, but the chunks get
// fewer and larger. With that, a thirty-second is better than a sixteenth
// (smaller steps, and the merging keeps the chunk count down). Held / peak
// live, per seed then median / max:
//   host, 20,000 ops:   1/16: 1.352 1.270 1.553 1.242 1.214 1.206 1.263 1.203, 1.252 / 1.553
//                       1/16 + merge: median 1.236, max 1.328
//                       1/32 + merge: 1.309 1.272 1.323 1.140 1.213 1.257 1.210 1.235, 1.246 / 1.323
//   host, 1,000,000:    1/16: median 1.188, max 1.259; 1/16 + merge: 1.201 / 1.245
//                       1/32 + merge: 1.162 1.240 1.168 1.158 1.161 1.203 1.149 1.233, 1.165 / 1.240
//   stream-ordered, one stream, 20,000 ops (the GPU benchmark's figure):
//                       1/16: median 1.301, max 1.620; 1/32 + merge: 1.301 / 1.385
// Without merging, a thirty-second is worse (host 20,000: 1.293 / 1.519).
//
// Not kept: joining the wholly free grown chunks at an allocation whose best
// fit is one of them (giving them back and asking upstream for one chunk of
// their total, held unchanged; bounded to ask upstream for no more than
// growth had). Held / peak live, mean of 24 seeds, stream-ordered at 20,000
// / 200,000 ops: 1.271 / 1.230 -> 1.241 / 1.208, but the host pool's random
// pattern (bench_pool_vs_malloc_core 1000000 3 random, interleaved) went
// from 184 - 192 to 202 - 218 ns per pair in steady state: a join gives
// memory back and faults it in again (on a GPU: a cuMemFree, which waits
// for the device, at an allocation that did not need to grow). Growing by
// 1/128 with the joining: 0.009 less on the median for four times the
// upstream allocations. What is left is placement: a simulation of address-
// ordered first fit for requests below 1 MiB and best fit above reached
// median 1.116, max 1.195 (8 seeds, 200,000 ops); the TLSF index has no
// address order to do that in O(1).
// For scale: the pool's own placement in one contiguous 1 GiB initial chunk
// (no chunk boundaries, no overshoot) reaches 1.186 1.185 1.242 1.079 1.170
// 1.185 1.104 1.187 at 20,000 ops, and address-ordered first fit on a heap
// that extends at its top (a simulation) median 1.132, max 1.215: on this
// pattern 1.15 is about the best any placement reaches, chunks or not.
// Not kept (20,000 ops, host / stream-ordered median, max): growing by an
// eighth (1.284 / 1.373, 1.497 / 1.684); steps of at least twice a request
// larger than the growth size (1.259 / 1.283, 1.438 / 1.396); large
// requests (>= 64 KiB, 256 KiB or 1 MiB) carved from the top of a free
// block (1.255 - 1.306 / 1.331 - 1.400, max 1.45 - 1.64); in a
// stream-ordered pool, settling the fresh blocks (recording the event)
// before growing, and an unbounded own-class scan before growing (no change
// at all: a fresh block already merges with settled neighbours).
constexpr std::size_t kMaxGeometricGrowth = std::size_t{1} << 30;
constexpr std::size_t kGrowthDivisor = 32;
// How many blocks of a request's own size class are examined (best fit) before any other class.
constexpr std::size_t kOwnClassScan = 16;

constexpr std::size_t round_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) & ~(a - 1); }

// A chunk detached from the pool, to be given back to upstream unlocked (on stream 0).
struct Release {
  std::uintptr_t addr;
  std::size_t size;
};

std::string bytes_text(std::uint64_t n) { return std::to_string(n) + " bytes"; }

Properties pool_properties(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("pool: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_POOL;
  return p;
}

// Every pool gets a serial number, so per-thread caches keyed by it never
// confuse a destroyed pool with a new one at the same address.
std::atomic<std::uint64_t> g_pool_serial{0};

struct ArenaCacheEntry {
  std::uint64_t serial = 0;
  stream_t stream = 0;
  pool_detail::Arena* arena = nullptr;
};
// The pool's per-thread state, one thread_local: libtether is often
// dlopen'ed (by Python), and then each thread_local a function touches costs
// a call (_dl_tlsdesc_dynamic, 17 instructions). As three thread_locals, the
// quick free made four such calls and the quick allocation two; now one each
// (callgrind of the CuPy hook's malloc+free on a host pool under Python, per
// pair: tether_internal_allocate_quick 241 -> 221 instructions,
// tether_internal_deallocate_quick 317 -> 256).
struct PoolThreadState {
  ArenaCacheEntry arena_cache[8];  // the arenas this thread used last, by (pool serial, stream)
  // The quick path's mode (PoolResource::do_try_allocate_quick): set while
  // it runs the fast path, whose steps that could wait then refuse instead,
  // and say so in quick_refused (frees; an allocation returns nullptr).
  bool quick = false;
  bool quick_refused = false;
};
thread_local PoolThreadState t_pool;  // constant-initialised: no TLS guard

// This thread's t_pool, for a function that uses it on both sides of a call:
// GCC recomputes a thread_local's address after each call rather than keep
// it in a register (a _dl_tlsdesc_dynamic call each time when dlopen'ed);
// the empty asm makes the address an opaque value, kept like any other.
inline PoolThreadState& pool_thread() noexcept {
  PoolThreadState* t = &t_pool;
  asm("" : "+r"(t));
  return *t;
}

using pool_detail::Arena;
using pool_detail::ChunkGuard;
using pool_detail::kRecordEvery;
using Waits = stream_reuse::Handover;
using pool_detail::insert_free;
using pool_detail::carve;
using pool_detail::flush_quick;
using pool_detail::QuickCache;
using pool_detail::reserve_records;
using pool_detail::settle;
using pool_detail::split;
using pool_detail::take;
using pool_detail::take_own;

class PoolResource final : public Resource {
 public:
  PoolResource(ResourcePtr upstream, const PoolOptions& o)
      : Resource(pool_properties(upstream), true),  // counts in its arenas (self_tally)
        upstream_(std::move(upstream)),
        order_(upstream_->stream_order()),
        serial_(g_pool_serial.fetch_add(1, std::memory_order_relaxed) + 1) {
    if (o.maximum_size != 0 && o.initial_size > o.maximum_size) {
      throw_invalid_argument("pool: initial_size (" + bytes_text(o.initial_size) + ") exceeds maximum_size (" +
                             bytes_text(o.maximum_size) + ")");
    }
    if (o.maximum_size != 0 && o.maximum_size < kGranule) {  // issue 11: a pool that can never allocate
      throw_invalid_argument("pool: maximum_size (" + bytes_text(o.maximum_size) + ") is below the pool's " +
                             bytes_text(kGranule) + " granule, so the pool could never allocate (0 means no limit)");
    }
    const std::size_t huge = SIZE_MAX - 2 * kMaxAlignment;  // beyond this nothing can be allocated anyway
    limited_ = o.maximum_size != 0;
    // A bounded pool will hand memory across streams: keep every free covered.
    eager_ = limited_;
    maximum_ = o.maximum_size & ~(kGranule - 1);  // chunks are whole granules
    growth_ = round_up(std::min(o.growth_size == 0 ? kDefaultGrowth : o.growth_size, huge), kGranule);
    std::size_t initial = round_up(std::min(o.initial_size, huge), kGranule);
    if (limited_) initial = std::min(initial, maximum_);
    if (order_ == nullptr) host_arena_ = new_arena(0);

    if (initial != 0) {
      void* mem = nullptr;
      try {
        mem = upstream_->allocate_for(id(), initial, kGranule, 0);
        // Memory from a stream-ordered upstream is ordered on the stream it was
        // asked for on; waiting once here makes the initial chunk any stream's.
        if (order_ != nullptr) order_->synchronize(0);
      } catch (const OutOfMemory& e) {
        throw OutOfMemory("pool: cannot obtain its initial_size of " + bytes_text(initial) + " from upstream '" +
                          upstream_->name() + "': " + e.what());
      }
      try {
        Arena& a = host_arena_ != nullptr ? *host_arena_ : spare_records_;
        a.nodes.reserve(1);
        Block* b = add_chunk(std::make_unique<Chunk>(), std::make_unique<Extent>(), mem, initial, a);
        ChunkGuard g(b->chunk);
        insert_free(a, b, host_arena_ != nullptr ? &host_arena_->settled : &untouched_);
      } catch (...) {
        upstream_->deallocate_for(id(), mem, initial, kGranule, 0);
        throw;
      }
    }
  }

  ~PoolResource() override {
    // CUDA memory is leaked once the process exits: the context may be gone.
    const bool leak = order_ != nullptr && process_is_exiting();
    // The streams the memory was freed on may be gone: order stream 0 after
    // every arena's event (or the whole device, if some frees are not covered
    // by an event yet), then give everything back on stream 0.
    flush_all_quick();  // cached blocks are uncovered frees, like fresh ones
    bool settled = leak || order_ == nullptr || chunks_ == nullptr;
    if (!settled) {
      try {
        Waits waits(order_);
        for (const auto& a : arenas_)
          if (!a->fresh.empty()) waits.device();
        for (const auto& a : arenas_)
          if (a->event != nullptr) waits.wait(0, a->stream, a->event);
        settled = true;
      } catch (...) {
        // The device cannot be ordered: leak rather than free memory in use.
      }
    }
    for (Chunk* c = chunks_; c != nullptr;) {
      Chunk* next = c->next;
      Extent* e = c->extent;
      if (--e->chunks == 0) {  // the extent's last chunk: give the whole extent back
        if (settled && !leak) {
          try {
            upstream_->deallocate_for(id(), reinterpret_cast<void*>(e->addr), e->size, kGranule, 0);
          } catch (...) {
            // Nothing sensible to do in a destructor; the extent is lost.
          }
        }
        delete e;
      }
      delete c;
      c = next;
    }
    if (order_ != nullptr && !leak)
      for (const auto& a : arenas_) order_->destroy_event(a->event);
  }

  const char* name() const noexcept override { return "pool"; }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  // A pool over a stream-ordered pool is stream-ordered too.
  StreamOrder* stream_order() noexcept override { return order_; }

  void trim() override {
    std::vector<Release> released;
    std::exception_ptr error;
    {
      World world(*this);
      flush_all_quick();
      detach_free_chunks(spare_arena(), released, error, every_chunk);
    }
    give_back(released);
    if (error) std::rethrow_exception(error);
  }

  // The outstanding counters: the sums over every arena (the list is
  // append-only and each arena lives as long as the pool, so no lock).
  Tally self_tally() const noexcept override {
    Tally t;
    for (const Arena* a = listed_.load(std::memory_order_acquire); a != nullptr; a = a->next_listed) {
      t.count += a->live_count.load(std::memory_order_relaxed);
      t.bytes += a->live_bytes.load(std::memory_order_relaxed);
      t.dependent_count += a->dependent_count.load(std::memory_order_relaxed);
      t.dependent_bytes += a->dependent_bytes.load(std::memory_order_relaxed);
    }
    return t;
  }

  PoolInfo info() const {
    World world(const_cast<PoolResource&>(*this));
    // Cached blocks are free memory: coalesce them, so the figures are those of a pool without the cache.
    const_cast<PoolResource&>(*this).flush_all_quick();
    PoolInfo i;
    std::size_t used = 0;
    for (const auto& a : arenas_) used += a->used;
    i.pool_size = pool_size_;
    i.free_bytes = pool_size_ - used;
    i.chunk_count = chunk_count_;
    i.largest_free_block = largest_free();
    i.free_blocks = untouched_.size();
    for (const auto& a : arenas_) i.free_blocks += a->fresh.size() + a->settled.size();
    return i;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  // Every block records who holds it (a caller, or the dependent pool or
  // adaptor that took it with allocate_for), and only that one may free it.
  //
  // The hot path (a hit in the quick cache of an arena this thread has at
  // hand, its lock free) makes no call but tail calls: every other case goes
  // to an out-of-line function, so this one needs no frame and saves no
  // register. bench_capi_cost --count under callgrind: the pool's part of a
  // same-size pair's allocate went from 87 to 66 instructions (its misses pay
  // a call more: bench_pool_callgrind random +8 per pair).
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    Arena* a = arena_at_hand(stream);  // (a host pool's one arena, whatever the stream)
    if (__builtin_expect(a == nullptr || !a->mutex.try_lock(), 0))
      return allocate_locking(owner, bytes, alignment, stream);
    return allocate_locked(*a, bytes, alignment, owner);
  }

  // The quick cache, else the rest; a locked on entry, unlocked on return.
  __attribute__((always_inline)) void* allocate_locked(Arena& a, std::size_t bytes, std::size_t alignment,
                                                       owner_t owner) {
    if (Block* b = allocate_cached(a, bytes, alignment, owner)) {
      a.mutex.unlock();
      return reinterpret_cast<void*>(b->addr);
    }
    return allocate_uncached(a, bytes, alignment, owner);
  }

  // The fastest path: a block of exactly this size freed on this stream,
  // handed out again (it is still in a.table); nullptr if none. a locked.
  __attribute__((always_inline)) static Block* allocate_cached(Arena& a, std::size_t bytes, std::size_t alignment,
                                                              owner_t owner) noexcept {
    const std::size_t g = round_up(bytes, kGranule) >> pool_detail::kGranuleShift;
    Block* b = a.quick.note_and_pop(g, QuickCache::slot(g, alignment <= kGranule));
    if (b == nullptr) return nullptr;
    hand_out_cached(a, b, bytes, alignment, owner);
    return b;
  }

  // Cached block b, taken out of a's quick cache, is arena a's again for
  // this request. a locked.
  __attribute__((always_inline)) static void hand_out_cached(Arena& a, Block* b, std::size_t bytes,
                                                             std::size_t alignment, owner_t owner) noexcept {
    b->request.bytes = bytes;
    b->request.set(alignment, owner);
    a.used += b->size;
    pool_detail::tally(a, owner, +1, bytes);
  }

  // do_allocate_for when no arena is at hand or its lock is taken: find the
  // arena, wait for its lock, then the same steps.
  __attribute__((noinline)) void* allocate_locking(owner_t owner, std::size_t bytes, std::size_t alignment,
                                                   stream_t stream) {
    if (t_pool.quick) return nullptr;  // the quick path: no lookup (world_), no waiting for the lock
    if (order_ == nullptr) stream = 0;  // (arena_for() ignores it then anyway)
    Arena& a = arena_for(stream);
    a.mutex.lock();
    return allocate_locked(a, bytes, alignment, owner);
  }

  // do_allocate_for past a miss of the quick cache; a locked on entry (this
  // unlocks it, also when it throws).
  __attribute__((noinline)) void* allocate_uncached(Arena& a, std::size_t bytes, std::size_t alignment,
                                                    owner_t owner) {
    const std::size_t n = round_up(bytes, kGranule);
    std::size_t need;
    {
      std::lock_guard<pool_detail::ArenaLock> lock(a.mutex, std::adopt_lock);
      // Blocks start on granule boundaries; a larger alignment is found by
      // searching for enough extra to carve off a leading piece. (Worked out
      // here, past the cache's hits, which do not need it.)
      need = alignment > kGranule ? n + (alignment - kGranule) : n;
      // A larger size has its own slot in the cache (QuickCache, "Larger blocks").
      const std::size_t g = n >> pool_detail::kGranuleShift;
      if (g > QuickCache::kMaxGranules && alignment <= kGranule) {
        if (Block* b = a.quick.pop_large(g)) {
          hand_out_cached(a, b, bytes, alignment, owner);
          return reinterpret_cast<void*>(b->addr);
        }
        a.quick.note_large(g);
        // A larger request sees the frees not merged yet (merge_unmerged)
        // merged first: the blocks they would coalesce into are what such a
        // request fits in. Held / peak live, mean of 24 seeds, stream-ordered
        // at 20,000 / 200,000 ops: 1.271 / 1.230 before the deferred merge,
        // 1.301 / 1.239 with it, 1.269 / 1.226 with this. The live sweep
        // (sizes to 64 KiB) keeps most of its gain: 100k live 159 - 178 ->
        // 140 - 152 ns (deferring at every size: 139 - 144); the random
        // pattern (to 4 MiB) 180 - 188 -> 183 - 192 ns, within the noise
        // of interleaved runs (bench_pool_vs_malloc_core 1000000 3 random).
        // (A request with a larger alignment, rare, sees them merged on the
        // slow path: tested here as well, the fast path cost 6 - 18
        // instructions per pair more, bench_pool_callgrind random.)
        if (a.unmerged_count != 0) pool_detail::merge_unmerged(a, free_index(a));
      }
      // Otherwise the cache is flushed first: a request of another size then
      // sees the cached blocks coalesced, as if they had never been cached.
      if (!a.quick.empty()) flush_quick(a, free_index(a));
      if (void* p = take_own(a, n, need, bytes, alignment, owner, kOwnClassScan)) return p;  // the fast path
    }
    return allocate_slow(a, n, need, bytes, alignment, owner);
  }

  // The quick path (Resource::try_allocate_quick and try_deallocate_quick)
  // is the fast path itself, run with t_pool.quick set: each step that could
  // wait, record or query an event, or call upstream refuses instead -
  // an arena not at hand (finding one takes world_, which the slow paths
  // hold across device synchronisations) or its lock taken (try_lock
  // failed: allocate_locking, deallocate_locking), no block of the arena's
  // own that fits (allocate_slow), a free of another
  // arena's block (free_elsewhere takes the world), a record due
  // (free_uncached_locked), a rejected free (reject_free_locked's exception,
  // caught here: nothing changed; the normal path reports it). What runs
  // under the arena lock besides is the quick cache, the arena's own free
  // indexes and its unmerged frees, under the spin locks of its chunks,
  // which no holder keeps across anything but a split or a merge.
  // (Written as a mode, not as functions of their own: those inlined the
  // fast path's helpers a second time, and GCC, out of its inline budget
  // for this file, then outlined merge_unmerged, insert_free and the index
  // and table operations from the normal paths: bench_pool_callgrind
  // random +44 instructions per pair. As a mode: +7 on the pairs that miss
  // the quick cache, tally no longer inlined into the free, hot256 -2.)
  void* do_try_allocate_quick(std::size_t bytes, std::size_t alignment, stream_t stream) noexcept override {
    PoolThreadState& t = pool_thread();  // one TLS lookup for both writes
    void* p = nullptr;
    t.quick = true;
    try {
      p = do_allocate_for(kCaller, bytes, alignment, stream);
    } catch (...) {
      // No record to carve with (bad_alloc): nothing taken.
    }
    t.quick = false;
    return p;
  }

  bool do_try_deallocate_quick(void* ptr, std::size_t bytes, std::size_t alignment,
                               stream_t stream) noexcept override {
    PoolThreadState& t = pool_thread();
    t.quick = true;
    t.quick_refused = false;
    try {
      do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
    } catch (...) {
      t.quick_refused = true;  // rejected (reject_free_locked): nothing changed
    }
    t.quick = false;
    return !t.quick_refused;
  }

  // As in do_allocate_for, an arena not at hand or a lock taken go out of
  // line, and so do a rejected free and one that records an event; a free
  // into the free indexes stays inline, since out of line its own frame
  // cost more (bench_pool_callgrind random +18 instructions per pair) than
  // this one's saved registers cost the cached free (9). bench_capi_cost
  // --count under callgrind: the pool's part of a same-size pair's free went
  // from 107 to 98 instructions.
  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    Arena* a = arena_at_hand(stream);
    if (__builtin_expect(a == nullptr || !a->mutex.try_lock(), 0))
      return deallocate_locking(owner, ptr, bytes, alignment, stream);
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    const std::size_t slot = a->table.find(addr);
    if (__builtin_expect(slot == BlockTable::npos, 0)) {
      a->mutex.unlock();
      return free_elsewhere(*a, addr, bytes, alignment, owner);
    }
    // free_block(*a, *a, ...), its calls out of line.
    Block* b = a->table.at(slot);
    if (__builtin_expect(!request_matches(*b, bytes, alignment, owner), 0))
      return reject_free_locked(*a, *b, bytes, alignment, owner);
    if (__builtin_expect(must_record(*a), 0)) return free_uncached_locked(*a, slot, b, bytes, owner, true);
    if (__builtin_expect(free_cached(*a, b, bytes, owner), 1)) {
      a->mutex.unlock();
      return;
    }
    free_unmerged(*a, slot, b, bytes, owner);
    a->mutex.unlock();
  }

  // reject_free() and free_uncached() for do_deallocate_for, with a locked
  // on entry (they unlock it, also when they throw).
  [[noreturn]] __attribute__((noinline, cold)) static void reject_free_locked(Arena& a, const Block& b,
                                                                               std::size_t bytes,
                                                                               std::size_t alignment, owner_t owner) {
    std::lock_guard<pool_detail::ArenaLock> lock(a.mutex, std::adopt_lock);
    reject_free(b, bytes, alignment, owner);
  }
  __attribute__((noinline)) void free_uncached_locked(Arena& a, std::size_t slot, Block* b, std::size_t bytes,
                                                      owner_t owner, bool rec) {
    if (t_pool.quick) {  // the quick path: a record is due (a CUDA call)
      a.mutex.unlock();
      t_pool.quick_refused = true;
      return;
    }
    std::lock_guard<pool_detail::ArenaLock> lock(a.mutex, std::adopt_lock);
    free_uncached(a, a, slot, b, bytes, owner, rec);
  }

  // do_deallocate_for when no arena is at hand or its lock is taken.
  __attribute__((noinline)) void deallocate_locking(owner_t owner, void* ptr, std::size_t bytes,
                                                    std::size_t alignment, stream_t stream) {
    if (t_pool.quick) {  // the quick path: no lookup (world_), no waiting for the lock
      t_pool.quick_refused = true;
      return;
    }
    if (order_ == nullptr) stream = 0;  // (arena_for() ignores it then anyway)
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    Arena& a = arena_for(stream);
    {
      std::lock_guard<pool_detail::ArenaLock> lock(a.mutex);
      const std::size_t slot = a.table.find(addr);
      if (slot != BlockTable::npos) return free_block(a, a, slot, bytes, alignment, owner);  // the fast path
    }
    free_elsewhere(a, addr, bytes, alignment, owner);
  }

  // Freed on another stream than it was allocated on (or not ours at all).
  // Out of line: the fast path above then saves fewer registers.
  __attribute__((noinline)) void free_elsewhere(Arena& a, std::uintptr_t addr, std::size_t bytes,
                                                std::size_t alignment, owner_t owner) {
    if (t_pool.quick) {  // the quick path: another arena's block (or not ours) needs the world
      t_pool.quick_refused = true;
      return;
    }
    World world(*this);
    for (const auto& holder : arenas_) {
      const std::size_t slot = holder->table.find(addr);
      if (slot == BlockTable::npos) continue;
      const std::size_t size = holder->table.at(slot)->size;
      free_block(a, *holder, slot, bytes, alignment, owner);  // throws, changing nothing, if rejected
      if (holder.get() != &a) a.received += size;  // another stream's block: see Arena::received
      return;
    }
    throw_not_ours(addr);
  }

 private:
  // Holds the pool-wide mutex and every arena's (in id order): what the slow
  // paths, trim() and info() need. The fast paths hold one arena's mutex and
  // never wait for this while holding it, so the two cannot deadlock.
  class World {
   public:
    explicit World(PoolResource& p) : pool_(p) { lock(); }
    ~World() {
      if (locked_) unlock();
    }
    World(const World&) = delete;
    World& operator=(const World&) = delete;
    void lock() {
      pool_.world_.lock();
      for (const auto& a : pool_.arenas_) a->mutex.lock();
      locked_ = true;
    }
    void unlock() noexcept {
      for (auto it = pool_.arenas_.rbegin(); it != pool_.arenas_.rend(); ++it) (*it)->mutex.unlock();
      pool_.world_.unlock();
      locked_ = false;
    }

   private:
    PoolResource& pool_;
    bool locked_ = false;
  };

  static std::string wrong_owner(std::uintptr_t addr, owner_t held_by, owner_t freed_by) {
    if (freed_by == kCaller)
      return "pool: pointer " + hex(addr) +
             " is held by a resource over this pool (a pool's chunk or an adaptor's allocation); "
             "free it into the resource that handed it out";
    if (held_by == kCaller)
      return "pool: pointer " + hex(addr) +
             " was allocated directly from this pool, not through the resource it was freed into; free it into the pool";
    return "pool: pointer " + hex(addr) + " was handed out through another resource over this pool than the one it was freed into";
  }

  // Why a free of block b (found in a table) is refused: the checks of
  // free_block() one by one. Nothing has been changed.
  [[noreturn]] __attribute__((noinline, cold)) static void reject_free(const Block& b, std::size_t bytes,
                                                                        std::size_t alignment, owner_t owner) {
    const std::uintptr_t addr = b.addr;
    if (b.request.cached()) throw_not_ours(addr);  // freed already, waiting in the quick cache
    if (b.request.owner() != owner) throw_invalid_argument(wrong_owner(addr, b.request.owner(), owner));
    if (b.request.bytes != bytes) {
      throw_invalid_argument("pool: size mismatch freeing " + hex(addr) + ": allocated " + bytes_text(b.request.bytes) +
                             ", freed with " + bytes_text(bytes));
    }
    throw_invalid_argument("pool: alignment mismatch freeing " + hex(addr) + ": allocated with " +
                           std::to_string(b.request.alignment()) + ", freed with " + std::to_string(alignment));
  }

  [[noreturn]] __attribute__((noinline, cold)) static void throw_not_ours(std::uintptr_t addr) {
    throw_invalid_argument("pool: pointer " + hex(addr) + " was not allocated by this pool (or was already freed)");
  }

  static std::string hex(std::uintptr_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#jx", static_cast<std::uintmax_t>(v));
    return buf;
  }

  // The arena whose records and node cache the world-locked paths use when no
  // stream's arena is at hand (trim, the initial chunk of a stream-ordered pool).
  Arena& spare_arena() noexcept { return host_arena_ != nullptr ? *host_arena_ : spare_records_; }

  // Requires world_. Throws std::bad_alloc with nothing changed.
  Arena* new_arena(stream_t stream) {
    arenas_.reserve(arenas_.size() + 1);
    auto a = std::make_unique<Arena>(stream, arenas_.size());
    Arena* raw = a.get();
    by_stream_.emplace(stream, raw);
    arenas_.push_back(std::move(a));  // cannot throw: reserved
    raw->next_listed = listed_.load(std::memory_order_relaxed);
    listed_.store(raw, std::memory_order_release);  // self_tally() may walk the list now
    return raw;
  }

  // The arena of `stream` if it needs no lookup (a host pool's, or one in
  // this thread's cache), else nullptr: what the fast paths use.
  Arena* arena_at_hand(stream_t stream) noexcept {
    if (host_arena_ != nullptr) return host_arena_;
    const ArenaCacheEntry& e = cache_entry(stream);
    return e.serial == serial_ && e.stream == stream ? e.arena : nullptr;
  }
  ArenaCacheEntry& cache_entry(stream_t stream) const noexcept {
    return t_pool.arena_cache[(static_cast<std::uint64_t>(stream) * 0x9E3779B97F4A7C15ull + serial_) >> 61];
  }

  // The arena of `stream` (created on first use). Arenas live as long as the
  // pool, so the per-thread cache needs no lock.
  Arena& arena_for(stream_t stream) {
    if (host_arena_ != nullptr) return *host_arena_;
    ArenaCacheEntry& e = cache_entry(stream);
    if (e.serial == serial_ && e.stream == stream) return *e.arena;
    Arena* a;
    {
      std::lock_guard<std::mutex> lock(world_);
      auto it = by_stream_.find(stream);
      a = it != by_stream_.end() ? it->second : new_arena(stream);
    }
    e = ArenaCacheEntry{serial_, stream, a};
    return *a;
  }


  // Where arena a's frees go: fresh until its event covers them (a host pool: settled at once).
  FreeIndex* free_index(Arena& a) noexcept { return order_ != nullptr ? &a.fresh : &a.settled; }

  // Empty every arena's quick cache into its free indexes, and merge its
  // unmerged frees (merge_unmerged). Requires the world.
  void flush_all_quick() noexcept {
    for (const auto& a : arenas_) {
      flush_quick(*a, free_index(*a));
      pool_detail::merge_unmerged(*a, free_index(*a));
    }
  }

  // Record a's event on its stream (alive: the caller is using it right now)
  // and settle every fresh block under it. a locked.
  void record(Arena& a) {
    if (a.event == nullptr) a.event = order_->create_event();
    order_->record_event(a.event, a.stream);
    settle(a);
  }

  // Whether a free on arena a's stream must record a's event (a locked).
  bool must_record(const Arena& a) const noexcept {
    return order_ != nullptr && (eager_ || a.record_requested || a.unrecorded + 1 >= kRecordEvery);
  }

  // Free the block in `owner`'s table at `slot` on arena a's stream. Both locked.
  __attribute__((always_inline)) void free_block(Arena& a, Arena& holder, std::size_t slot, std::size_t bytes, std::size_t alignment,
                  owner_t owner) {
    Block* b = holder.table.at(slot);
    if (__builtin_expect(!request_matches(*b, bytes, alignment, owner), 0)) reject_free(*b, bytes, alignment, owner);
    const bool rec = must_record(a);
    // Kept whole, and in the table, for this stream's next request of its
    // size: only a block of a's own (the table it stays in is a's). A cached
    // block is handed to this stream only, which stream order makes safe, so
    // it needs no event until it leaves the cache into `fresh` (flush_quick
    // counts it then): the hot same-size pair of a stream-ordered pool never
    // records (a cuEventRecord every kRecordEvery pairs, ~185 ns on an H100
    // host, and the uncached pair that followed each record).
    if (!rec && &holder == &a) {
      if (!free_cached(a, b, bytes, owner)) free_unmerged(a, slot, b, bytes, owner);
      return;
    }
    free_uncached(a, holder, slot, b, bytes, owner, rec);
  }

  // Free block b (arena a's own, at `slot` of a's table, its request
  // checked, not taken by the quick cache): out of the table now, merged
  // later with a batch (merge_unmerged). Only where the block could have
  // been cached (no record due, freed on its own stream), so an unmerged
  // block, like a cached one, needs no event until it is merged into
  // `fresh`. a locked.
  __attribute__((always_inline)) void free_unmerged(Arena& a, std::size_t slot, Block* b, std::size_t bytes,
                                                    owner_t owner) noexcept {
    a.used -= b->size;
    pool_detail::tally(a, owner, -1, bytes);
    a.table.erase_at(slot);
    {
      // For the merge (merge_unmerged); nullptr at a chunk's end, harmless.
      // The links are read under the chunk lock (none in a host pool): a
      // neighbour's merge in another stream's arena rewrites them
      // (ThreadSanitizer reported the race in the pool replay test).
      ChunkGuard g(b->chunk);
      __builtin_prefetch(b->prev_phys);
      __builtin_prefetch(b->next_phys);
    }
    if (a.unmerged_count == Arena::kUnmerged) pool_detail::merge_unmerged(a, free_index(a));
    a.unmerged[a.unmerged_count++] = b;
  }

  // Whether a free of (bytes, alignment) by owner matches block b's request.
  // One comparison for owner and alignment (and the cached mark, which no
  // request's tag equals); the reason is worked out off the hot path.
  __attribute__((always_inline)) static bool request_matches(const Block& b, std::size_t bytes,
                                                             std::size_t alignment, owner_t owner) noexcept {
    Block::Request expected;
    expected.set(alignment, owner);
    return b.request.tag == expected.tag && b.request.bytes == bytes;
  }

  // Keep block b (arena a's own, its request checked) whole in a's quick
  // cache, counted as freed; false (nothing changed) if the cache is full.
  __attribute__((always_inline)) static bool free_cached(Arena& a, Block* b, std::size_t bytes,
                                                         owner_t owner) noexcept {
    if (!a.quick.push(b)) return false;
    a.used -= b->size;
    pool_detail::tally(a, owner, -1, bytes);
    return true;
  }

  // The rest of free_block() for block b (at `slot` of holder's table, its
  // request checked) that the quick cache did not take; `rec`: must_record(a).
  __attribute__((always_inline)) void free_uncached(Arena& a, Arena& holder, std::size_t slot, Block* b,
                                                    std::size_t bytes, owner_t owner, bool rec) {
    if (rec) {
      // Capture the stream's work up to this free while its handle is surely alive.
      if (a.event == nullptr) a.event = order_->create_event();
      order_->record_event(a.event, a.stream);  // may throw; nothing changed yet
    }
    holder.used -= b->size;
    pool_detail::tally(a, owner, -1, bytes);
    holder.table.erase_at(slot);
    pool_detail::release_block(a, b, free_index(a));
    if (rec) {
      settle(a);
    } else if (order_ != nullptr) {
      ++a.unrecorded;
    }
  }

  // Link a new extent of `size` bytes at `mem` (from upstream), as one
  // chunk; returns its one block (not indexed). Requires world_ (and a's
  // lock, and a spare record in a).
  Block* add_chunk(std::unique_ptr<Chunk> chunk, std::unique_ptr<Extent> extent, void* mem, std::size_t size,
                   Arena& a) noexcept {
    Extent* e = extent.release();
    e->addr = reinterpret_cast<std::uintptr_t>(mem);
    e->size = size;
    pool_size_ += size;
    ++chunk_count_;
    return link_chunk(chunk.release(), e, e->addr, size, a.nodes.get());
  }

  // Link chunk c as [addr, addr+size) of extent e, with b as its one block
  // (not indexed). Requires world_.
  Block* link_chunk(Chunk* c, Extent* e, std::uintptr_t addr, std::size_t size, Block* b) noexcept {
    c->addr = addr;
    c->size = size;
    c->extent = e;
    c->shared = order_ != nullptr;  // a host pool has one arena: its mutex is enough
    ++e->chunks;
    c->prev = nullptr;
    c->next = chunks_;
    if (chunks_ != nullptr) chunks_->prev = c;
    chunks_ = c;
    b->addr = addr;
    b->size = size;
    b->chunk = c;
    b->prev_phys = b->next_phys = nullptr;
    c->first = b;
    return b;
  }

  // Unlink chunk c from the pool's list (its records stay valid). Requires world_.
  void unlink_chunk(Chunk* c) noexcept {
    if (c->prev != nullptr) c->prev->next = c->next; else chunks_ = c->next;
    if (c->next != nullptr) c->next->prev = c->prev;
    c->prev = c->next = nullptr;
    --c->extent->chunks;
  }

  // How much to ask upstream for so that `need` fits, plus `merged` (bytes
  // merge_free_chunks gave back); 0 if the maximum forbids it.
  std::size_t growth_for(std::size_t need, std::size_t merged = 0) const noexcept {
    // Rounded to the granule, so that a pool over another pool holds exactly
    // what it asked for (the conformance suite checks that, link by link).
    std::size_t chunk = merged + std::max(
      {need, growth_, round_up(std::min(pool_size_ / kGrowthDivisor, kMaxGeometricGrowth), kGranule)});
    if (limited_) {
      const std::size_t held = pool_size_ + pending_;
      if (held >= maximum_ || need > maximum_ - held) return 0;
      chunk = std::min(chunk, maximum_ - held);
    }
    return chunk;
  }

  // Before growing: detach the grown extents that are wholly free and give
  // them back, so that the growth asks for one chunk of their size more
  // (kGrowthDivisor's comment has the numbers). Returns the bytes given back.
  // Only extents the pool grew (the initial size stays as asked for), and in
  // a stream-ordered pool only those without fresh blocks (their frees are
  // covered by an event: stream 0 waits on it, the host never blocks; a's
  // own fresh blocks are settled first, a record being far cheaper than a
  // grow). The world is unlocked while they are given back; a failure to
  // give one back loses it, as a failed give-back in trim() would, and is
  // not the allocation's failure. Requires the world.
  std::size_t merge_free_chunks(World& world, Arena& a) {
    std::size_t free_grown = 0;
    for (Chunk* c = chunks_; c != nullptr; c = c->next)
      if (c->allocated == 0 && c->extent->grown) free_grown += c->size;
    if (free_grown == 0) return 0;  // (usual: nothing to scan further)
    if (order_ != nullptr && !a.fresh.empty()) record(a);
    std::vector<Release> released;
    std::exception_ptr error;
    detach_free_chunks(a, released, error, grown_and_settled);
    if (error || released.empty()) return 0;
    std::size_t bytes = 0;
    for (const Release& r : released) bytes += r.size;
    world.unlock();
    try {
      give_back(released);
    } catch (...) {
    }
    world.lock();
    return bytes;
  }

  // Ask upstream for a chunk (the world unlocked meanwhile) and carve from it
  // for arena a. nullptr if upstream is out of memory (its message in `error`).
  void* grow(World& world, Arena& a, std::size_t chunk_size, std::size_t n, std::size_t bytes,
             std::size_t alignment, owner_t owner, std::string& error) {
    auto chunk = std::make_unique<Chunk>();
    auto extent = std::make_unique<Extent>();
    pending_ += chunk_size;  // counts against the maximum while unlocked
    world.unlock();
    void* mem = nullptr;
    try {
      mem = upstream_->allocate_for(id(), chunk_size, kGranule, a.stream);
    } catch (const OutOfMemory& e) {
      error = e.what();
    } catch (...) {
      world.lock();
      pending_ -= chunk_size;
      throw;
    }
    world.lock();
    pending_ -= chunk_size;
    if (mem == nullptr) return nullptr;
    // A stream-ordered upstream hands out memory ordered on a's stream: the
    // rest of the chunk is that stream's, covered by its event (recorded now,
    // while the stream is surely alive) before another stream may take it.
    try {
      reserve_records(a);
      if (order_ != nullptr) record(a);
    } catch (...) {
      world.unlock();
      try {
        upstream_->deallocate_for(id(), mem, chunk_size, kGranule, a.stream);
      } catch (...) {
      }
      throw;
    }
    extent->grown = true;
    Block* b = add_chunk(std::move(chunk), std::move(extent), mem, chunk_size, a);
    ChunkGuard g(b->chunk);
    return carve(a, b, &a.settled, n, bytes, alignment, owner);
  }

  // What an allocation asks for, passed along the slow path's steps.
  struct Request {
    std::size_t n;      // bytes rounded up to whole granules
    std::size_t need;   // n plus room to align
    std::size_t bytes;  // as asked
    std::size_t alignment;
    owner_t owner;
  };

  // The allocation arena a could not serve from its own blocks: each step
  // below, in order, until one succeeds. Requires nothing locked.
  void* allocate_slow(Arena& a, std::size_t n, std::size_t need, std::size_t bytes, std::size_t alignment,
                      owner_t owner) {
    if (t_pool.quick) return nullptr;  // the quick path: every step below may wait, record events or grow
    const Request r{n, need, bytes, alignment, owner};
    World world(*this);
    // 0. Our own blocks again (another thread on our stream may have freed
    //    some), with every quick cache flushed, so free neighbours coalesce.
    flush_all_quick();
    if (void* p = take_own(a, r.n, r.need, r.bytes, r.alignment, r.owner, kOwnClassScan)) return p;
    if (void* p = take_untouched(a, r)) return p;
    Waits waits(order_);
    // 2. Another stream's memory. Growth order: an unbounded pool that has
    //    never run out of memory (!eager_) takes, before it grows, another
    //    stream's wholly free chunks, and pieces of another stream's memory
    //    only up to what that stream received from others' frees
    //    (Arena::received); other pieces after (step 3b). Taking any piece
    //    first, threads on their own streams kept taking memory back and
    //    forth in steady state and shared the chunks' locks:
    //    bench_pool_vs_malloc_core 200000 5 threads (default options, 2
    //    cores, interleaved runs), 8 threads / 1 thread went from 0.86 - 1.00
    //    to 0.57 - 0.59 (the 8 GiB initial pool's figure: 0.54 - 0.57); over
    //    its 5 timed repetitions at 8 threads, 950 - 1351 takes from other
    //    streams and 37k - 44k waits for a chunk lock became 185 - 276
    //    whole-chunk moves and none; the pool held 2,500 - 2,720 MiB (2,710 -
    //    2,720 before). Taking only whole chunks, a producer stream whose
    //    blocks a consumer stream frees grew without bound (bench_pool_vs_
    //    malloc_core handoff, held / peak live, median / max of 8 seeds: 7.45
    //    / 8.69 at 20,000 ops, 10.1 / 15.0 at 200,000); with the received
    //    pieces taken back 1.300 / 1.446 and 1.239 / 1.287 (taking any piece
    //    first: 1.416 / 2.263 and 1.261 / 1.295). One stream after another
    //    (its phases line): 1.720 / 2.188 and 1.504 / 1.920 (before: 1.883 /
    //    2.054 and 1.600 / 1.920).
    const bool grow_first = order_ != nullptr && !eager_;
    if (grow_first)
      if (void* p = take_free_chunk_elsewhere(a, r, waits)) return p;
    if (void* p = take_settled_elsewhere(a, r, waits, grow_first)) return p;  // grow_first: only what others freed to them
    if (limited_ && r.need > maximum_) throw OutOfMemory(exhausted(r.bytes, r.alignment, ""));
    // 3. Grow (merging the wholly free chunks into the new one).
    std::string upstream_error;
    const std::size_t chunk = growth_for(r.need, merge_free_chunks(world, a));
    if (chunk != 0) {
      if (void* p = grow(world, a, chunk, r.n, r.bytes, r.alignment, r.owner, upstream_error)) return p;
    }
    // 3b. Upstream is out of memory: pieces of other streams' chunks.
    if (grow_first)
      if (void* p = take_settled_elsewhere(a, r, waits, false)) return p;
    if (void* p = take_everything(a, r, waits)) return p;
    if (void* p = release_and_grow(world, a, r, chunk, upstream_error)) return p;
    throw OutOfMemory(exhausted(r.bytes, r.alignment, upstream_error));
  }

  // 1. Memory no stream has used (untouched_: each block there is the one
  //    block of its chunk): take a slab of it as a chunk of a's own, no
  //    wait needed. Slabs grow geometrically with what a already took, so
  //    a stream comes here a few times only and then works in its own
  //    chunks, under its own chunk locks. Requires the world.
  void* take_untouched(Arena& a, const Request& r) {
    Block* b = untouched_.find(r.need);
    if (b == nullptr) return nullptr;
    reserve_records(a);
    const std::size_t piece = slab_size(a, r.need);
    std::unique_ptr<Chunk> rest_chunk;
    if (b->size > piece && b->size - piece >= kGranule) rest_chunk = std::make_unique<Chunk>();  // may throw
    {
      ChunkGuard g(b->chunk);
      untouched_.remove(b);
      if (rest_chunk != nullptr) {
        // b's chunk shrinks to the slab; the rest becomes a chunk of its own, still untouched.
        Chunk* c = b->chunk;
        Block* rest = link_chunk(rest_chunk.release(), c->extent, b->addr + piece, b->size - piece, a.nodes.get());
        c->size = piece;
        b->size = piece;
        untouched_.insert(rest);
      }
      a.slab_bytes += b->size;
      insert_free(a, b, order_ != nullptr ? &a.fresh : &a.settled);
    }
    if (order_ != nullptr) record(a);
    return take_own(a, r.n, r.need, r.bytes, r.alignment, r.owner, kOwnClassScan);
  }

  // 2. (unbounded pools) Another stream's chunk that is wholly free, one
  //    settled block, and holds the request: the smallest such chunk moves
  //    to a whole, once a's stream waits on the other stream's event. Into
  //    a's `fresh` index (what carving leaves): a's own event does not
  //    cover that wait yet. nullptr if none (take_settled_elsewhere, which
  //    runs next, asks streams with uncovered frees to record). Requires
  //    the world. Cold, as take_settled_elsewhere: inlined (twice, for the
  //    latter) they used up GCC's inlining budget for this file, which then
  //    left merge_unmerged, AddressTable::erase_at and BiasedLock::unlock
  //    out of line in the fast paths - bench_pool_callgrind random 676.7
  //    -> 704.7 instructions per pair against 86ade50; cold, 670.6 (hot256
  //    232.0 -> 233.0, steady 1000 621.4 -> 615.8). Arena::received is
  //    counted in free_elsewhere, the one path that frees another arena's
  //    block, not in the free_uncached every free inlines: hot256 233.0 ->
  //    216.0.
  __attribute__((noinline, cold)) void* take_free_chunk_elsewhere(Arena& a, const Request& r, Waits& waits) {
    Block* best = nullptr;
    for (Chunk* c = chunks_; c != nullptr; c = c->next) {
      Block* b = c->first;
      if (c->allocated != 0 || b->next_phys != nullptr || b->size < r.need) continue;
      const Arena* other = b->index->owner();
      // (settled blocks were covered by the owner's event: it has one)
      if (other == nullptr || other == &a || b->index != &other->settled || other->event == nullptr) continue;
      if (best == nullptr || b->size < best->size) best = b;
    }
    if (best == nullptr) return nullptr;
    Arena& other = *best->index->owner();
    reserve_records(a);
    waits.wait(a.stream, other.stream, other.event);
    other.received -= std::min(other.received, best->size);
    ChunkGuard g(best->chunk);
    other.settled.remove(best);
    return carve(a, best, &a.fresh, r.n, r.bytes, r.alignment, r.owner);
  }

  // How much untouched memory arena a takes at once for a request of `need`:
  // at least the growth size, then as much as a took so far (capped).
  std::size_t slab_size(const Arena& a, std::size_t need) const noexcept {
    const std::size_t s = std::max({need, growth_, std::min(a.slab_bytes, kMaxGeometricGrowth)});
    return round_up(s, kGranule);
  }

  // 2. Another stream's settled block, once our stream waits on its event
  //    (only_received: only from streams with Arena::received left). Every
  //    other stream with uncovered frees is asked to record at its next
  //    free, whether or not a block was found: what it records is what the
  //    next shortage can take instead of growing (bench_pool_vs_malloc_core
  //    20000 1 handoff, asking only the streams looked at before the one
  //    that had a block: held / peak live median 1.393, max 2.036, against
  //    1.300 / 1.446). Requires the world.
  __attribute__((noinline, cold)) void* take_settled_elsewhere(Arena& a, const Request& r, Waits& waits,
                                                               bool only_received) {
    if (order_ == nullptr) return nullptr;
    Arena* from = nullptr;
    Block* b = nullptr;
    for (const auto& other : arenas_) {
      if (other.get() == &a) continue;
      if (!other->fresh.empty()) other->record_requested = true;
      if (b == nullptr && (!only_received || other->received != 0) && (b = other->settled.find(r.need)) != nullptr)
        from = other.get();
    }
    if (b == nullptr) return nullptr;
    reserve_records(a);
    waits.wait(a.stream, from->stream, from->event);
    void* p = take(a, b, &from->settled, r.n, r.bytes, r.alignment, r.owner);
    from->received -= std::min(from->received, r.n);
    return p;
  }

  // 4. Out of memory: from now on every free is covered at once. Make every
  //    stream's free memory a's (waiting on each one's event, or once on the
  //    whole device if some frees are not covered yet), so it coalesces; look
  //    again, at every block. Requires the world.
  void* take_everything(Arena& a, const Request& r, Waits& waits) {
    eager_ = true;
    flush_all_quick();  // the world was unlocked while growing
    if (order_ != nullptr) {
      bool moved = false;
      for (const auto& other : arenas_)
        if (other.get() != &a && !other->fresh.empty()) waits.device();
      for (const auto& other : arenas_) {
        if (other.get() == &a || (other->fresh.empty() && other->settled.empty())) continue;
        waits.wait(a.stream, other->stream, other->event);
        for (FreeIndex* idx : {&other->fresh, &other->settled}) {
          while (Block* b = idx->any()) {
            ChunkGuard g(b->chunk);
            idx->remove(b);
            insert_free(a, b, &a.fresh);
          }
        }
        other->unrecorded = 0;
        other->received = 0;  // all of it is a's now
        moved = true;
      }
      while (Block* b = untouched_.any()) {
        ChunkGuard g(b->chunk);
        untouched_.remove(b);
        insert_free(a, b, &a.fresh);
        moved = true;
      }
      // Every free block is in a's indexes now: join the chunks of each
      // extent again, so free neighbours across slab boundaries coalesce.
      join_slabs(a);
      // The moved blocks are now this stream's: its event must cover the
      // waits just made, or a later taker that waits on it would miss them.
      if (moved || !a.fresh.empty()) record(a);
    }
    return take_own(a, r.n, r.need, r.bytes, r.alignment, r.owner, SIZE_MAX);
  }

  // 5. Give wholly free chunks back and ask upstream for exactly what is
  //    needed (`tried`: the chunk size step 3 asked for). Requires the world.
  void* release_and_grow(World& world, Arena& a, const Request& r, std::size_t tried, std::string& upstream_error) {
    std::vector<Release> released;
    std::exception_ptr error;
    flush_all_quick();
    detach_free_chunks(a, released, error, every_chunk);
    if (!released.empty()) {
      world.unlock();
      give_back(released);
      world.lock();
    }
    if (error) std::rethrow_exception(error);
    const bool fits =
        !limited_ || (pool_size_ + pending_ <= maximum_ && r.need <= maximum_ - pool_size_ - pending_);
    if (fits && (!released.empty() || tried != r.need))
      return grow(world, a, r.need, r.n, r.bytes, r.alignment, r.owner, upstream_error);
    return nullptr;
  }

  // Requires the world.
  std::size_t largest_free() const noexcept {
    std::size_t largest = untouched_.largest();
    for (const auto& a : arenas_) largest = std::max({largest, a->fresh.largest(), a->settled.largest()});
    return largest;
  }

  std::string exhausted(std::size_t bytes, std::size_t alignment, const std::string& upstream_error) const {
    std::string m = "pool: cannot allocate " + bytes_text(bytes) + " (alignment " + std::to_string(alignment) + "): ";
    if (!upstream_error.empty()) {
      m += "upstream '" + std::string(upstream_->name()) + "' is out of memory (" + upstream_error + "); ";
    } else if (limited_) {
      m += "that would exceed maximum_size (" + bytes_text(maximum_) + "); ";
    }
    m += "the pool holds " + bytes_text(pool_size_) + " in " + std::to_string(chunk_count_) +
         " chunks, largest free block " + bytes_text(largest_free());
    return m;
  }

  // Join the chunks of every extent carved into slabs back into one chunk,
  // merging the free blocks that meet at the seams (all of them are in a's
  // indexes: take_everything moved them). Requires the world, which also
  // keeps every chunk lock free (they are taken only under an arena mutex).
  void join_slabs(Arena& a) noexcept {
    std::vector<Chunk*> sliced;
    try {
      for (Chunk* c = chunks_; c != nullptr; c = c->next)
        if (c->extent->chunks > 1) sliced.push_back(c);
    } catch (...) {
      return;  // no memory for the list: the slabs stay as they are, still correct
    }
    std::sort(sliced.begin(), sliced.end(), [](const Chunk* x, const Chunk* y) {
      return x->extent != y->extent ? x->extent < y->extent : x->addr < y->addr;
    });
    for (std::size_t i = 1; i < sliced.size(); ++i) {
      Chunk* lo = sliced[i - 1];
      Chunk* hi = sliced[i];
      if (lo->extent != hi->extent || lo->addr + lo->size != hi->addr) continue;
      Block* last = lo->first;
      while (last->next_phys != nullptr) last = last->next_phys;
      for (Block* b = hi->first; b != nullptr; b = b->next_phys) b->chunk = lo;
      Block* seam = hi->first;
      last->next_phys = seam;
      seam->prev_phys = last;
      lo->size += hi->size;
      lo->allocated += hi->allocated;
      unlink_chunk(hi);
      delete hi;
      sliced[i] = lo;
      if (last->index != nullptr && last->index == seam->index) {
        FreeIndex* idx = last->index;
        idx->remove(seam);
        idx->remove(last);
        pool_detail::swallow_next(a, last);
        idx->insert(last);
      }
    }
  }

  // Detach every extent whose chunks are all wholly free into `out` (to give
  // back unlocked; records go to a's cache). The streams its memory was
  // freed on may be gone, so a stream-ordered pool makes stream 0 wait on
  // their events (or, if some of those frees are not covered by an event
  // yet, waits for the whole device once) and gives extents back on stream
  // 0. A failed wait detaches nothing (error set). `may_go(chunk)` says
  // whether a wholly free chunk's extent may go at all (every chunk of the
  // extent must pass): trim and the out-of-memory step pass every_chunk,
  // merge_free_chunks only grown chunks without a fresh block, so that
  // nothing waits for the device. Requires the world.
  static bool every_chunk(const Chunk&) noexcept { return true; }
  static bool grown_and_settled(const Chunk& c) noexcept {
    if (!c.extent->grown) return false;
    for (const Block* b = c.first; b != nullptr; b = b->next_phys)
      if (b->index->fresh()) return false;
    return true;
  }
  void detach_free_chunks(Arena& a, std::vector<Release>& out, std::exception_ptr& error,
                          bool (*may_go)(const Chunk&) noexcept) {
    out.reserve(chunk_count_);
    for (Chunk* c = chunks_; c != nullptr; c = c->next) c->extent->busy = false;
    for (Chunk* c = chunks_; c != nullptr; c = c->next)
      if (c->allocated != 0 || !may_go(*c)) c->extent->busy = true;
    try {
      Waits waits(order_);
      for (Chunk* c = chunks_; c != nullptr; c = c->next) {
        if (c->extent->busy) continue;
        for (Block* b = c->first; b != nullptr; b = b->next_phys)
          if (b->index->fresh()) waits.device();
      }
      for (Chunk* c = chunks_; c != nullptr; c = c->next) {
        if (c->extent->busy) continue;
        for (Block* b = c->first; b != nullptr; b = b->next_phys)
          if (b->index->owner() != nullptr) waits.wait(0, b->index->owner()->stream, b->index->owner()->event);
      }
    } catch (...) {
      error = std::current_exception();
      return;
    }
    for (Chunk* c = chunks_; c != nullptr;) {
      Chunk* next = c->next;
      if (!c->extent->busy) {
        for (Block* b = c->first; b != nullptr;) {
          Block* after = b->next_phys;
          b->index->remove(b);
          a.nodes.put(b);
          b = after;
        }
        Extent* e = c->extent;
        unlink_chunk(c);
        delete c;
        if (e->chunks == 0) {
          pool_size_ -= e->size;
          --chunk_count_;
          out.push_back(Release{e->addr, e->size});
          delete e;
        }
      }
      c = next;
    }
  }

  // Return detached chunks to upstream, on stream 0 (no lock held). Rethrows the first failure.
  void give_back(const std::vector<Release>& released) {
    std::exception_ptr error;
    for (const Release& r : released) {
      try {
        upstream_->deallocate_for(id(), reinterpret_cast<void*>(r.addr), r.size, kGranule, 0);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  const ResourcePtr upstream_;
  StreamOrder* const order_;
  const std::uint64_t serial_;
  bool limited_ = false;
  std::size_t maximum_ = 0;
  std::size_t growth_ = 0;

  // Guards arenas_ and by_stream_; with every arena's mutex too (the World), everything below.
  mutable std::mutex world_;
  bool eager_ = false;           // record an event at every free (read under an arena's lock)
  std::size_t pool_size_ = 0;    // bytes held from upstream
  std::size_t pending_ = 0;      // bytes being requested from upstream right now
  std::size_t chunk_count_ = 0;
  Chunk* chunks_ = nullptr;
  std::vector<std::unique_ptr<Arena>> arenas_;  // never removed
  std::atomic<Arena*> listed_{nullptr};         // the same arenas, newest first (Arena::next_listed)
  std::unordered_map<stream_t, Arena*> by_stream_;
  Arena* host_arena_ = nullptr;     // a host pool's only arena (streams are all one)
  FreeIndex untouched_{nullptr, false};  // stream-ordered pools: memory no stream has used yet
  Arena spare_records_{0, SIZE_MAX};     // records for world-locked work without an arena
};

}  // namespace

ResourcePtr make_pool_resource(ResourcePtr upstream, const PoolOptions& options) {
  return std::make_shared<PoolResource>(std::move(upstream), options);
}

PoolInfo pool_info(const Resource& r) {
  auto* pool = dynamic_cast<const PoolResource*>(&r);
  if (pool == nullptr) {
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a pool");
  }
  return pool->info();
}

}  // namespace tether::core
