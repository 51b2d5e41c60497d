// Pool internals: arenas and the block operations on them.
//
// An arena is what one stream of a stream-ordered pool owns (a host pool has
// one arena): its free blocks, the blocks it handed out, spare records, and a
// mutex. The operations here split, merge, index and carve blocks for one
// arena; they touch nothing pool-wide, so the allocate and free fast paths
// need only the arena's mutex and the chunk lock of the block at hand.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "biased_lock.hpp"
#include "pool_block.hpp"
#include "pool_block_table.hpp"
#include "pool_free_index.hpp"

namespace tether::core::pool_detail {

// Records a carve may consume: a leading piece, a trailing piece, a new chunk's block.
inline constexpr std::size_t kRecordsPerAllocation = 3;

// Spare Block records, allocated in slabs and recycled through a free list.
class NodePool {
 public:
  void reserve(std::size_t k) {
    while (spare_ < k) add_slab();
  }
  std::size_t spare() const noexcept { return spare_; }
  Block* get() noexcept {  // requires reserve()
    Block* b = free_;
    free_ = b->links.next;
    --spare_;
    *b = Block{};
    return b;
  }
  void put(Block* b) noexcept {
    b->index = nullptr;
    b->links.next = free_;
    free_ = b;
    ++spare_;
  }

 private:
  static constexpr std::size_t kSlab = 256;
  void add_slab() {
    slabs_.reserve(slabs_.size() + 1);
    std::unique_ptr<Block[]> slab(new Block[kSlab]);
    for (std::size_t i = 0; i < kSlab; ++i) put(&slab[i]);
    slabs_.push_back(std::move(slab));
  }
  std::vector<std::unique_ptr<Block[]>> slabs_;
  Block* free_ = nullptr;
  std::size_t spare_ = 0;
};

// Recently freed small blocks of one arena, kept whole (not coalesced, not
// in a size index) so that the next request of the same size on the same
// stream takes one back in O(1): no index search, no split, no merge. For
// the hot pattern (allocate and free one small size, repeatedly) that was
// most of a pair's cost (bench_pool_callgrind hot256). A cached block looks
// allocated to everything else (index nullptr, still counted in its chunk's
// `allocated`), so neighbours never merge into it, trim keeps its chunk and
// no other stream can take it; freed on this arena's stream, it is handed
// to this stream only (stream order makes that safe, as for `fresh`). It
// also stays in the arena's table (it was allocated from this arena), marked
// cached (Request::kCached), so that neither the free nor the next
// allocation of it touches the table: a free of it finds the mark and is
// refused as a free of memory not handed out (INVALID_ARGUMENT, nothing
// changed), and flushing it out of the cache takes it out of the table. The
// pool flushes the cache into the free indexes (coalescing) before it looks
// further: before the slow path, growth, trim and info. Bounded in depth per
// size and in bytes, so little memory is ever held back from coalescing.
//
// Larger blocks have one slot of their own, for the last larger size that
// missed (note_large(): the pool asks it before it flushes, on the miss
// path only, so the small sizes' hot path is as before). A tensor or array
// of one size allocated and freed over and over (a training step's
// activations, bench_pool_vs_malloc_core hot's 64 KiB and 1 MiB rows) then
// skips the split and the merge too. The next request of any other size
// that misses flushes it, like the rest of the cache, so it holds back at
// most kLargeDepth blocks and kLargeMaxBytes, and only while one size repeats.
// Guarded by the arena's lock.
class QuickCache {
 public:
  static constexpr std::size_t kMaxGranules = 64;  // blocks up to 16 KiB
  static constexpr unsigned kDepth = 8;            // per size
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 10;
  static constexpr unsigned kLargeDepth = 4;  // larger blocks, of one size
  static constexpr std::size_t kLargeMaxBytes = std::size_t{64} << 20;

  bool empty() const noexcept { return nonempty_ == 0 && large_ == nullptr; }

  // A request of `granules` (more than kMaxGranules, plain alignment) missed
  // the small sizes: a cached block of exactly that size, or nullptr.
  Block* pop_large(std::size_t granules) noexcept {
    Block* const b = large_;
    if (b == nullptr || large_granules_ != granules) return nullptr;
    take_large(b);
    return b;
  }

  // ...and found none: larger blocks freed from now on are kept if they
  // are of this size. (Cached blocks of another size are flushed next.)
  void note_large(std::size_t granules) noexcept { large_granules_ = granules; }

  // The cache's slot for a request of `granules` (kMaxGranules: none, the
  // request is not 1 ... kMaxGranules granules or `plain` is false, i.e.
  // it asks for more alignment than the granule). Selects, no branch: on
  // mixed sizes whether a request is small is a coin toss.
  static std::size_t slot(std::size_t granules, bool plain) noexcept {
    const std::size_t i = plain ? granules - 1 : kMaxGranules;  // (granules 0: wraps, then capped)
    return i < kMaxGranules ? i : kMaxGranules;
  }

  // A request of `granules`, with slot(granules, ...) == i, is being
  // served: the cache keeps freed blocks only of the last two sizes (with a
  // slot) asked for, the ones the next requests are likely to ask for
  // again. Caching any other size costs a push now and a flush at the next
  // request of another size, for nothing (the random pattern,
  // bench_pool_callgrind random: a hit for 1 in 100). Returns a cached block
  // of exactly that size, or nullptr (i == kMaxGranules: heads_[i] is
  // always empty).
  Block* note_and_pop(std::size_t granules, std::size_t i) noexcept {
    Block* b = heads_[i];
    if (b != nullptr) {  // a hit: the hot pair's path, where this branch is predictable
      if ((recent_ & 0xffu) != granules) recent_ = static_cast<std::uint16_t>((recent_ << 8) | granules);
      take(b, i);
    } else {
      // A miss: whether the request has a slot is a coin toss on mixed
      // sizes, so a mask, not a branch or a conditional store (GCC 12
      // branched on those): bench_pool_callgrind random 694 -> 711
      // instructions but 5.5 -> 4.8 mispredicted branches per pair.
      const std::uint32_t r = recent_;
      const std::uint32_t shifted = ((r << 8) | static_cast<std::uint32_t>(granules & 0xffu)) & 0xffffu;
      const std::uint32_t mask =
          0u - static_cast<std::uint32_t>((i < kMaxGranules) & ((r & 0xffu) != granules));
      recent_ = static_cast<std::uint16_t>(r ^ ((r ^ shifted) & mask));
    }
    return b;
  }

  // Any cached block, or nullptr.
  Block* pop_any() noexcept {
    if (nonempty_ == 0) {
      Block* const b = large_;
      if (b != nullptr) take_large(b);
      return b;
    }
    const unsigned i = static_cast<unsigned>(__builtin_ctzll(nonempty_));
    Block* b = heads_[i];
    take(b, i);
    return b;
  }

  // Keep freed block b (allocated-looking: index nullptr) if there is room;
  // it is then marked cached (its request is gone).
  bool push(Block* b) noexcept {
    // recent_ holds sizes of 1 ... kMaxGranules only (or 0, which no block
    // has), so this one test also sends larger blocks to their own slot; it
    // rarely passes on mixed sizes, where a range test first was a coin toss.
    const std::size_t g = b->size >> kGranuleShift;
    if (g != (recent_ & 0xffu) && g != (recent_ >> 8)) return push_large(b, g);
    const std::size_t i = g - 1;
    if (depth_[i] >= kDepth || bytes_ + b->size > kMaxBytes) return false;
    b->request.tag = Block::Request::kCached;
    b->cache.next = heads_[i];
    heads_[i] = b;
    ++depth_[i];
    bytes_ += b->size;
    nonempty_ |= std::uint64_t{1} << i;
    return true;
  }

 private:
  static_assert(kMaxGranules <= 64, "one bit per size");
  void take(Block* b, std::size_t i) noexcept {
    heads_[i] = b->cache.next;
    if (--depth_[i] == 0) nonempty_ &= ~(std::uint64_t{1} << i);
    bytes_ -= b->size;
  }
  // large_granules_ is 0 or more than kMaxGranules, so this also keeps out
  // the small sizes push() did not take.
  bool push_large(Block* b, std::size_t g) noexcept {
    if (g != large_granules_ || large_depth_ >= kLargeDepth || large_bytes_ + b->size > kLargeMaxBytes) return false;
    b->request.tag = Block::Request::kCached;
    b->cache.next = large_;
    large_ = b;
    ++large_depth_;
    large_bytes_ += b->size;
    return true;
  }
  void take_large(Block* b) noexcept {
    large_ = b->cache.next;
    --large_depth_;
    large_bytes_ -= b->size;
  }
  std::uint64_t nonempty_ = 0;  // bit i: heads_[i] non-empty
  std::uint16_t recent_ = 0;  // the last two sizes requested (note_and_pop), in granules, the last in the low byte; 0: none
  std::size_t bytes_ = 0;
  Block* heads_[kMaxGranules + 1] = {};  // [kMaxGranules]: always empty (note_and_pop)
  std::uint8_t depth_[kMaxGranules] = {};
  Block* large_ = nullptr;  // cached larger blocks, all of large_granules_
  std::size_t large_granules_ = 0;  // the last larger size that missed (note_large); 0: none
  std::size_t large_bytes_ = 0;
  unsigned large_depth_ = 0;
};

// An arena's lock: biased to the thread that uses the arena (biased_lock.hpp),
// which then takes it without an atomic read-modify-write; any other thread
// pays one atomic exchange (and, the first times, a revocation of the bias).
using ArenaLock = detail::BiasedLock;

// What one stream of a stream-ordered pool owns (a host pool has one arena):
// the blocks it freed (fresh ones not yet covered by its event, settled ones
// covered), the blocks it handed out, a quick cache of small freed blocks,
// and spare records. Its lock guards all of that and the arena's fields; the
// chunk locks guard the physical layout.
struct alignas(64) Arena {
  Arena(stream_t s, std::size_t i) noexcept : stream(s), id(i), fresh(this, true), settled(this, false) {}
  ArenaLock mutex;
  const stream_t stream;
  const std::size_t id;  // creation order = lock order
  FreeIndex fresh;
  FreeIndex settled;
  StreamOrder::event_t event = nullptr;  // recorded on `stream`; covers `settled`
  unsigned unrecorded = 0;               // frees into `fresh` since the last record (flush_quick)
  bool record_requested = false;         // another stream wants this arena's fresh memory
  BlockTable table;                      // the blocks this arena handed out
  NodePool nodes;
  std::size_t used = 0;                  // bytes in the blocks of `table`
  std::size_t slab_bytes = 0;            // untouched memory taken as chunks of its own (pool.cpp)
  // Bytes of blocks other arenas handed out that were freed on this stream
  // (into this arena's indexes), less what other streams took back since:
  // an unbounded pool lets another stream carve pieces of this arena's
  // memory before growing only while this is not 0 (pool.cpp, growth order).
  std::size_t received = 0;
  QuickCache quick;                      // small blocks freed on this stream, kept whole
  // Frees not merged yet (merge_unmerged): at most kUnmerged blocks, out of
  // `table`, still allocated-looking (index nullptr, counted in their
  // chunk's `allocated`), so nothing merges into them or hands them out.
  static constexpr unsigned kUnmerged = 8;
  unsigned unmerged_count = 0;
  Block* unmerged[kUnmerged];
  // The pool's outstanding counters (Resource::self_tally): allocations this
  // arena handed out minus those freed on its stream, and their requested
  // bytes; of those, the ones dependents took (allocate_for). Signed: a block
  // allocated on one stream and freed on another leaves +1 here, -1 there.
  // Written under the lock (a relaxed load and store: no read-modify-write),
  // read without it.
  std::atomic<std::int64_t> live_count{0};
  std::atomic<std::int64_t> live_bytes{0};
  std::atomic<std::int64_t> dependent_count{0};
  std::atomic<std::int64_t> dependent_bytes{0};
  Arena* next_listed = nullptr;          // the pool's list of arenas, read without its lock (pool.cpp)
};

// Count an allocation (sign +1) or a free (-1) of `bytes` requested bytes by
// `owner` in a's counters. a locked.
inline void tally(Arena& a, owner_t owner, std::int64_t sign, std::size_t bytes) noexcept {
  const auto add = [](std::atomic<std::int64_t>& c, std::int64_t d) {
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  };
  const std::int64_t b = sign * static_cast<std::int64_t>(bytes);
  add(a.live_count, sign);
  add(a.live_bytes, b);
  if (owner != kCaller) {
    add(a.dependent_count, sign);
    add(a.dependent_bytes, b);
  }
}

// Holds a chunk's lock while blocks of it are split, merged or re-indexed,
// unless the chunk is not shared (a host pool's: its one arena's mutex is held).
class ChunkGuard {
 public:
  explicit ChunkGuard(Chunk* c) noexcept : c_(c->shared ? c : nullptr) {
    if (c_ != nullptr) c_->lock.lock();
  }
  ~ChunkGuard() {
    if (c_ != nullptr) c_->lock.unlock();
  }
  ChunkGuard(const ChunkGuard&) = delete;
  ChunkGuard& operator=(const ChunkGuard&) = delete;

 private:
  Chunk* c_;
};

// Everything an allocation by arena `a` may need besides memory, so that
// carving cannot fail half-way. Throws std::bad_alloc with nothing changed.
inline void reserve_records(Arena& a) {
  if (a.nodes.spare() < kRecordsPerAllocation + 1) a.nodes.reserve(kRecordsPerAllocation + 1);
  a.table.reserve_one();
}

// Split b at `offset`; returns the new upper piece (not free, not indexed). Chunk lock held.
inline Block* split(Arena& a, Block* b, std::size_t offset) noexcept {
  Block* c = a.nodes.get();
  c->addr = b->addr + offset;
  c->size = b->size - offset;
  c->chunk = b->chunk;
  c->prev_phys = b;
  c->next_phys = b->next_phys;
  if (c->next_phys != nullptr) c->next_phys->prev_phys = c;
  b->next_phys = c;
  b->size = offset;
  return c;
}

// Whether free block nb (may be null) may merge into a block going into
// idx: it is in idx itself, or idx is fresh and nb is in the same arena's
// settled index (the merged block is then uncovered until the next record,
// which is conservative). `alt` is idx's settled partner (idx if none). One
// comparison pair, no branch between them: whether a neighbour is free is a
// coin toss on mixed sizes.
inline const FreeIndex* join_partner(const FreeIndex* idx) noexcept {
  return idx->fresh() ? &idx->owner()->settled : idx;
}
inline bool joins(const Block* nb, const FreeIndex* idx, const FreeIndex* alt) noexcept {
  return nb != nullptr && ((nb->index == idx) | (nb->index == alt));
}

// Merge b's upper neighbour (already out of any index) into b; its record
// goes to a's cache. Chunk lock held.
inline void swallow_next(Arena& a, Block* b) noexcept {
  Block* n = b->next_phys;
  b->size += n->size;
  b->next_phys = n->next_phys;
  if (b->next_phys != nullptr) b->next_phys->prev_phys = b;
  a.nodes.put(n);
}

// Put b (not indexed) into idx, merging it with neighbours that may join it
// (records of merged-away blocks go to a's cache). Chunk lock held.
inline void insert_free(Arena& a, Block* b, FreeIndex* idx) noexcept {
  const FreeIndex* const alt = join_partner(idx);
  if (Block* p = b->prev_phys; joins(p, idx, alt)) {
    p->index->remove(p);
    swallow_next(a, p);
    b = p;
  }
  if (Block* n = b->next_phys; joins(n, idx, alt)) {
    n->index->remove(n);
    swallow_next(a, b);
  }
  idx->insert(b);
}

// Give back block b, which a handed out (out of every table, still counted
// in its chunk's `allocated`): into idx, merged with its free neighbours.
// The one way a freed block becomes free memory (a free, a flush of the
// quick cache, a batch of unmerged frees). a locked.
inline void release_block(Arena& a, Block* b, FreeIndex* idx) noexcept {
  ChunkGuard g(b->chunk);
  --b->chunk->allocated;
  insert_free(a, b, idx);
}

// Put the upper piece r of a block being handed out (just split off, not
// indexed) into idx. Its lower neighbour is that block, allocated, so only
// the upper one may join. Chunk lock held.
inline void insert_rest(Arena& a, Block* r, FreeIndex* idx) noexcept {
  if (Block* n = r->next_phys; joins(n, idx, join_partner(idx))) {
    n->index->remove(n);
    swallow_next(a, r);
  }
  idx->insert(r);
}

// Hand out n bytes of free block b (already removed from `home`, the index
// it came from, and large enough for the alignment) as arena a's. Unused
// pieces go back to `home`: they were never touched by a's stream.
// Requires reserve_records(a) and b's chunk lock.
inline void* carve(Arena& a, Block* b, FreeIndex* home, std::size_t n, std::size_t bytes,
                   std::size_t alignment, owner_t owner) noexcept {
  if (alignment > kGranule) {
    const std::uintptr_t aligned = (b->addr + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    if (aligned != b->addr) {
      Block* rest = split(a, b, aligned - b->addr);
      insert_free(a, b, home);
      b = rest;
    }
  }
  if (b->size - n >= kGranule) insert_rest(a, split(a, b, n), home);
  b->index = nullptr;
  b->request.bytes = bytes;
  b->request.set(alignment, owner);
  ++b->chunk->allocated;
  a.table.insert(b->addr, b);
  a.used += b->size;
  tally(a, owner, +1, bytes);
  return reinterpret_cast<void*>(b->addr);
}

// Take free block b out of idx and carve it for arena a.
inline void* take(Arena& a, Block* b, FreeIndex* idx, std::size_t n, std::size_t bytes, std::size_t alignment,
                  owner_t owner) {
  reserve_records(a);  // may throw: nothing changed yet
  ChunkGuard g(b->chunk);
  idx->remove(b);
  return carve(a, b, idx, n, bytes, alignment, owner);
}

// A block of arena a's own (a locked): the best fit among a bounded look at
// the request's own size class, else O(1) in each index. nullptr if none
// fits. Looking at the own class first keeps larger blocks whole for larger
// requests: held / peak live on the random pattern (8 seeds, growth by a
// sixteenth) went from median 1.207, max 1.253 to median 1.180, max 1.216.
// Of a fresh and a settled candidate the smaller is taken (a fresh one on a
// tie): a stream-ordered pool took any fresh block before a settled one that
// fit better, and held more than a host pool on the same pattern
// (bench_pool_vs_malloc_core 200000 1 footprint-ordered, 8 seeds: median
// 1.259, max 1.319 -> 1.218, 1.307; 24 seeds at 20,000 / 200,000 / 1,000,000
// ops: median 1.317 / 1.283 / 1.240 -> 1.252 / 1.230 / 1.179, the host pool's
// 1.264 / 1.230 / 1.183). bench_pool_callgrind random 669.3 -> 647.8, steady
// 1000 621.6 -> 593.7 instructions per pair (hot256 unchanged). Sets `idx`
// to the index the block is in.
inline Block* pick_own(Arena& a, std::size_t need, std::size_t scan, FreeIndex*& idx) noexcept {
  Block* f = a.fresh.scan_own_class(need, scan);
  Block* s = a.settled.scan_own_class(need, scan);
  if (f == nullptr && s == nullptr) {
    f = a.fresh.find(need);
    s = a.settled.find(need);
  }
  if (f != nullptr && (s == nullptr || f->size <= s->size)) {
    idx = &a.fresh;
    return f;
  }
  idx = &a.settled;
  return s;
}

inline void* take_own(Arena& a, std::size_t n, std::size_t need, std::size_t bytes, std::size_t alignment,
                      owner_t owner, std::size_t scan) {
  FreeIndex* idx;
  Block* b = pick_own(a, need, scan, idx);
  if (b == nullptr) return nullptr;
  return take(a, b, idx, n, bytes, alignment, owner);
}

// Put every block of a's quick cache into idx (coalescing with free
// neighbours), out of a's table. Blocks that go into a fresh index count as
// frees not yet covered by a's event (free_block does not count them while
// they are cached). a locked.
inline void flush_quick(Arena& a, FreeIndex* idx) noexcept {
  while (Block* b = a.quick.pop_any()) {
    a.table.erase_at(a.table.find(b->addr));  // there: a cached block stays in its arena's table
    release_block(a, b, idx);
    if (idx->fresh()) ++a.unrecorded;
  }
}

// Merge a's unmerged frees into idx, as a batch. A free that misses the
// quick cache checks the block's request and takes it out of the table at
// once (so a second free is refused as before), but its merge waits here:
// coalescing loads the records of both physical neighbours, and with many
// blocks live those are cache misses on the critical path of each free
// (its branches wait for them, and everything after a mispredicted one is
// thrown away). The free prefetches the neighbours' records instead
// (PoolResource::free_unmerged), so by the time the batch merges they have
// arrived, their misses overlapped with other work, and the free itself
// ends at the request check (the allocation after it no longer waits
// behind the merge). The live sweep (bench_pool_vs_malloc_core 200000 3
// sweep, 5 interleaved rounds, medians): 100k live 170.0 -> 142.4 ns per
// pair, 1k 84.9 -> 82.5 (same); bench_pool_callgrind steady 100000: 567 ->
// 583 instructions, the same 4.79 LL read misses per pair (overlapped now,
// not fewer). A batch of 16 timed the same as 8 (142 ns); 8 holds less
// memory back from merging. Prefetching at the free rather than in a first
// pass over the batch here: steady 1000 639 -> 635 instructions, random
// 684 -> 680, 100k 141.6 -> 139.4 ns and 1k 82.3 -> 79.7 (5 rounds).
// Not kept (same sweep, interleaved against the version before each):
//  - a free mark per record in a side array (a byte per record at the head
//    of each 16 KiB record slab; coalescing read the neighbour's mark, not
//    its record): steady 100000 LL read misses 4.79 -> 3.11 per pair, but
//    +53 instructions (random +71) and no faster (100k 154-172 vs 157-172 ns);
//  - a copy of the request in the table slot, so the free needs not load
//    the block's record: as two more words per slot (32 bytes), 100k 139-148
//    -> 149-170 ns (the larger table cost more); packed into the spare bits
//    of the 16-byte slot, +36 instructions per pair and 100k 134.1 -> 133.1.
// Blocks that go into a fresh index count as frees not yet covered by a's
// event, as in flush_quick. a locked.
inline void merge_unmerged(Arena& a, FreeIndex* idx) noexcept {
  const unsigned n = a.unmerged_count;
  for (unsigned i = 0; i < n; ++i) release_block(a, a.unmerged[i], idx);
  if (idx->fresh()) a.unrecorded += n;
  a.unmerged_count = 0;
}

// Move every fresh block of a to its settled index (a's event was just
// recorded and covers them). a locked.
inline void settle(Arena& a) noexcept {
  while (Block* b = a.fresh.any()) {
    ChunkGuard g(b->chunk);
    a.fresh.remove(b);
    insert_free(a, b, &a.settled);
  }
  a.unrecorded = 0;
  a.record_requested = false;
}

}  // namespace tether::core::pool_detail
