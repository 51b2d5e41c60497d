// fork() safety.
//
// A fork() child has one thread: the one that called fork(). Any lock another
// thread held at that moment stays locked forever in the child, and any
// hazard word it had published (handles.cpp, "Borrows") stays published, so
// a release in the child would wait for a thread that does not exist.
//
// tether takes no lock across calls and calls no user code, so "no thread is
// inside tether" means "no tether lock is held and no hazard word is
// published". That is what the prepare handler establishes: every entry point
// that can lock or wait runs inside a ForkGate (guard(), registry::release(),
// the PyTorch entry points, the orphan census); prepare raises g_forking and
// waits until no other thread is inside a gate, while threads that arrive
// meanwhile wait at the gate until the fork is over. A gate costs one
// store to a per-thread word and one load of a shared, read-mostly flag,
// ordered by an asymmetric fence (membarrier) where the kernel has one.
// The hot entry points (allocate, deallocate) pass no gate of their own:
// registry::try_enter() publishes the handle in the thread's hazard word, which
// a borrow needs anyway, and checks g_forking after that one fenced store;
// prepare() waits for published hazard words as for raised gate flags. The
// gate flag and the hazard words share one per-thread block
// (thread_blocks.hpp).
//
// In the child the handler forgets the gate records and hazard words of
// threads that no longer exist and tells the core (process.cpp) that CUDA is
// gone if the parent had initialised it. Host resources, pools over host
// memory, buffers, the table and handles work in the child; CUDA resources
// fail with TETHER_ERROR_NO_DEVICE, and CUDA memory inherited from the parent
// is never freed there (leaked, like at exit).
#include <pthread.h>
#include <sched.h>

#include <mutex>

#include "internal.hpp"
#include "thread_blocks.hpp"
#include "tether_core/asymmetric_fence.hpp"
#include "tether_core/process.hpp"

namespace tether::capi {

namespace registry {
void after_fork_child() noexcept;  // handles.cpp
}

// Raised by prepare() until the fork is over (thread_blocks.hpp).
std::atomic<bool> g_forking{false};

// The gate's store-load ordering. Where the kernel offers it, an asymmetric
// fence (tether_core/asymmetric_fence.hpp): gates order their store and load
// with a compiler barrier only, and prepare() makes every running thread of
// the process execute a full barrier between raising g_forking and reading
// the gate records. Otherwise both sides use sequentially consistent
// operations. Not under ThreadSanitizer, which does not model membarrier: the
// gates have no happens-before edge of their own for it to see.
#if defined(__SANITIZE_THREAD__)
const bool g_asymmetric = false;
#else
const bool g_asymmetric = core::asymmetric_fence_available();
#endif

// Heavy side: after this, every light store made before is visible (a gate's
// `active`, a hazard word of registry::try_enter()), and every light load made
// after sees what the caller stored before (g_forking raised, a slot's
// generation bumped).
void heavy_barrier() noexcept { core::heavy_fence(); }

namespace {

// Threads inside a gate without a block (allocation failed, or the thread is
// past its TLS destruction): counted here instead.
std::atomic<std::int64_t> g_unlisted{0};
std::mutex g_fork_mutex;  // one fork at a time


void wait_for_fork() noexcept {
  while (g_forking.load(std::memory_order_acquire)) sched_yield();
}

// ---- the atfork handlers ------------------------------------------------------

// The handlers may be registered twice (see register_again()): only the
// outermost call of each kind does the work. fork() runs prepare handlers in
// reverse order of registration, parent/child handlers in order.
thread_local int t_handler_depth = 0;

void prepare() noexcept {
  if (t_handler_depth++ > 0) return;
  g_fork_mutex.lock();
  g_forking.store(true, std::memory_order_seq_cst);
  heavy_barrier();
  // The forking thread itself is never inside a gate (tether does not fork),
  // but do not wait for it if it is.
  ThreadState& ts = thread_state();
  const ThreadBlock* mine = ts.depth > 0 ? ts.entered : nullptr;
  const std::int64_t my_unlisted = (ts.depth > 0 && ts.entered_unlisted) ? 1 : 0;
  // A thread is inside while its gate flag is up or it has a hazard word
  // published (registry::try_enter()'s fast path uses the hazard word as its
  // gate record). Waiting for hazard words cannot deadlock: no thread waits
  // at a gate while it holds one (other borrows are taken inside gates,
  // whose inner gates nest without waiting, or - tether_buffer_unpin - end
  // before the next gate).
  for (ThreadBlock* b = first_thread_block(); b != nullptr; b = b->next) {
    if (b == mine || b == ts.block) continue;
    while (b->active.load(std::memory_order_seq_cst) != 0) sched_yield();  // a call is finite
    for (auto& w : b->hazard)
      while (w.load(std::memory_order_seq_cst) != 0) sched_yield();
  }
  while (g_unlisted.load(std::memory_order_seq_cst) > my_unlisted) sched_yield();
}

void parent() noexcept {
  if (--t_handler_depth > 0) return;
  g_forking.store(false, std::memory_order_release);
  g_fork_mutex.unlock();
}

void child() noexcept {
  if (--t_handler_depth > 0) return;
  // Only this thread exists: every other record belongs to no one.
  ThreadState& ts = thread_state();
  for (ThreadBlock* b = first_thread_block(); b != nullptr; b = b->next) {
    if (b == ts.block) continue;
    b->active.store(0, std::memory_order_relaxed);
    b->owned.store(false, std::memory_order_relaxed);
  }
  g_unlisted.store((ts.depth > 0 && ts.entered_unlisted) ? 1 : 0, std::memory_order_relaxed);
  registry::after_fork_child();
  core::on_fork_child();
  g_forking.store(false, std::memory_order_release);
  g_fork_mutex.unlock();  // locked by this thread in prepare()
}

// Once the CUDA driver is loaded, register again: prepare handlers run in
// reverse order of registration, so ours then runs before any the driver
// registered, and waits for threads inside tether (perhaps inside a driver
// call) before the driver's handler could take the driver's own locks.
void register_again() { (void)pthread_atfork(prepare, parent, child); }

struct Install {
  Install() noexcept {
    (void)pthread_atfork(prepare, parent, child);
    core::set_cuda_loaded_hook(register_again);
  }
};
const Install g_install;

}  // namespace

void fork_gate_enter() noexcept {
  ThreadState& ts = thread_state();
  if (ts.depth++ != 0) return;
  ThreadBlock* b = my_block(ts);
  if (b != nullptr) {
    ts.entered = b;
    ts.entered_unlisted = false;
    for (;;) {
      // Dekker: either prepare() sees this store and waits, or this thread
      // sees g_forking and steps back (see heavy_barrier()).
      if (g_asymmetric) {
        b->active.store(1, std::memory_order_relaxed);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (!g_forking.load(std::memory_order_relaxed)) return;
      } else {
        b->active.store(1, std::memory_order_seq_cst);
        if (!g_forking.load(std::memory_order_seq_cst)) return;
      }
      b->active.store(0, std::memory_order_seq_cst);
      wait_for_fork();
    }
  }
  ts.entered = nullptr;
  ts.entered_unlisted = true;
  for (;;) {
    g_unlisted.fetch_add(1, std::memory_order_seq_cst);
    if (!g_forking.load(std::memory_order_seq_cst)) return;
    g_unlisted.fetch_sub(1, std::memory_order_seq_cst);
    wait_for_fork();
  }
}

void fork_gate_leave() noexcept {
  ThreadState& ts = thread_state();
  if (--ts.depth != 0) return;
  if (ts.entered_unlisted) {
    ts.entered_unlisted = false;
    g_unlisted.fetch_sub(1, std::memory_order_release);
  } else if (ts.entered != nullptr) {
    ts.entered->active.store(0, std::memory_order_release);
    ts.entered = nullptr;
  }
}

}  // namespace tether::capi
