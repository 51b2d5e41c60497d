// The hot path of an entry point that uses one handle (tether_resource_allocate
// and _deallocate, resource.cpp): registry::try_enter() and leave() (handles.cpp
// has the registry they read, and its comment "Borrows" the protocol), inline
// into the entry point, and guard_entered(). Inline, a C ABI allocate+free
// pair lost the two calls and their frames, and the Entered record went to
// registers: bench_capi_cost --count under callgrind, 450 -> 370 instructions
// per pair (with fewer tests in try_enter(), see there).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "internal.hpp"
#include "thread_blocks.hpp"

namespace tether::capi::registry {

namespace detail {

// A handle's value is (generation << 32) | (index + 1); slot `index` is
// g_chunks[index >> kChunkBits][index & (kChunkSize - 1)].
constexpr std::uint32_t kChunkBits = 12;
constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
constexpr std::uint32_t kMaxChunks = 1u << 16;  // 268M handles at once
constexpr std::uint64_t kCountMask = 0xffffffffull;

struct Slot {
  std::atomic<std::uint64_t> state{0};  // generation << 32 | refcount
  std::atomic<Object*> object{nullptr};
  std::atomic<std::uint32_t> type{0};
  std::uint32_t next_free = 0;  // the free list's link (under its mutex)
};

extern std::atomic<Slot*> g_chunks[kMaxChunks];  // constant-initialised, never freed
extern std::atomic<std::uint32_t> g_published;   // slots [0, g_published) exist

// The one thread_local of the registry and the fork gate (thread_blocks.hpp).
// Inline: every file that reads it sees its constant initialiser, so a read
// is the TLS lookup alone (an extern thread_local would first test for an
// initialisation function).
inline thread_local ThreadState t_state;
static_assert(std::is_trivially_destructible_v<ThreadState>, "no TLS destructor registration");

}  // namespace detail

// What a successful try_enter() found: the handle's object, and for leave() the
// thread's state, whose block's hazard word 0 holds the handle. (No
// initialisers: only try_enter() writes them, and they are read only after it
// succeeded.)
struct Entered {
  Object* object;
  ThreadState* state;
};

// The hot path of an entry point that uses one handle: enter the fork gate
// and borrow the handle in one step (one TLS lookup, one fence; the
// published hazard word is the gate's record). Returns true, the object in
// out.object, or false when the fast path does not apply - the thread's
// first call, a call from inside another (a callback), a fork in progress,
// or a handle that is not live - and then nothing is held: the caller runs
// its general path (guard + ResourceRef), which waits or reports the error.
// A successful enter is ended by leave(), on the same thread, and nothing in
// between may wait at a gate for a fork (nothing does: inner gates nest).
// (Returning the object instead made the caller test it for null, which a
// live handle's never is.)
inline bool try_enter(std::uintptr_t h, ObjectType type, Entered& out) noexcept {
  using namespace detail;
  ThreadState* tsp = &t_state;
  // One TLS lookup: GCC would compute the address again after the fence.
  __asm__("" : "+r"(tsp));
  ThreadState& ts = *tsp;
  ThreadBlock* b = ts.block;
  // Not yet claimed (the general path claims it), inside a gate already (a
  // callback calling back in), or word 0 busy: the general path.
  if (b == nullptr || ts.depth != 0) return false;
  std::atomic<std::uint64_t>& word = b->hazard[0];
  if (word.load(std::memory_order_relaxed) != 0) return false;
  // The handle's slot. Fewer tests than decode() and slot_at() (handles.cpp),
  // with the same outcome for every value: index + 1 == 0 wraps to 2^32 - 1,
  // never published (at most 2^28 slots); a published slot's chunk is
  // non-null (stored before g_published, which is read with acquire); and
  // generation 0, which no handle has, fails the state test below, since a
  // slot whose state has generation 0 has no reference (create() starts at
  // generation 1, and a retired slot ends at 0 << 32).
  const std::uint32_t index = static_cast<std::uint32_t>(h) - 1;
  if (index >= g_published.load(std::memory_order_acquire)) return false;
  Slot* s = &g_chunks[index >> kChunkBits].load(std::memory_order_acquire)[index & (kChunkSize - 1)];
  // One store serves both Dekker protocols: against the hazard scan of the
  // release that destroys the object (see "Borrows") and against fork()'s
  // prepare handler, which waits for every published hazard word as for a
  // gate. With asymmetric fences (thread_blocks.hpp) it is a plain store and
  // a compiler barrier, and both heavy sides call heavy_barrier() (destroy()
  // does for resources, the only type entered here); else sequentially
  // consistent. The locked store cost 1.5 ns of a 28 ns C ABI allocate+free
  // pair here, and more on CPUs where a locked instruction is dearer.
  std::uint64_t cur;
  if (g_asymmetric && type == ObjectType::Resource) {
    word.store(h, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (g_forking.load(std::memory_order_relaxed)) {
      word.store(0, std::memory_order_release);
      return false;  // the general path waits at its gate
    }
    cur = s->state.load(std::memory_order_acquire);
  } else {
    word.store(h, std::memory_order_seq_cst);
    if (g_forking.load(std::memory_order_seq_cst)) {
      word.store(0, std::memory_order_release);
      return false;  // the general path waits at its gate
    }
    cur = s->state.load(std::memory_order_seq_cst);
  }
  // (cur ^ h) >> 32: the generations differ (two instructions fewer than
  // comparing them shifted).
  if (((cur ^ h) >> 32) != 0 || (cur & kCountMask) == 0 ||
      s->type.load(std::memory_order_relaxed) != static_cast<std::uint32_t>(type)) {
    word.store(0, std::memory_order_release);
    return false;  // the general path reports it
  }
  // Nested gates (callbacks into tether) see they are inside. At depth 0
  // ts.entered is nullptr and ts.entered_unlisted false (fork_gate_leave()
  // resets them), as they must be here: prepare() and child() treat
  // ts.block as this thread's own either way.
  ts.depth = 1;
  out.object = s->object.load(std::memory_order_acquire);
  out.state = &ts;
  return true;
}

// leave() when a release during the call ended a handle this thread
// borrowed (handles.cpp).
void leave_with_pending(const Entered& entered) noexcept;

inline void leave(const Entered& e) noexcept {
  ThreadState& ts = *e.state;
  if (__builtin_expect(ts.pending_count != 0, 0)) return leave_with_pending(e);
  ts.block->hazard[0].store(0, std::memory_order_release);
  ts.depth = 0;
}

}  // namespace tether::capi::registry

namespace tether::capi {

// guard() for a call that registry::try_enter() let in (fast path): run f(),
// leave, and translate an exception as guard() does. Leaves before
// recording the message, as guard()'s ResourceRef ends its borrow before
// the handler runs.
template <class F>
tether_status_t guard_entered(const char* function, const registry::Entered& entered, F&& f) noexcept {
  try {
    f();
  } catch (const core::Error& e) {
    registry::leave(entered);
    return set_error(e.status(), function, e.what());
  } catch (const std::bad_alloc&) {
    registry::leave(entered);
    return set_error(TETHER_ERROR_OUT_OF_MEMORY, function, "out of host memory");
  } catch (const std::exception& e) {
    registry::leave(entered);
    return set_error(TETHER_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    registry::leave(entered);
    return set_error(TETHER_ERROR_INTERNAL, function, "unknown exception");
  }
  registry::leave(entered);
  return TETHER_OK;
}

}  // namespace tether::capi
