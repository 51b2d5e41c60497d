// The handle registry: checked, refcounted handles.
//
// A handle is not a pointer to the object. Its value encodes a slot index and
// the slot's generation: (generation << 32) | (index + 1). Each slot keeps an
// atomic word (generation << 32 | refcount). A handle is live while its
// generation matches and the refcount is non-zero; the release that brings the
// count to zero bumps the generation in the same atomic step, so every later
// use of that value - or of a forged value - fails the check and is reported
// as TETHER_ERROR_INVALID_HANDLE instead of touching freed memory.
//
// Generations never wrap. A slot whose generation reaches 2^32 - 1 is
// retired when that generation's last reference goes: it never returns to
// the free list, so no handle value is ever issued twice (a wrap would make
// a stale holder's value live again, and its release would destroy the new
// owner's object). The free list hands out the most recently freed slot, so
// one slot can reach the limit after 2^32 create/release cycles (minutes in
// a tight loop); retiring it costs 24 bytes. Handles run out only after
// 2^28 slots x 2^32 generations.
//
// Nothing here allocates after a slot exists: the free list is threaded
// through the slots (no vector to grow in the noexcept release path).
//
// Slots live in chunks that are never freed or moved, so lookups take no lock.
// The registry itself is never destroyed: releases from other libraries'
// static destructors at exit still find it.
//
// Borrows. A call that uses a handle only for its own duration (allocate,
// deallocate, ...) need not touch the slot's reference count, a cache line
// every thread using the handle would otherwise write. It borrows instead:
// it publishes the handle value in one of its thread's hazard words, then
// checks the slot is still live. The release that ends the handle's life
// (count to zero, generation bumped) scans the hazard words before it
// destroys the object, and waits until no other thread has the handle
// published. Both sides use sequentially consistent operations, so either the
// borrower sees the dead generation (and fails: INVALID_HANDLE), or the
// releaser sees the hazard (and waits). If the releasing thread itself holds
// a borrow of that handle, the destruction is deferred to the end of its
// borrow. A thread with no free hazard word (more than kHazards borrows at
// once) takes a counted reference instead.
//
// try_enter()/leave() (entered.hpp, inline) are the hot path's borrow: the same hazard word doubles as
// the fork gate's record (fork.cpp), so a call like allocate costs one TLS
// lookup and one fenced store for both, and any case off the common one
// (first call on a thread, nested call, fork in progress, dead handle)
// falls back to the general path, which reports errors as before.
#include <pthread.h>

#include <mutex>
#include <thread>
#include <type_traits>

#include "entered.hpp"
#include "internal.hpp"
#include "thread_blocks.hpp"

namespace tether::capi::registry {

namespace detail {
std::atomic<Slot*> g_chunks[kMaxChunks];
std::atomic<std::uint32_t> g_published{0};
}  // namespace detail

namespace {

static_assert(sizeof(void*) == 8, "tether handles need a 64-bit address space");

// The slots and the thread state are in entered.hpp (try_enter() reads them inline).
using detail::g_chunks;
using detail::g_published;
using detail::kChunkBits;
using detail::kChunkSize;
using detail::kCountMask;
using detail::kMaxChunks;
using detail::Slot;
using detail::t_state;

std::atomic<std::int64_t> g_live[3];                // by ObjectType (index 0 unused)

constexpr std::uint32_t kNoSlot = 0xffffffffu;
constexpr std::uint32_t kLastGeneration = 0xffffffffu;

struct FreeList {
  std::mutex mutex;
  std::uint32_t head = kNoSlot;  // most recently freed slot, linked by Slot::next_free
  std::uint32_t next = 0;        // first slot never used
  std::uint64_t retired = 0;     // slots retired at their last generation
};
FreeList& free_list() {
  static FreeList* list = new FreeList;  // leaked on purpose (see above)
  return *list;
}

Slot* slot_at(std::uint32_t index) noexcept {
  if (index >= g_published.load(std::memory_order_acquire)) return nullptr;
  Slot* chunk = g_chunks[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
}

bool decode(std::uintptr_t h, std::uint32_t& index, std::uint32_t& gen) noexcept {
  const std::uint32_t low = static_cast<std::uint32_t>(h & kCountMask);
  gen = static_cast<std::uint32_t>(static_cast<std::uint64_t>(h) >> 32);
  if (low == 0 || gen == 0) return false;
  index = low - 1;
  return true;
}

// ---- hazard words (borrows) --------------------------------------------------

using HazardBlock = ThreadBlock;  // thread_blocks.hpp: hazard words + the fork gate's flag
using Pending = PendingDestroy;

// At thread exit (glibc runs C++ thread_local destructors first, so releases
// from them still find the block).
void give_back_block(void* block) noexcept {
  ThreadBlocks<ThreadBlock>::give_back(static_cast<ThreadBlock*>(block));
  t_state.block = nullptr;
  t_state.gone = true;
}
ThreadBlocks<ThreadBlock> g_hazard_blocks(give_back_block);

HazardBlock* my_block() noexcept { return capi::my_block(t_state); }

bool held_by(const HazardBlock* b, std::uint64_t h) noexcept {
  for (const auto& w : b->hazard)
    if (w.load(std::memory_order_seq_cst) == h) return true;
  return false;
}

void dispose(Slot* s, std::uint32_t index, std::uint64_t h) noexcept;

// Destroy the object of a slot whose last reference is gone, once no other
// thread borrows `h` (its value while it was live).
void destroy(Slot* s, std::uint32_t index, std::uint64_t h) noexcept {
  const HazardBlock* mine = t_state.block;
  const std::uint32_t type = s->type.load(std::memory_order_relaxed);
  // try_enter() publishes a resource handle with a light store (g_asymmetric):
  // make it visible before the scan. One membarrier per destroyed resource
  // (rare: a resource lives long); other types are borrowed with seq_cst.
  if (g_asymmetric && type == static_cast<std::uint32_t>(ObjectType::Resource)) heavy_barrier();
  for (HazardBlock* b = g_hazard_blocks.first(); b != nullptr; b = b->next)
    if (b != mine)
      while (held_by(b, h)) std::this_thread::yield();  // a borrow lasts one call
  dispose(s, index, h);
}

// Whether a thread other than this one has `h` published (a borrow, or a
// try_enter()): what destroy() waits for, without waiting.
bool borrowed_elsewhere(std::uint64_t h) noexcept {
  const HazardBlock* mine = t_state.block;
  for (HazardBlock* b = g_hazard_blocks.first(); b != nullptr; b = b->next)
    if (b != mine && held_by(b, h)) return true;
  return false;
}

// The end of destroy(): no other thread borrows `h` (any more). Deletes the
// object and frees the slot. free_list()'s mutex is a leaf lock: nothing is
// called while it is held but operator new (nothrow) in create().
void dispose(Slot* s, std::uint32_t index, std::uint64_t h) noexcept {
  const std::uint32_t type = s->type.load(std::memory_order_relaxed);
  Object* obj = s->object.exchange(nullptr, std::memory_order_acq_rel);
  delete obj;  // may release other handles (upstreams); never this slot
  g_live[type].fetch_sub(1, std::memory_order_relaxed);
  FreeList& fl = free_list();
  std::lock_guard<std::mutex> lock(fl.mutex);
  if (static_cast<std::uint32_t>(h >> 32) == kLastGeneration) {
    ++fl.retired;  // never reused: see "Generations never wrap"
    return;
  }
  s->next_free = fl.head;
  fl.head = index;
}

// The last reference of `h` is gone: destroy now, or when this thread's own
// borrow of it ends.
void retire(Slot* s, std::uint32_t index, std::uint64_t h) noexcept {
  ThreadState& ts = t_state;
  if (ts.block != nullptr && held_by(ts.block, h)) {
    for (int i = 0; i < ts.pending_count; ++i)
      if (ts.pending[i].handle == h) return;
    ts.pending[ts.pending_count++] = Pending{h, s, index};  // one per distinct borrowed handle: fits
    return;
  }
  destroy(s, index, h);
}

// Destructions this thread deferred while it borrowed their handles, once
// it no longer does.
void run_pending(ThreadState& ts) noexcept {
  for (int i = 0; i < ts.pending_count;) {
    const Pending p = ts.pending[i];
    if (held_by(ts.block, p.handle)) {
      ++i;
      continue;
    }
    ts.pending[i] = ts.pending[--ts.pending_count];
    destroy(static_cast<Slot*>(p.slot), p.index, p.handle);
  }
}

// Drop one reference of a slot known to be of generation `gen`.
// The state a slot's last reference leaves behind: the next generation and
// no reference. The last generation ends at 0, which no handle carries (the
// slot is retired).
constexpr std::uint64_t dead_state(std::uint32_t gen) noexcept {
  return static_cast<std::uint64_t>(gen == kLastGeneration ? 0 : gen + 1) << 32;
}

// Drop one reference of generation gen of slot s; the last one only if
// may_be_last (else Refused, nothing changed). Last: the handle is dead, its
// object not destroyed yet.
QuickDrop drop_reference(Slot* s, std::uint32_t gen, bool may_be_last) noexcept {
  std::uint64_t cur = s->state.load(std::memory_order_relaxed);
  for (;;) {
    if ((cur >> 32) != gen || (cur & kCountMask) == 0) return QuickDrop::Refused;
    const bool last = (cur & kCountMask) == 1;
    if (last && !may_be_last) return QuickDrop::Refused;
    const std::uint64_t next = last ? dead_state(gen) : cur - 1;
    // seq_cst: ordered against borrowers' hazard stores (see "Borrows").
    if (s->state.compare_exchange_weak(cur, next, std::memory_order_seq_cst, std::memory_order_relaxed))
      return last ? QuickDrop::Last : QuickDrop::Dropped;
  }
}

bool drop(Slot* s, std::uint32_t index, std::uint32_t gen) noexcept {
  const QuickDrop d = drop_reference(s, gen, true);
  if (d == QuickDrop::Last) retire(s, index, (static_cast<std::uint64_t>(gen) << 32) | (index + 1));
  return d != QuickDrop::Refused;
}

// The slot of h if h is a live handle of `type` (index and generation in the
// out-parameters), else nullptr. The generation is checked before the type
// is trusted: a stale handle's slot may already hold an object of another type.
Slot* live_slot(std::uintptr_t h, ObjectType type, std::uint32_t& index, std::uint32_t& gen) noexcept {
  if (!decode(h, index, gen)) return nullptr;
  Slot* s = slot_at(index);
  if (s == nullptr) return nullptr;
  const std::uint64_t cur = s->state.load(std::memory_order_acquire);
  if ((cur >> 32) != gen || (cur & kCountMask) == 0) return nullptr;
  if (s->type.load(std::memory_order_relaxed) != static_cast<std::uint32_t>(type)) return nullptr;
  return s;
}

}  // namespace

std::uintptr_t try_create(ObjectType type, Object* obj, bool* full_out) noexcept {
  std::uint32_t index = 0;
  bool full = false, no_memory = false;
  {
    FreeList& fl = free_list();
    std::lock_guard<std::mutex> lock(fl.mutex);
    if (fl.head != kNoSlot) {
      index = fl.head;
      fl.head = slot_at(index)->next_free;
    } else {
      index = fl.next;
      const std::uint32_t chunk = index >> kChunkBits;
      if (chunk >= kMaxChunks) {
        full = true;
      } else if (g_chunks[chunk].load(std::memory_order_relaxed) == nullptr) {
        Slot* c = new (std::nothrow) Slot[kChunkSize];
        if (c == nullptr) {
          no_memory = true;
        } else {
          g_chunks[chunk].store(c, std::memory_order_release);
        }
      }
      if (!full && !no_memory) {
        fl.next = index + 1;
        g_published.store(fl.next, std::memory_order_release);
      }
    }
  }
  if (full || no_memory) {
    if (full_out != nullptr) *full_out = full;
    return 0;
  }
  Slot* s = slot_at(index);
  const std::uint64_t old = s->state.load(std::memory_order_relaxed);
  std::uint32_t gen = static_cast<std::uint32_t>(old >> 32);
  if (gen == 0) gen = 1;
  s->type.store(static_cast<std::uint32_t>(type), std::memory_order_relaxed);
  s->object.store(obj, std::memory_order_relaxed);
  g_live[static_cast<std::uint32_t>(type)].fetch_add(1, std::memory_order_relaxed);
  s->state.store((static_cast<std::uint64_t>(gen) << 32) | 1u, std::memory_order_release);
  return (static_cast<std::uintptr_t>(gen) << 32) | (index + 1);
}

std::uintptr_t create(ObjectType type, Object* obj) {
  bool full = false;
  const std::uintptr_t h = try_create(type, obj, &full);
  if (h != 0) return h;
  // Destroyed here, not under the free list's lock (try_create): its
  // destructor may free memory into a resource (a callback, a CUDA call),
  // and that lock stays a leaf lock (the quick release takes it, buffer.cpp).
  delete obj;
  if (full) throw core::Error(TETHER_ERROR_OUT_OF_MEMORY, "too many live tether handles");
  throw std::bad_alloc();
}

Object* acquire(std::uintptr_t h, ObjectType type) noexcept {
  std::uint32_t index, gen;
  if (!decode(h, index, gen)) return nullptr;
  Slot* s = slot_at(index);
  if (s == nullptr) return nullptr;
  std::uint64_t cur = s->state.load(std::memory_order_relaxed);
  for (;;) {
    if ((cur >> 32) != gen || (cur & kCountMask) == 0) return nullptr;
    if ((cur & kCountMask) == kCountMask) return nullptr;  // refcount would overflow
    if (s->state.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel,
                                       std::memory_order_relaxed))
      break;
  }
  if (s->type.load(std::memory_order_relaxed) != static_cast<std::uint32_t>(type)) {
    drop(s, index, gen);
    return nullptr;
  }
  return s->object.load(std::memory_order_acquire);
}

Object* borrow(std::uintptr_t h, ObjectType type, Borrow& out) noexcept {
  out = Borrow{};
  HazardBlock* b = my_block();
  std::atomic<std::uint64_t>* word = nullptr;
  if (b != nullptr)
    for (auto& w : b->hazard)
      if (w.load(std::memory_order_relaxed) == 0) {
        word = &w;
        break;
      }
  if (word == nullptr) {  // no hazard word free: a counted reference
    Object* obj = acquire(h, type);
    if (obj != nullptr) out = Borrow{h, type, nullptr};
    return obj;
  }
  std::uint32_t index, gen;
  if (!decode(h, index, gen)) return nullptr;
  Slot* s = slot_at(index);
  if (s == nullptr) return nullptr;
  word->store(h, std::memory_order_seq_cst);
  const std::uint64_t cur = s->state.load(std::memory_order_seq_cst);
  if ((cur >> 32) != gen || (cur & kCountMask) == 0 ||
      s->type.load(std::memory_order_relaxed) != static_cast<std::uint32_t>(type)) {
    word->store(0, std::memory_order_release);
    return nullptr;
  }
  out = Borrow{h, type, word};
  return s->object.load(std::memory_order_acquire);
}

void end_borrow(const Borrow& borrowed) noexcept {
  if (borrowed.handle == 0) return;
  if (borrowed.hazard == nullptr) {
    release(borrowed.handle, borrowed.type);
    return;
  }
  static_cast<std::atomic<std::uint64_t>*>(borrowed.hazard)->store(0, std::memory_order_release);
  run_pending(t_state);
}

void leave_with_pending(const Entered& e) noexcept {
  ThreadState& ts = *e.state;
  // A release during the call ended a handle this thread borrowed: destroy
  // it inside the gate proper (raised before the hazard word falls, so a
  // fork never finds this thread outside while it takes locks).
  ts.block->active.store(1, std::memory_order_seq_cst);
  ts.block->hazard[0].store(0, std::memory_order_release);
  run_pending(ts);
  ts.block->active.store(0, std::memory_order_release);
  ts.depth = 0;
}

bool release(std::uintptr_t h, ObjectType type) noexcept {
  ForkGate gate;  // may destroy objects: takes locks (fork.cpp)
  std::uint32_t index, gen;
  Slot* s = live_slot(h, type, index, gen);
  return s != nullptr && drop(s, index, gen);
}

// ---- the quick paths (buffer.cpp, resource.cpp: tether_internal.h) -----------
//
// For callers that keep Python's GIL: nothing here waits for another thread.

QuickDrop drop_quick(std::uintptr_t h, ObjectType type, bool may_be_last) noexcept {
  std::uint32_t index, gen;
  Slot* s = live_slot(h, type, index, gen);
  return s == nullptr ? QuickDrop::Refused : drop_reference(s, gen, may_be_last);
}

bool borrowed_elsewhere(std::uintptr_t h, ObjectType type) noexcept {
  // As in destroy(): a resource handle may be published with a light store.
  if (g_asymmetric && type == ObjectType::Resource) heavy_barrier();
  return borrowed_elsewhere(static_cast<std::uint64_t>(h));
}

void dispose_dead(std::uintptr_t h) noexcept {
  std::uint32_t index, gen;
  if (!decode(h, index, gen)) return;
  if (Slot* s = slot_at(index)) dispose(s, index, h);
}

bool destroy_dead(std::uintptr_t h) noexcept {
  ForkGate gate;  // destroying takes locks (fork.cpp)
  std::uint32_t index, gen;
  if (!decode(h, index, gen)) return false;
  Slot* s = slot_at(index);
  if (s == nullptr) return false;
  // Only a handle drop_quick() ended and nobody disposed of: its slot still
  // has the object, the next generation and no reference (a slot is reused
  // only once disposed of).
  if (s->state.load(std::memory_order_acquire) != dead_state(gen) || s->object.load(std::memory_order_acquire) == nullptr)
    return false;
  retire(s, index, h);  // (retire: this thread may still borrow it, in a callback)
  return true;
}

// Called by fork.cpp's child handler, in a child where only this thread
// exists and no thread was inside tether at the fork. Hazard words of
// threads that do not exist here are cleared (a release would otherwise
// wait for them forever) and their blocks become free for reuse.
void after_fork_child() noexcept {
  for (HazardBlock* b = g_hazard_blocks.first(); b != nullptr; b = b->next) {
    if (b == t_state.block) continue;
    for (auto& w : b->hazard) w.store(0, std::memory_order_relaxed);
    b->owned.store(false, std::memory_order_relaxed);
  }
}

namespace testing {
bool set_generation(std::uint32_t index, std::uint32_t generation) noexcept {
  Slot* s = slot_at(index);
  if (s == nullptr || generation == 0) return false;
  std::uint64_t cur = s->state.load(std::memory_order_acquire);
  if ((cur & kCountMask) != 0) return false;  // live: leave it alone
  return s->state.compare_exchange_strong(cur, static_cast<std::uint64_t>(generation) << 32);
}

std::uint64_t retired_slots() noexcept {
  FreeList& fl = free_list();
  std::lock_guard<std::mutex> lock(fl.mutex);
  return fl.retired;
}
}  // namespace testing

std::size_t live(std::uint32_t type) noexcept {
  if (type == 0) {
    return static_cast<std::size_t>(g_live[1].load(std::memory_order_relaxed) +
                                    g_live[2].load(std::memory_order_relaxed));
  }
  if (type > 2) return 0;
  return static_cast<std::size_t>(g_live[type].load(std::memory_order_relaxed));
}

}  // namespace tether::capi::registry

namespace tether::capi {

ThreadState& thread_state() noexcept { return registry::detail::t_state; }

ThreadBlock* my_block(ThreadState& ts) noexcept {
  if (ts.block != nullptr) return ts.block;
  if (ts.gone) return nullptr;
  ts.block = registry::g_hazard_blocks.claim();  // nullptr: callers count the thread elsewhere
  return ts.block;
}

ThreadBlock* first_thread_block() noexcept { return registry::g_hazard_blocks.first(); }

}  // namespace tether::capi
