// PoolResource: a coalescing suballocator over any upstream.
//
// Chunks from upstream are carved into blocks. Free blocks are indexed by
// size in a TLSF index (pool_free_index.hpp); allocated ones by address in a
// hash table (pool_block_table.hpp). Records live in host memory, outside the
// pooled memory, so the upstream may be device memory.
//
// Stream ordering (only when upstream->stream_order() is non-null; otherwise
// every stream is normalised to 0 and there is one index; see Waits below for
// how memory changes streams): each stream that
// freed memory has its own index, so "a block last freed on S" is an O(1)
// search of S's index and needs no CUDA call. Physical neighbours are
// coalesced only when they are free on the same stream. Another stream A's
// free memory goes to S only after S waits on A's event (see Waits).
//
// Locking: one mutex. Upstream allocate/deallocate run with it released.
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

#include "pool_block.hpp"
#include "pool_block_table.hpp"
#include "pool_free_index.hpp"
#include "tether_core/process.hpp"

namespace tether::core {

namespace {

using pool_detail::Block;
using pool_detail::BlockTable;
using pool_detail::Chunk;
using pool_detail::FreeIndex;
using pool_detail::kGranule;

constexpr std::size_t kDefaultGrowth = std::size_t{1} << 20;
// The pool grows by at least its current size (geometric growth, few
// chunks), but never by more than this unless a single request needs it.
constexpr std::size_t kMaxGeometricGrowth = std::size_t{1} << 30;
// How many blocks of a request's own size class are examined before growing.
constexpr std::size_t kOwnClassScan = 16;
// Records a carve may consume: a leading piece, a trailing piece, a new chunk's block.
constexpr std::size_t kRecordsPerAllocation = 3;

constexpr std::size_t round_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) & ~(a - 1); }

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

// A chunk detached from the pool, to be given back to upstream unlocked.
struct Release {
  std::uintptr_t addr;
  std::size_t size;
  stream_t stream;
};

// Memory freed on stream A may go to another stream S only once A's work up
// to the free is done. A may have been destroyed since (CuPy and PyTorch
// streams die with their Python objects) and a destroyed stream's handle must
// never be used, so every free on A re-records A's index event (A is alive
// then: the caller just used it) and S waits on that event, never on A. The
// wait never blocks the host. Each index is waited for at most once per
// operation; same-stream reuse and memory no stream has used need no wait.
class Waits {
 public:
  explicit Waits(StreamOrder* order) noexcept : order_(order) {}
  void wait(stream_t waiter, const FreeIndex* producer) {
    if (order_ == nullptr || producer->stream() == waiter) return;
    if (std::find(done_.begin(), done_.end(), producer) != done_.end()) return;
    if (producer->event != nullptr) {
      order_->wait_event(waiter, producer->event);
    } else {
      // Not reached: an index gets blocks only by a free or by growing, and
      // both record its event. A device-wide wait is correct, if slow.
      order_->synchronize_device();
    }
    done_.push_back(producer);
  }

 private:
  StreamOrder* order_;
  std::vector<const FreeIndex*> done_;
};

std::string bytes_text(std::uint64_t n) { return std::to_string(n) + " bytes"; }

Properties pool_properties(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("pool: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_POOL;
  return p;
}

// The stream key of the index of memory no stream has used (no CUstream has this value).
constexpr stream_t kUntouched = ~stream_t{0};

class PoolResource final : public Resource {
 public:
  PoolResource(ResourcePtr upstream, const PoolOptions& o)
      : Resource(pool_properties(upstream)), upstream_(std::move(upstream)), order_(upstream_->stream_order()) {
    if (o.maximum_size != 0 && o.initial_size > o.maximum_size) {
      throw_invalid_argument("pool: initial_size (" + bytes_text(o.initial_size) + ") exceeds maximum_size (" +
                             bytes_text(o.maximum_size) + ")");
    }
    const std::size_t huge = SIZE_MAX - 2 * kMaxAlignment;  // beyond this nothing can be allocated anyway
    limited_ = o.maximum_size != 0;
    maximum_ = o.maximum_size & ~(kGranule - 1);  // chunks are whole granules
    growth_ = round_up(std::min(o.growth_size == 0 ? kDefaultGrowth : o.growth_size, huge), kGranule);
    std::size_t initial = round_up(std::min(o.initial_size, huge), kGranule);
    if (limited_) initial = std::min(initial, maximum_);

    // Memory no stream has used yet (the initial chunk, what growing adds
    // beyond the request) goes to any stream without a wait.
    const stream_t first = order_ != nullptr ? kUntouched : stream_t{0};
    indices_.push_back(std::make_unique<FreeIndex>(first));
    last_index_ = indices_.back().get();
    by_stream_.emplace(first, last_index_);
    if (order_ != nullptr) untouched_ = last_index_;

    if (initial != 0) {
      void* mem = nullptr;
      try {
        mem = upstream_->allocate(initial, kGranule, 0);
        // Memory from a stream-ordered upstream is ordered on the stream it was
        // asked for on; waiting once here makes the initial chunk any stream's.
        if (order_ != nullptr) order_->synchronize(0);
      } catch (const OutOfMemory& e) {
        throw OutOfMemory("pool: cannot obtain its initial_size of " + bytes_text(initial) + " from upstream '" +
                          upstream_->name() + "': " + e.what());
      }
      try {
        nodes_.reserve(1);
        Block* b = add_chunk(std::make_unique<Chunk>(), mem, initial);
        insert_free(b, last_index_);
      } catch (...) {
        upstream_->deallocate(mem, initial, kGranule, 0);
        throw;
      }
    }
  }

  ~PoolResource() override {
    // CUDA memory is leaked once the process exits: the context may be gone.
    const bool leak = order_ != nullptr && process_is_exiting();
    // The streams the memory was freed on may be gone: order stream 0 after
    // every index's event, then give everything back on stream 0.
    bool settled = leak || order_ == nullptr || chunks_ == nullptr;
    if (!settled) {
      try {
        Waits waits(order_);
        for (const auto& idx : indices_)
          if (idx.get() != untouched_) waits.wait(0, idx.get());
        settled = true;
      } catch (...) {
        // The device cannot be ordered: leak rather than free memory in use.
      }
    }
    for (Chunk* c = chunks_; c != nullptr;) {
      Chunk* next = c->next;
      if (settled && !leak) {
        try {
          upstream_->deallocate(reinterpret_cast<void*>(c->addr), c->size, kGranule, 0);
        } catch (...) {
          // Nothing sensible to do in a destructor; the chunk is lost.
        }
      }
      delete c;
      c = next;
    }
    if (order_ != nullptr && !leak)
      for (const auto& idx : indices_) order_->destroy_event(idx->event);
  }

  const char* name() const noexcept override { return "pool"; }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  // A pool over a stream-ordered pool is stream-ordered too.
  StreamOrder* stream_order() noexcept override { return order_; }

  void trim() override {
    std::vector<Release> released;
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      detach_free_chunks(released, error);
    }
    give_back(released);
    if (error) std::rethrow_exception(error);
  }

  PoolInfo info() const {
    std::lock_guard<std::mutex> lock(mutex_);
    PoolInfo i;
    i.pool_size = pool_size_;
    i.free_bytes = pool_size_ - used_;
    i.chunk_count = chunk_count_;
    for (const auto& idx : indices_) i.largest_free_block = std::max<std::uint64_t>(i.largest_free_block, idx->largest());
    return i;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    if (order_ == nullptr) stream = 0;
    const std::size_t n = round_up(bytes, kGranule);
    // Blocks start on granule boundaries; a larger alignment is found by
    // searching for enough extra to carve off a leading piece.
    const std::size_t need = alignment > kGranule ? n + (alignment - kGranule) : n;
    std::unique_lock<std::mutex> lock(mutex_);
    reserve_records();
    FreeIndex* idx = order_ != nullptr ? index_for(stream) : last_index_;  // host pools: one index
    if (Block* b = idx->find(need)) {  // the fast path: O(1), no CUDA call
      idx->remove(b);
      return carve(b, idx, n, bytes, alignment);
    }
    return allocate_slow(lock, idx, n, need, bytes, alignment, stream);
  }

  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    if (order_ == nullptr) stream = 0;
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t slot = table_.find(addr);
    if (slot == BlockTable::npos) {
      throw_invalid_argument("pool: pointer " + hex(addr) + " was not allocated by this pool (or was already freed)");
    }
    Block* b = table_.at(slot);
    if (b->request.bytes != bytes) {
      throw_invalid_argument("pool: size mismatch freeing " + hex(addr) + ": allocated " + bytes_text(b->request.bytes) +
                             ", freed with " + bytes_text(bytes));
    }
    if (b->request.alignment != alignment) {
      throw_invalid_argument("pool: alignment mismatch freeing " + hex(addr) + ": allocated with " +
                             std::to_string(b->request.alignment) + ", freed with " + std::to_string(alignment));
    }
    FreeIndex* idx = order_ != nullptr ? index_for(stream) : last_index_;  // may throw; nothing changed yet
    if (order_ != nullptr) {
      // Capture the stream's work up to this free while its handle is surely alive.
      if (idx->event == nullptr) idx->event = order_->create_event();
      order_->record_event(idx->event, stream);  // may throw; nothing changed yet
    }
    table_.erase_at(slot);
    --b->chunk->allocated;
    used_ -= b->size;
    insert_free(b, idx);
  }

 private:
  static std::string hex(std::uintptr_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#jx", static_cast<std::uintmax_t>(v));
    return buf;
  }

  // The stream a free block was freed on; 0 for an allocated one (only asked
  // of allocated blocks when a pool is destroyed with allocations outstanding).
  static stream_t stream_of(const Block* b) noexcept { return b->index != nullptr ? b->index->stream() : 0; }

  // Everything an allocation may need besides memory, so that carving can
  // not fail half-way. Throws std::bad_alloc with nothing changed.
  void reserve_records() {
    if (nodes_.spare() < kRecordsPerAllocation) nodes_.reserve(kRecordsPerAllocation);
    table_.reserve_one();
  }

  // The free index of `stream`, created on first use (may throw std::bad_alloc).
  FreeIndex* index_for(stream_t stream) {
    if (last_index_->stream() == stream) return last_index_;
    auto it = by_stream_.find(stream);
    if (it == by_stream_.end()) {
      indices_.reserve(indices_.size() + 1);
      auto idx = std::make_unique<FreeIndex>(stream);
      it = by_stream_.emplace(stream, idx.get()).first;
      indices_.push_back(std::move(idx));  // cannot throw: reserved
    }
    last_index_ = it->second;
    return last_index_;
  }

  // Split b at `offset`; returns the new upper piece (not free, not indexed).
  Block* split(Block* b, std::size_t offset) noexcept {
    Block* c = nodes_.get();
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

  // Put b (not indexed) into idx, merging it with neighbours free in idx.
  void insert_free(Block* b, FreeIndex* idx) noexcept {
    if (Block* p = b->prev_phys; p != nullptr && p->index == idx) {
      idx->remove(p);
      p->size += b->size;
      p->next_phys = b->next_phys;
      if (p->next_phys != nullptr) p->next_phys->prev_phys = p;
      nodes_.put(b);
      b = p;
    }
    if (Block* n = b->next_phys; n != nullptr && n->index == idx) {
      idx->remove(n);
      b->size += n->size;
      b->next_phys = n->next_phys;
      if (b->next_phys != nullptr) b->next_phys->prev_phys = b;
      nodes_.put(n);
    }
    idx->insert(b);
  }

  // Hand out n bytes of free block b (already removed from `home`, the index
  // it came from, and large enough for the alignment). Unused pieces go back
  // to `home`: they were never touched by `stream`.
  void* carve(Block* b, FreeIndex* home, std::size_t n, std::size_t bytes, std::size_t alignment) noexcept {
    if (alignment > kGranule) {
      const std::uintptr_t aligned = (b->addr + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
      if (aligned != b->addr) {
        Block* rest = split(b, aligned - b->addr);
        insert_free(b, home);
        b = rest;
      }
    }
    if (b->size - n >= kGranule) insert_free(split(b, n), home);
    b->index = nullptr;
    b->request.bytes = bytes;
    b->request.alignment = alignment;
    table_.insert(b->addr, b);
    ++b->chunk->allocated;
    used_ += b->size;
    return reinterpret_cast<void*>(b->addr);
  }

  // Link a new chunk of `size` bytes at `mem`; returns its one block (not indexed).
  Block* add_chunk(std::unique_ptr<Chunk> chunk, void* mem, std::size_t size) noexcept {
    Chunk* c = chunk.release();
    c->addr = reinterpret_cast<std::uintptr_t>(mem);
    c->size = size;
    c->next = chunks_;
    if (chunks_ != nullptr) chunks_->prev = c;
    chunks_ = c;
    Block* b = nodes_.get();
    b->addr = c->addr;
    b->size = size;
    b->chunk = c;
    c->first = b;
    pool_size_ += size;
    ++chunk_count_;
    return b;
  }

  // How much to ask upstream for so that `need` fits; 0 if the maximum forbids it.
  std::size_t growth_for(std::size_t need) const noexcept {
    std::size_t chunk = std::max({need, growth_, std::min(pool_size_, kMaxGeometricGrowth)});
    if (limited_) {
      const std::size_t held = pool_size_ + pending_;
      if (held >= maximum_ || need > maximum_ - held) return 0;
      chunk = std::min(chunk, maximum_ - held);
    }
    return chunk;
  }

  // Ask upstream for a chunk (lock released meanwhile) and carve from it.
  // nullptr if upstream is out of memory (its message in `error`).
  void* grow(std::unique_lock<std::mutex>& lock, std::size_t chunk_size, std::size_t n, std::size_t bytes,
             std::size_t alignment, stream_t stream, std::string& error) {
    auto chunk = std::make_unique<Chunk>();
    pending_ += chunk_size;  // counts against the maximum while unlocked
    lock.unlock();
    void* mem = nullptr;
    try {
      mem = upstream_->allocate(chunk_size, kGranule, stream);
    } catch (const OutOfMemory& e) {
      error = e.what();
    } catch (...) {
      lock.lock();
      pending_ -= chunk_size;
      throw;
    }
    lock.lock();
    pending_ -= chunk_size;
    if (mem == nullptr) return nullptr;
    // A stream-ordered upstream hands out memory ordered on `stream`: the rest
    // of the chunk is that stream's, and its event must say so before another
    // stream can take from it (recorded now, while the stream is surely alive).
    FreeIndex* home = index_for_existing(stream);
    try {
      reserve_records();
      if (order_ != nullptr) {
        if (home->event == nullptr) home->event = order_->create_event();
        order_->record_event(home->event, stream);
      }
    } catch (...) {
      lock.unlock();
      try {
        upstream_->deallocate(mem, chunk_size, kGranule, stream);
      } catch (...) {
      }
      throw;
    }
    Block* b = add_chunk(std::move(chunk), mem, chunk_size);
    return carve(b, home, n, bytes, alignment);
  }

  // index_for() of a stream whose index exists (created before unlocking).
  FreeIndex* index_for_existing(stream_t stream) noexcept {
    if (last_index_->stream() != stream) last_index_ = by_stream_.find(stream)->second;
    return last_index_;
  }

  void* allocate_slow(std::unique_lock<std::mutex>& lock, FreeIndex* idx, std::size_t n, std::size_t need,
                      std::size_t bytes, std::size_t alignment, stream_t stream) {
    // 1. A block of our own that the O(1) search passed over.
    if (Block* b = idx->scan_own_class(need, kOwnClassScan)) {
      idx->remove(b);
      return carve(b, idx, n, bytes, alignment);
    }
    // 2. Memory no stream has used yet: no wait needed.
    if (untouched_ != nullptr && untouched_ != idx) {
      if (Block* b = untouched_->find(need)) {
        untouched_->remove(b);
        return carve(b, untouched_, n, bytes, alignment);
      }
    }
    // 3. Another stream's block, once our stream waits for that stream's event.
    Waits waits(order_);
    if (order_ != nullptr) {
      for (const auto& other : indices_) {
        if (other.get() == idx || other.get() == untouched_ || other->empty()) continue;
        if (Block* b = other->find(need)) {
          waits.wait(stream, other.get());
          other->remove(b);
          return carve(b, other.get(), n, bytes, alignment);
        }
      }
    }
    if (limited_ && need > maximum_) throw OutOfMemory(exhausted(bytes, alignment, ""));
    // 3. Grow.
    std::string upstream_error;
    const std::size_t chunk = growth_for(need);
    if (chunk != 0) {
      if (void* p = grow(lock, chunk, n, bytes, alignment, stream, upstream_error)) return p;
    }
    // 4. Make every stream's free memory ours (after waiting on each one's
    //    event), so it coalesces; look again.
    bool moved = false;
    if (order_ != nullptr) {
      for (const auto& other : indices_) {
        if (other.get() == idx || other->empty()) continue;
        if (other.get() != untouched_) waits.wait(stream, other.get());
        while (Block* b = other->any()) {
          other->remove(b);
          insert_free(b, idx);
        }
        moved = true;
      }
      // The moved blocks are now this stream's: its event must cover the
      // waits just made, or a later taker that waits on it would miss them.
      if (moved) {
        if (idx->event == nullptr) idx->event = order_->create_event();
        order_->record_event(idx->event, stream);
      }
    }
    Block* b = idx->find(need);
    if (b == nullptr) b = idx->scan_own_class(need, SIZE_MAX);
    if (b != nullptr) {
      idx->remove(b);
      return carve(b, idx, n, bytes, alignment);
    }
    // 5. Give wholly free chunks back and ask for exactly what is needed.
    std::vector<Release> released;
    std::exception_ptr error;
    detach_free_chunks(released, error);
    if (!released.empty()) {
      lock.unlock();
      give_back(released);
      lock.lock();
    }
    if (error) std::rethrow_exception(error);
    const bool fits = !limited_ || (pool_size_ + pending_ <= maximum_ && need <= maximum_ - pool_size_ - pending_);
    if (fits && (!released.empty() || chunk != need)) {
      if (void* p = grow(lock, need, n, bytes, alignment, stream, upstream_error)) return p;
    }
    throw OutOfMemory(exhausted(bytes, alignment, upstream_error));
  }

  std::string exhausted(std::size_t bytes, std::size_t alignment, const std::string& upstream_error) const {
    std::size_t largest = 0;
    for (const auto& idx : indices_) largest = std::max(largest, idx->largest());
    std::string m = "pool: cannot allocate " + bytes_text(bytes) + " (alignment " + std::to_string(alignment) + "): ";
    if (!upstream_error.empty()) {
      m += "upstream '" + std::string(upstream_->name()) + "' is out of memory (" + upstream_error + "); ";
    } else if (limited_) {
      m += "that would exceed maximum_size (" + bytes_text(maximum_) + "); ";
    }
    m += "the pool holds " + bytes_text(pool_size_) + " in " + std::to_string(chunk_count_) +
         " chunks, largest free block " + bytes_text(largest);
    return m;
  }

  // Detach every wholly free chunk into `out` (to give back unlocked). The
  // streams the chunk was freed on may be gone, so a stream-ordered pool makes
  // stream 0 wait on their events and gives chunks back on stream 0. A failed
  // wait stops the scan (error set).
  void detach_free_chunks(std::vector<Release>& out, std::exception_ptr& error) {
    out.reserve(chunk_count_);
    Waits waits(order_);
    for (Chunk* c = chunks_; c != nullptr;) {
      Chunk* next = c->next;
      if (c->allocated == 0) {
        const stream_t s = 0;
        try {
          for (Block* b = c->first; b != nullptr; b = b->next_phys)
            if (b->index != untouched_) waits.wait(s, b->index);
        } catch (...) {
          error = std::current_exception();
          return;
        }
        for (Block* b = c->first; b != nullptr;) {
          Block* after = b->next_phys;
          b->index->remove(b);
          nodes_.put(b);
          b = after;
        }
        if (c->prev != nullptr) c->prev->next = c->next; else chunks_ = c->next;
        if (c->next != nullptr) c->next->prev = c->prev;
        pool_size_ -= c->size;
        --chunk_count_;
        out.push_back(Release{c->addr, c->size, s});
        delete c;
      }
      c = next;
    }
  }

  // Return detached chunks to upstream (lock not held). Rethrows the first failure.
  void give_back(const std::vector<Release>& released) {
    std::exception_ptr error;
    for (const Release& r : released) {
      try {
        upstream_->deallocate(reinterpret_cast<void*>(r.addr), r.size, kGranule, r.stream);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }

  const ResourcePtr upstream_;
  StreamOrder* const order_;
  bool limited_ = false;
  std::size_t maximum_ = 0;
  std::size_t growth_ = 0;

  mutable std::mutex mutex_;
  // Guarded by mutex_:
  std::size_t pool_size_ = 0;    // bytes held from upstream
  std::size_t pending_ = 0;      // bytes being requested from upstream right now
  std::size_t used_ = 0;         // bytes in allocated blocks
  std::size_t chunk_count_ = 0;
  Chunk* chunks_ = nullptr;
  BlockTable table_;
  NodePool nodes_;
  std::vector<std::unique_ptr<FreeIndex>> indices_;  // one per stream, never removed
  std::unordered_map<stream_t, FreeIndex*> by_stream_;
  FreeIndex* last_index_ = nullptr;  // the most recently used index: usually the caller's
  FreeIndex* untouched_ = nullptr;   // stream-ordered pools: memory no stream has used yet
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
