// Per-thread records that other threads scan (the registry's hazard words, the
// fork gate): a global, never-freed list of blocks; a thread claims a free one
// on first use and gives it back when it exits. The give-back runs from a
// pthread key's destructor, not a thread_local with a destructor: registering
// one of those allocates, and glibc aborts the process when that allocation fails.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

namespace tether::capi {

// Block: a default-constructible type with `std::atomic<bool> owned` and a
// `Block* next` that is immutable once published.
template <class Block>
class ThreadBlocks {
 public:
  // on_exit(block) runs when a thread that claimed `block` exits; it must give
  // the block back (give_back) and forget the thread's pointer to it.
  // constexpr: a static ThreadBlocks is constant-initialised, so it works even
  // when another library's static initialiser calls tether first.
  constexpr explicit ThreadBlocks(void (*on_exit)(void*)) noexcept : on_exit_(on_exit) {}

  // The first block of the list, for scanning every thread's record.
  Block* first() const noexcept { return head_.load(std::memory_order_acquire); }

  // Claim a free block (or publish a new one) for the calling thread and arrange
  // for on_exit at its exit. nullptr if out of memory or no exit hook could be set.
  Block* claim() noexcept {
    try {
      std::call_once(key_once_, [this] { key_ok_ = pthread_key_create(&key_, on_exit_) == 0; });
    } catch (...) {
      return nullptr;
    }
    Block* b = first();
    for (; b != nullptr; b = b->next) {
      bool expected = false;
      if (!b->owned.load(std::memory_order_relaxed) &&
          b->owned.compare_exchange_strong(expected, true, std::memory_order_acquire))
        break;
    }
    if (b == nullptr) {
      b = new (std::nothrow) Block;
      if (b == nullptr) return nullptr;
      b->owned.store(true, std::memory_order_relaxed);
      b->next = head_.load(std::memory_order_relaxed);
      while (!head_.compare_exchange_weak(b->next, b, std::memory_order_release, std::memory_order_relaxed)) {
      }
    }
    if (!key_ok_ || pthread_setspecific(key_, b) != 0) {
      give_back(b);  // no exit hook: do not keep it
      return nullptr;
    }
    return b;
  }

  static void give_back(Block* b) noexcept { b->owned.store(false, std::memory_order_release); }

 private:
  std::atomic<Block*> head_{nullptr};
  void (*on_exit_)(void*);
  std::once_flag key_once_;
  pthread_key_t key_{};
  bool key_ok_ = false;
};

}  // namespace tether::capi

namespace tether::capi {

// ---- the calling thread's state (handles.cpp defines it) ---------------------
//
// Everything tether keeps per thread for the handle registry and the fork
// gate is in one block that other threads scan (ThreadBlock: hazard words and
// the gate's flag, one cache line) and one thread_local struct (ThreadState),
// so a call computes one TLS address, not one per variable.
//
// TLS model: the default (global-dynamic), one __tls_get_addr per call.
// Initial-exec would make that a single %fs-relative load, but it requires
// the whole of libtether's TLS segment to fit in static TLS (it is ~2.6 KiB:
// error.cpp's message buffer, the core's per-thread caches, this). A library
// that Python dlopens only gets glibc's static TLS surplus for that (glibc >=
// 2.32: rtld.optional_static_tls, 512 bytes by default, shared by every
// dlopened module); past it dlopen fails with "cannot allocate memory in
// static TLS block". TLS descriptors (-mtls-dialect=gnu2) would fall back
// gracefully, but through _dl_tlsdesc_dynamic, which did not preserve vector
// registers in some glibc releases (glibc bug 31372, fixed in 2.40 and
// backports). One lookup per call is ~11 instructions: not worth either risk.

constexpr int kHazards = 4;  // borrows one thread may hold at once

// One thread's record that other threads read. Never freed; a thread's block
// goes back to the pool when the thread exits.
struct alignas(64) ThreadBlock {
  std::atomic<std::uint64_t> hazard[kHazards] = {};  // borrowed handle values; 0 = unused
  std::atomic<std::uint32_t> active{0};             // 1 while inside a fork gate (fork.cpp)
  std::atomic<bool> owned{false};
  ThreadBlock* next = nullptr;  // immutable once published
};

// A destruction deferred until this thread's borrow of the handle ends (handles.cpp).
struct PendingDestroy {
  std::uint64_t handle = 0;
  void* slot = nullptr;
  std::uint32_t index = 0;
};

// Constant-initialised and trivially destructible: no TLS guard or wrapper.
struct ThreadState {
  ThreadBlock* block = nullptr;  // claimed on first use
  bool gone = false;             // past this thread's TLS destruction: no block any more
  // The fork gate (fork.cpp).
  bool entered_unlisted = false;  // the outermost gate counted in g_unlisted
  int depth = 0;                  // gates entered (nesting)
  ThreadBlock* entered = nullptr;  // the block the outermost gate used
  // The registry (handles.cpp).
  int pending_count = 0;
  PendingDestroy pending[kHazards] = {};
};

// The calling thread's state, and its block (claimed now if need be; nullptr
// if none could be had: the callers then count the thread elsewhere).
ThreadState& thread_state() noexcept;
ThreadBlock* my_block(ThreadState& ts) noexcept;
// The first block of the list of every thread's block.
ThreadBlock* first_thread_block() noexcept;

// Raised by fork()'s prepare handler until the fork is over (fork.cpp).
extern std::atomic<bool> g_forking;

// Asymmetric fences (fork.cpp). When true, the light side of a Dekker
// handshake - a fork gate, registry::try_enter()'s hazard word - orders its store
// and its load with a compiler barrier only, and the heavy side - fork()'s
// prepare handler, the release that destroys a resource whose handle
// try_enter() may have published - calls heavy_barrier() between its own store
// and its reads, which makes every running thread of the process execute a
// full barrier (membarrier PRIVATE_EXPEDITED). False where the kernel lacks
// it, and under ThreadSanitizer: both sides then use sequentially consistent
// operations. Set once, while libtether loads.
extern const bool g_asymmetric;
void heavy_barrier() noexcept;

}  // namespace tether::capi
