// ArenaResource: per-thread / per-stream arenas over a global arena (see
// tether_core/arena.hpp for the behaviour).
//
// Layout. Chunks from upstream are arrays of superblock Slots. The chunk
// list is an immutable sorted vector published through an atomic pointer
// (old lists and all Chunk records are kept until the resource dies), so a
// free finds its slot without a lock: chunk by binary search, slot by offset.
//
// Locks. Each arena has a mutex guarding the slots it owns (their free
// ranges and live allocations); the global mutex guards the slots it owns
// (free ones and large runs), the chunk list and the event spares. Order:
// an arena's mutex, then the global one; never two arenas at once (an
// allocation that needs a superblock drops its arena's lock first). A slot's
// `owner` changes only with both its arena's and the global lock held, and
// is read without a lock on the free path, then checked again under the
// arena's lock.
//
// Stream order (stream-ordered upstreams only). A free slot carries the
// event recorded on the stream that gave it back (`ready`), or is marked
// `unsynced` when it was collected from an arena whose stream may be gone;
// whoever takes it for another stream waits on the event, or synchronises
// the device once (which settles every free slot): stream_reuse.hpp.
#include "tether_core/arena.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <tuple>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stream_reuse.hpp"
#include "tether_core/free_check.hpp"

namespace tether::core {

namespace {

constexpr std::size_t kGranule = 256;
constexpr std::size_t kDefaultSuperblock = std::size_t{1} << 20;
constexpr std::size_t kMinGrowth = std::size_t{32} << 20;
constexpr std::size_t kMaxGeometricGrowth = std::size_t{1} << 30;
// Wholly free superblocks an arena keeps before giving more back (defragmentation takes them all).
constexpr std::size_t kCachedEmpty = 1;

constexpr std::size_t round_up(std::size_t n, std::size_t a) noexcept { return (n + a - 1) / a * a; }

Properties arena_properties(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("arena: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_ARENA;
  return p;
}

std::size_t checked_superblock(std::size_t s) {
  if (s == 0) return kDefaultSuperblock;
  if ((s & (s - 1)) != 0 || s < (std::size_t{64} << 10) || s > kMaxAlignment)
    throw_invalid_argument("arena: superblock_size " + std::to_string(s) +
                           " is not a power of two between 64 KiB and 1 GiB");
  return s;
}

struct Arena;
using Event = std::shared_ptr<void>;  // an event_t, handed back to the spares when the last slot drops it

struct SmallLive {
  std::size_t bytes;  // as requested
  std::size_t alignment;
  std::size_t span;   // as carved
  owner_t owner;
};

enum class SlotState : unsigned char { Free, Arena, LargeHead, LargeBody };

struct Chunk;

struct Slot {
  std::uintptr_t base = 0;             // its memory
  Chunk* chunk = nullptr;
  std::size_t index = 0;               // in its chunk
  std::atomic<Arena*> owner{nullptr};  // set while an arena owns it
  // Global lock:
  SlotState state = SlotState::Free;
  std::size_t run = 0;         // LargeHead: superblocks in the run
  std::size_t large_bytes = 0; // LargeHead: bytes requested
  std::size_t large_alignment = 0;
  owner_t large_owner = kCaller;
  Event ready;                 // Free: wait on this before another stream uses it
  stream_t freed_on = 0;
  bool unsynced = false;       // Free: needs a device synchronisation before another stream uses it
  // Owning arena's lock:
  std::map<std::size_t, std::size_t> free;  // offset -> length
  std::unordered_map<std::size_t, SmallLive> live;
  std::size_t used = 0;        // bytes carved out
};

struct Chunk {
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
  std::size_t count = 0;       // slots
  std::size_t free_slots = 0;  // global lock
  bool returned = false;       // given back to upstream (the record stays for late lookups)
  std::unique_ptr<Slot[]> slots;
};
using ChunkList = std::vector<Chunk*>;

struct alignas(64) Arena {
  explicit Arena(stream_t s) : stream(s) {}
  std::mutex mutex;
  const stream_t stream;
  std::vector<Slot*> slots;  // owned superblocks, most recently taken last
  std::size_t empty = 0;     // of those, wholly free
  // Every free range of those superblocks by (length, slot base, offset): best fit.
  std::set<std::tuple<std::size_t, Slot*, std::size_t>> by_size;
};

std::atomic<std::uint64_t> g_arena_serial{0};
struct ArenaCacheEntry {
  std::uint64_t serial = 0;
  std::uintptr_t key = 0;
  Arena* arena = nullptr;
};
// One thread_local object (one TLS lookup per call); its address identifies the thread.
struct ThreadArenas {
  ArenaCacheEntry entries[8];
  unsigned next = 0;
};
thread_local ThreadArenas t_arenas;

class ArenaResource final : public Resource {
 public:
  ArenaResource(ResourcePtr upstream, const ArenaOptions& o)
      : Resource(arena_properties(upstream)),
        upstream_(std::move(upstream)),
        sb_(checked_superblock(o.superblock_size)),
        fixed_(o.arena_size != 0),
        order_(upstream_->stream_order()),
        serial_(g_arena_serial.fetch_add(1) + 1),
        spare_events_(order_) {
    publish();
    if (fixed_) {
      const std::size_t bytes = round_up(o.arena_size, sb_);
      if (bytes < o.arena_size) throw_invalid_argument("arena: arena_size is too large");
      add_chunk(upstream_->allocate_for(id(), bytes, sb_, 0), bytes);
    }
  }

  ~ArenaResource() override {
    try {
      stream_reuse::settle(order_);
      std::lock_guard<std::mutex> g(global_);
      for (auto& c : all_chunks_) {
        for (std::size_t i = 0; i < c->count; ++i) c->slots[i].ready.reset();
        if (!c->returned) upstream_->deallocate_for(id(), reinterpret_cast<void*>(c->base), c->bytes, sb_, 0);
      }
    } catch (...) {  // an upstream failing at teardown: leak rather than terminate
    }
  }

  const char* name() const noexcept override { return "arena"; }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  StreamOrder* stream_order() noexcept override { return order_; }

  void trim() override {
    defragment();
    std::vector<std::pair<std::uintptr_t, std::size_t>> give_back;
    {
      std::lock_guard<std::mutex> g(global_);
      bool pending_events = false;
      ChunkList keep;
      for (Chunk* c : *chunks()) {
        if (c->free_slots == c->count) {
          for (std::size_t i = 0; i < c->count; ++i) pending_events |= (c->slots[i].ready != nullptr || c->slots[i].unsynced);
          c->returned = true;
          held_ -= c->bytes;
          runs_.erase(c->base);
          by_size_.erase({c->count, c->base});
          give_back.emplace_back(c->base, c->bytes);
        } else {
          keep.push_back(c);
        }
      }
      if (pending_events && order_ != nullptr) settle_locked();
      if (!give_back.empty()) publish_locked(std::move(keep));
    }
    for (const auto& [base, bytes] : give_back)
      upstream_->deallocate_for(id(), reinterpret_cast<void*>(base), bytes, sb_, 0);
    upstream_->trim();
  }

  ArenaInfo info() {
    ArenaInfo i;
    i.superblock_size = sb_;
    {
      std::lock_guard<std::mutex> a(arenas_mutex_);
      i.arena_count = arena_list_.size();
    }
    std::lock_guard<std::mutex> g(global_);
    i.arena_size = held_;
    for (Chunk* c : *chunks()) {
      ++i.chunk_count;
      i.global_free_bytes += c->free_slots * sb_;
      for (std::size_t k = 0; k < c->count; ++k) {
        const Slot& s = c->slots[k];
        if (s.state == SlotState::Arena) ++i.arena_superblocks;
        if (s.state == SlotState::LargeHead || s.state == SlotState::LargeBody) i.large_bytes += sb_;
      }
    }
    return i;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    if (order_ == nullptr) stream = 0;
    const std::size_t span = round_up(bytes, kGranule);
    if (span > sb_ / 2 || alignment > sb_ / 2) return allocate_large(owner, bytes, alignment, stream);
    Arena& a = arena_for(stream);
    for (;;) {
      {
        std::lock_guard<std::mutex> l(a.mutex);
        if (void* p = carve_from(a, bytes, span, alignment, owner)) return p;
      }
      // A whole superblock fits any small request; loop in case a thread
      // sharing this arena, or a defragmentation, took it meanwhile.
      acquire_superblock(a, stream);  // throws OutOfMemory
    }
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    if (order_ == nullptr) stream = 0;
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    Chunk* c = chunk_of(addr);
    if (c == nullptr) not_ours(ptr);
    const std::size_t index = (addr - c->base) / sb_;
    Slot& s = c->slots[index];
    for (;;) {
      Arena* a = s.owner.load(std::memory_order_acquire);
      if (a == nullptr) return free_large(owner, ptr, c, index, bytes, alignment, stream);
      // Memory of stream A freed on stream S: A reuses it at once, so S's work must be done.
      if (order_ != nullptr && stream != a->stream) order_->synchronize(stream);
      std::unique_lock<std::mutex> l(a->mutex);
      if (s.owner.load(std::memory_order_relaxed) != a) continue;  // moved meanwhile: look again
      const std::size_t offset = addr - (c->base + index * sb_);
      auto it = s.live.find(offset);
      check_live(ptr, it != s.live.end() ? &it->second : nullptr, owner, bytes, alignment);
      const std::size_t span = it->second.span;
      s.live.erase(it);
      give_range(*a, s, offset, span);
      s.used -= span;
      // Given back with an event on this stream only if every free in it was
      // on the arena's stream (a free on another stream synchronised that
      // stream, but the arena's stream may be gone: then a device sync later).
      if (s.used == 0 && ++a->empty > kCachedEmpty) release_superblock(*a, &s, stream, stream == a->stream);
      return;
    }
  }

 private:
  // ---- chunks ------------------------------------------------------------

  const ChunkList* chunks() const noexcept { return current_.load(std::memory_order_acquire); }

  Chunk* chunk_of(std::uintptr_t addr) const noexcept {
    const ChunkList& list = *chunks();
    auto it = std::upper_bound(list.begin(), list.end(), addr, [](std::uintptr_t a, const Chunk* c) { return a < c->base; });
    if (it == list.begin()) return nullptr;
    Chunk* c = *(it - 1);
    return addr < c->base + c->bytes ? c : nullptr;
  }

  void publish() {
    std::lock_guard<std::mutex> g(global_);
    publish_locked(ChunkList{});
  }
  void publish_locked(ChunkList list) {
    std::sort(list.begin(), list.end(), [](const Chunk* a, const Chunk* b) { return a->base < b->base; });
    lists_.push_back(std::make_unique<ChunkList>(std::move(list)));
    current_.store(lists_.back().get(), std::memory_order_release);
  }

  void add_chunk(void* p, std::size_t bytes) {
    auto c = std::make_unique<Chunk>();
    c->base = reinterpret_cast<std::uintptr_t>(p);
    c->bytes = bytes;
    c->count = bytes / sb_;
    c->free_slots = c->count;
    c->slots.reset(new Slot[c->count]);
    for (std::size_t i = 0; i < c->count; ++i) {
      c->slots[i].base = c->base + i * sb_;
      c->slots[i].chunk = c.get();
      c->slots[i].index = i;
    }
    std::lock_guard<std::mutex> g(global_);
    ChunkList next = *chunks();
    next.push_back(c.get());
    held_ += bytes;
    Chunk* raw = c.get();
    all_chunks_.push_back(std::move(c));
    raw->free_slots = 0;
    add_run_locked(raw, 0, raw->count);
    publish_locked(std::move(next));
  }

  // Take a chunk of at least `need` bytes from upstream (no lock held).
  // false if the arena is fixed or the upstream is out of memory.
  bool grow(std::size_t need) {
    if (fixed_) return false;
    std::size_t held;
    {
      std::lock_guard<std::mutex> g(global_);
      held = held_;
    }
    std::size_t bytes = std::max({need, kMinGrowth, std::min(held, kMaxGeometricGrowth)});
    bytes = round_up(bytes, sb_);
    void* p = nullptr;
    try {
      p = upstream_->allocate_for(id(), bytes, sb_, 0);
    } catch (const OutOfMemory&) {
      if (bytes == round_up(need, sb_)) return false;
      bytes = round_up(need, sb_);
      try {
        p = upstream_->allocate_for(id(), bytes, sb_, 0);
      } catch (const OutOfMemory&) {
        return false;
      }
    }
    add_chunk(p, bytes);
    return true;
  }

  // ---- arenas ------------------------------------------------------------

  Arena& arena_for(stream_t stream) {
    ThreadArenas& mine = t_arenas;
    const std::uintptr_t key = order_ != nullptr ? stream : reinterpret_cast<std::uintptr_t>(&mine);
    for (const ArenaCacheEntry& e : mine.entries)
      if (e.serial == serial_ && e.key == key) return *e.arena;
    Arena* a;
    {
      std::lock_guard<std::mutex> l(arenas_mutex_);
      auto& slot = arenas_[key];
      if (!slot) {
        slot = std::make_unique<Arena>(order_ != nullptr ? stream : 0);
        arena_list_.push_back(slot.get());
      }
      a = slot.get();
    }
    mine.entries[mine.next++ % 8] = ArenaCacheEntry{serial_, key, a};
    return *a;
  }

  // ---- carving within superblocks (arena lock held) -----------------------

  // Best fit over every free range of the arena's superblocks.
  void* carve_from(Arena& a, std::size_t bytes, std::size_t span, std::size_t alignment, owner_t owner) {
    // With an alignment above the granule a range of span + alignment - granule always fits.
    for (auto it = a.by_size.lower_bound({span, 0, 0}); it != a.by_size.end(); ++it) {
      const auto [len, s, off] = *it;
      const std::uintptr_t base = s->base;
      const std::size_t start = round_up(base + off, alignment) - base;
      if (start + span > off + len) continue;
      a.by_size.erase(it);
      s->free.erase(off);
      if (start > off) add_range(a, *s, off, start - off);
      if (off + len > start + span) add_range(a, *s, start + span, off + len - start - span);
      if (s->used == 0) --a.empty;
      s->used += span;
      s->live.emplace(start, SmallLive{bytes, alignment, span, owner});
      return reinterpret_cast<void*>(base + start);
    }
    return nullptr;
  }

  static void add_range(Arena& a, Slot& s, std::size_t off, std::size_t len) {
    s.free.emplace(off, len);
    a.by_size.emplace(len, &s, off);
  }
  static void remove_range(Arena& a, Slot& s, std::map<std::size_t, std::size_t>::iterator it) {
    a.by_size.erase({it->second, &s, it->first});
    s.free.erase(it);
  }

  // Give [off, off+len) of s back to arena a, coalescing with free neighbours.
  static void give_range(Arena& a, Slot& s, std::size_t off, std::size_t len) {
    auto next = s.free.lower_bound(off);
    if (next != s.free.end() && next->first == off + len) {
      len += next->second;
      auto after = std::next(next);
      remove_range(a, s, next);
      next = after;
    }
    if (next != s.free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        len += prev->second;
        remove_range(a, s, prev);
      }
    }
    add_range(a, s, off, len);
  }

  static std::uintptr_t slot_base(const Slot* s) noexcept { return s->base; }

  // ---- the global arena --------------------------------------------------

  // A whole free superblock for arena `a` (its lock not held), ordered after
  // its last user. Grows, then defragments, before giving up.
  Slot* acquire_superblock(Arena& a, stream_t stream) {
    for (int attempt = 0;; ++attempt) {
      {
        std::lock_guard<std::mutex> l(a.mutex);
        std::lock_guard<std::mutex> g(global_);
        if (Slot* s = find_run_locked(1, sb_, stream)) {
          s->state = SlotState::Arena;
          s->free.clear();
          s->used = 0;
          add_range(a, *s, 0, sb_);
          s->owner.store(&a, std::memory_order_release);
          a.slots.push_back(s);
          ++a.empty;
          return s;
        }
      }
      if (attempt == 0 && grow(sb_)) continue;
      if (attempt <= 1 && defragment()) continue;
      if (attempt <= 2 && grow(sb_)) continue;
      throw OutOfMemory("arena: no free superblock of " + std::to_string(sb_) + " bytes and the upstream '" +
                        upstream_->name() + "' cannot provide more");
    }
  }

  void* allocate_large(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
    const std::size_t n = round_up(bytes, sb_) / sb_;
    if (n == 0 || n > (std::size_t{1} << 40) / sb_)
      throw OutOfMemory("arena: cannot allocate " + std::to_string(bytes) + " bytes");
    for (int attempt = 0;; ++attempt) {
      {
        std::lock_guard<std::mutex> g(global_);
        if (Slot* s = find_run_locked(n, std::max(alignment, sb_), stream)) {
          s->state = SlotState::LargeHead;
          s->run = n;
          s->large_bytes = bytes;
          s->large_owner = owner;
          s->large_alignment = alignment;
          for (std::size_t i = 1; i < n; ++i) s[i].state = SlotState::LargeBody;
          return reinterpret_cast<void*>(slot_base(s));
        }
      }
      if (attempt == 0 && grow(n * sb_ + (alignment > sb_ ? alignment : 0))) continue;
      if (attempt <= 1 && defragment()) continue;
      if (attempt <= 2 && grow(n * sb_ + (alignment > sb_ ? alignment : 0))) continue;
      throw OutOfMemory("arena: cannot allocate " + std::to_string(bytes) + " bytes: no run of " +
                        std::to_string(n) + " free superblocks and the upstream '" + upstream_->name() +
                        "' cannot provide more");
    }
  }

  // Best-fitting run of n free slots whose start is `alignment`-aligned;
  // takes it out of the free runs (waits ordered) and returns its first slot,
  // or nullptr. Global lock held.
  Slot* find_run_locked(std::size_t n, std::size_t alignment, stream_t stream) {
    for (auto it = by_size_.lower_bound({n, 0}); it != by_size_.end(); ++it) {
      const auto [len, start] = *it;
      Chunk* c = runs_.at(start).chunk;
      const std::size_t first = (round_up(start, alignment) - c->base) / sb_;
      const std::size_t at = (start - c->base) / sb_;
      if (first + n > at + len) continue;
      by_size_.erase(it);
      runs_.erase(start);
      if (first > at) put_run_locked(c, at, first - at);
      if (at + len > first + n) put_run_locked(c, first + n, at + len - first - n);
      c->free_slots -= n;
      Slot* s = &c->slots[first];
      for (std::size_t i = 0; i < n; ++i) s[i].state = SlotState::Arena;  // taken; the caller sets the real state
      order_before_use(s, n, stream);
      return s;
    }
    return nullptr;
  }

  void put_run_locked(Chunk* c, std::size_t at, std::size_t n) {
    const std::uintptr_t start = c->base + at * sb_;
    runs_.emplace(start, Run{n, c});
    by_size_.emplace(n, start);
  }

  // Slots [at, at+n) of c are free again: coalesce with free neighbours of the same chunk.
  void add_run_locked(Chunk* c, std::size_t at, std::size_t n) {
    c->free_slots += n;
    std::uintptr_t start = c->base + at * sb_;
    auto next = runs_.lower_bound(start);
    if (next != runs_.end() && next->second.chunk == c && next->first == start + n * sb_) {
      n += next->second.n;
      by_size_.erase({next->second.n, next->first});
      next = runs_.erase(next);
    }
    if (next != runs_.begin()) {
      auto prev = std::prev(next);
      if (prev->second.chunk == c && prev->first + prev->second.n * sb_ == start) {
        start = prev->first;
        n += prev->second.n;
        by_size_.erase({prev->second.n, prev->first});
        runs_.erase(prev);
      }
    }
    runs_.emplace(start, Run{n, c});
    by_size_.emplace(n, start);
  }

  // Make `stream` wait for the last users of slots [s, s+n). Global lock held.
  void order_before_use(Slot* s, std::size_t n, stream_t stream) {
    if (order_ == nullptr) return;
    stream_reuse::Handover handover(order_);
    // Slots no event covers first: their device synchronisation settles every
    // free slot, and then nothing needs a wait.
    for (std::size_t i = 0; i < n && !handover.device_done(); ++i)
      if (s[i].unsynced) handover.wait(stream, s[i].freed_on, nullptr);
    if (handover.device_done()) forget_events_locked();
    for (std::size_t i = 0; i < n; ++i) {
      Slot& x = s[i];
      if (x.ready) handover.wait(stream, x.freed_on, x.ready.get());
      x.ready.reset();
      x.unsynced = false;
    }
  }

  // Synchronise the device: every free slot becomes usable by every stream. Global lock held.
  void settle_locked() {
    stream_reuse::settle(order_);
    forget_events_locked();
  }

  // The device was synchronised: no free slot needs a wait any more. Global lock held.
  void forget_events_locked() {
    for (Chunk* c : *chunks())
      for (std::size_t i = 0; i < c->count; ++i) {
        c->slots[i].ready.reset();
        c->slots[i].unsynced = false;
      }
  }

  // An event recorded on `stream` now (stream alive: a free on it is in progress). Global lock held.
  Event record_locked(stream_t stream) {
    // The last slot drops it under the global lock: back to the spares.
    return Event(spare_events_.record(stream), [this](void* ev) { spare_events_.put(ev); });
  }

  // Give superblock s of arena a (a's lock held) back to the global arena.
  // `live_stream`: the free that emptied it runs on `stream` now (record an event on it).
  void release_superblock(Arena& a, Slot* s, stream_t stream, bool live_stream) {
    std::lock_guard<std::mutex> g(global_);
    a.slots.erase(std::find(a.slots.begin(), a.slots.end(), s));
    --a.empty;
    for (const auto& [off, len] : s->free) a.by_size.erase({len, s, off});
    s->owner.store(nullptr, std::memory_order_release);
    s->state = SlotState::Free;
    s->free.clear();
    s->live.clear();
    s->used = 0;
    if (order_ != nullptr) {
      if (live_stream) {
        s->ready = record_locked(stream);
        s->unsynced = false;
      } else {
        s->ready.reset();
        s->unsynced = true;
      }
      s->freed_on = live_stream ? stream : a.stream;
    }
    add_run_locked(s->chunk, s->index, 1);
  }

  void free_large(owner_t owner, void* ptr, Chunk* c, std::size_t index, std::size_t bytes, std::size_t alignment,
                  stream_t stream) {
    std::lock_guard<std::mutex> g(global_);
    Slot& s = c->slots[index];
    const bool head = !c->returned && s.state == SlotState::LargeHead &&
                      reinterpret_cast<std::uintptr_t>(ptr) == c->base + index * sb_;
    if (!head) not_ours(ptr);
    const SmallLive rec{s.large_bytes, s.large_alignment, 0, s.large_owner};
    check_live(ptr, &rec, owner, bytes, alignment);
    Event ev = order_ != nullptr ? record_locked(stream) : Event{};
    for (std::size_t i = 0; i < s.run; ++i) {
      Slot& x = c->slots[index + i];
      x.state = SlotState::Free;
      x.ready = ev;
      x.unsynced = false;
      x.freed_on = stream;
    }
    add_run_locked(c, index, s.run);
    s.run = 0;
  }

  // Every arena gives its wholly free superblocks back. true if any came back.
  bool defragment() {
    std::vector<Arena*> list;
    {
      std::lock_guard<std::mutex> l(arenas_mutex_);
      list = arena_list_;
    }
    bool any = false;
    for (Arena* a : list) {
      std::lock_guard<std::mutex> l(a->mutex);
      std::vector<Slot*> empty;
      for (Slot* s : a->slots)
        if (s->used == 0) empty.push_back(s);
      for (Slot* s : empty) release_superblock(*a, s, a->stream, false);
      any |= !empty.empty();
    }
    if (any && order_ != nullptr) {
      std::lock_guard<std::mutex> g(global_);
      settle_locked();  // the arenas' streams may be gone: order everything once
    }
    return any;
  }

  // ---- checks --------------------------------------------------------------

  [[noreturn]] static void not_ours(const void* ptr) { throw_not_allocated("arena", "this arena", ptr); }

  static void check_live(const void* ptr, const SmallLive* rec, owner_t owner, std::size_t bytes,
                         std::size_t alignment) {
    if (rec == nullptr) not_ours(ptr);
    check_free("arena", "this arena", ptr, Allocated{rec->owner, rec->bytes, rec->alignment}, owner, bytes, alignment);
  }

  const ResourcePtr upstream_;
  const std::size_t sb_;
  const bool fixed_;
  StreamOrder* const order_;
  const std::uint64_t serial_;

  stream_reuse::EventSpares spare_events_;  // before the chunks: slot events return here
  std::mutex global_;
  std::vector<std::unique_ptr<Chunk>> all_chunks_;   // every chunk record ever made
  std::vector<std::unique_ptr<ChunkList>> lists_;    // every list ever published
  std::atomic<const ChunkList*> current_{nullptr};
  std::size_t held_ = 0;
  struct Run {
    std::size_t n;  // slots
    Chunk* chunk;
  };
  std::map<std::uintptr_t, Run> runs_;                          // free runs by address, coalesced per chunk
  std::set<std::pair<std::size_t, std::uintptr_t>> by_size_;    // the same by (slots, address): best fit

  std::mutex arenas_mutex_;
  std::unordered_map<std::uintptr_t, std::unique_ptr<Arena>> arenas_;
  std::vector<Arena*> arena_list_;
};

ArenaResource& as_arena(const Resource& r) {
  auto* a = dynamic_cast<const ArenaResource*>(&r);
  if (a == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not an arena resource");
  return const_cast<ArenaResource&>(*a);
}

}  // namespace

ResourcePtr make_arena_resource(ResourcePtr upstream, const ArenaOptions& options) {
  return std::make_shared<ArenaResource>(std::move(upstream), options);
}

ArenaInfo arena_info(const Resource& r) { return as_arena(r).info(); }

}  // namespace tether::core
