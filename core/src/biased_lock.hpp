// A lock that costs its usual thread no atomic read-modify-write.
//
// A pool's arena lock is taken on every allocate and free, almost always by
// one thread: a host pool's arena by the one thread that uses the pool, a
// stream-ordered pool's arena by the thread that owns the stream. An atomic
// exchange, the cheapest way to take a lock that any thread may take, costs
// that thread about as much as the rest of a cached allocate+free together
// (bench_pool_vs_malloc_core hot, 256 B: 21.8 ns per pair with the exchange
// on both calls, 12.4 ns with the lock's atomic made a plain load and store;
// with this lock 12.1 ns, for 30 instructions more per pair under callgrind).
//
// So the lock is biased (as JVMs biased their monitors): the first thread to
// take it is its owner. Once the owner has taken it `threshold_` times in a
// row, it takes and gives back the lock with a plain store and load of its
// own flag (`inside_`) and the lock's `biased_` word, ordered by a compiler
// barrier only. Any other thread first takes the shared lock (`held_`, an
// atomic exchange), then revokes the bias: it clears `biased_`, makes every
// running thread execute a full memory barrier (heavy_fence(), membarrier),
// and waits until the owner is not inside (try_lock() gives up instead). Then either the owner's flag was
// visible (it waits for it to drop) or the owner's load of `biased_` comes
// after the barrier and sees it cleared (the owner then takes the shared
// lock, like everyone else). This is the Dekker pattern of the fork gate
// (capi/src/fork.cpp), with the owner on the light side.
//
// The memory the lock guards passes between threads through the usual
// release/acquire pairs: an owner's fast hold ends with a release store of
// `inside_` that a revoker reads with acquire; a revoker's hold ends with a
// release of `held_`, which the owner takes (acquire) before it biases the
// lock again. ThreadSanitizer sees those pairs, so its builds run the bias.
//
// A revocation costs a membarrier system call (about a microsecond, more on
// a machine with many busy cores), so the owner biases the lock again only
// after twice as many shared holds in a row each time: a lock used by many
// threads in turn stops biasing after a few revocations, and costs what the
// plain exchange lock cost, plus a few instructions. The owner is the first
// thread to take the lock and never changes: two threads that could each
// write the owner's flag could each clobber the other's. Without membarrier
// (old kernels, some sandboxes) the lock never biases.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "tether_core/asymmetric_fence.hpp"

namespace tether::core::detail {

class BiasedLock {
 public:
  // Inline: the owner's fast hold and release, and a shared hold without a
  // bias to revoke. Every other case is a call (try_lock() fails instead),
  // so that the allocate and free fast paths that take the lock keep no
  // registers and no frame for it: inlined whole, the lock cost the cached
  // 256 B pair 29 instructions more (bench_pool_callgrind hot256).
  void lock() noexcept {
    if (!try_lock()) lock_shared();
  }

  // Take it if no thread holds it, without waiting (it may revoke a bias);
  // may fail spuriously while the owner is between a fast attempt and the
  // shared lock.
  bool try_lock() noexcept {
    if (enter_biased()) return true;
    if (held_.exchange(true, std::memory_order_acquire)) return false;
    if (owner_.load(std::memory_order_relaxed) == self()) return true;
    if (__builtin_expect(!biased_.load(std::memory_order_relaxed) && !inside_.load(std::memory_order_acquire), 1)) {
      streak_ = 0;  // another thread's hold ends the owner's run
      return true;
    }
    return try_lock_revoking();
  }

  void unlock() noexcept {
    // Only the owner ever sets inside_, so for the owner it says how it holds
    // the lock; any other thread holds the shared lock.
    if (inside_.load(std::memory_order_relaxed) && owner_.load(std::memory_order_relaxed) == self()) {
      inside_.store(false, std::memory_order_release);
      return;
    }
    const void* const owner = owner_.load(std::memory_order_relaxed);
    if (owner != self() && owner != nullptr) {
      held_.store(false, std::memory_order_release);
      return;
    }
    unlock_owner();
  }

  // For tests and the benchmarks' reports: whether the owner takes it without the shared lock now.
  bool biased() const noexcept { return biased_.load(std::memory_order_relaxed); }
  // How many times another thread revoked the bias.
  unsigned revocations() const noexcept { return revocations_; }

  // Holds in a row before the owner's first bias; doubled by each revocation, up to kMaxThreshold.
  static constexpr std::uint32_t kFirstThreshold = 64;
  static constexpr std::uint32_t kMaxThreshold = std::uint32_t{1} << 20;

 private:
  // The calling thread: its thread pointer (the TLS base register), read by
  // one instruction. A thread's value may be reused once it has exited, which
  // is harmless: the thread it named can hold nothing any more.
  static const void* self() noexcept {
#if defined(__x86_64__)
    const void* p;
    asm volatile("mov %%fs:0, %0" : "=r"(p));
    return p;
#elif defined(__aarch64__)
    const void* p;
    asm volatile("mrs %0, tpidr_el0" : "=r"(p));
    return p;
#else
    static thread_local char tag;
    return &tag;
#endif
  }

  // The owner's fast hold: no read-modify-write, no fence.
  bool enter_biased() noexcept {
    if (owner_.load(std::memory_order_relaxed) != self()) return false;
    inside_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the light side (revoke() is the heavy one)
    if (biased_.load(std::memory_order_relaxed)) return true;
    inside_.store(false, std::memory_order_relaxed);  // not biased: the shared lock, like anyone
    return false;
  }

  __attribute__((noinline)) void lock_shared() noexcept {
    if (held_.exchange(true, std::memory_order_acquire)) lock_slow();
    if (owner_.load(std::memory_order_relaxed) != self() && !settle_other()) wait_for_owner();
  }

  // try_lock() with the shared lock taken by a thread that is not the
  // owner, which found the lock biased or the owner inside.
  __attribute__((noinline, cold)) bool try_lock_revoking() noexcept {
    if (settle_other()) return true;
    held_.store(false, std::memory_order_release);
    return false;
  }

  // The shared lock just taken by a thread that is not the owner: it ends
  // any bias, and the owner's run of holds. True if the owner is not inside
  // (the caller then holds the lock); false while it is, in its last fast
  // hold or between a fast attempt that found the bias gone and the shared
  // lock (it cannot enter again: its next load of biased_ sees it cleared).
  bool settle_other() noexcept {
    streak_ = 0;
    if (__builtin_expect(biased_.load(std::memory_order_relaxed), 0)) revoke();
    return !inside_.load(std::memory_order_acquire);
  }

  __attribute__((noinline, cold)) void revoke() noexcept {
    biased_.store(false, std::memory_order_relaxed);
    heavy_fence();
    ++revocations_;
    if (threshold_ < kMaxThreshold) threshold_ *= 2;
  }

  // The owner is inside for one allocate or free at most.
  __attribute__((noinline, cold)) void wait_for_owner() noexcept {
    for (unsigned round = 0; inside_.load(std::memory_order_acquire);) back_off(round++);
  }

  // Gives back the shared lock held by the owner, or by the first thread
  // to get here, which becomes the owner: counts the owner's run of holds
  // and biases the lock once the run is long enough.
  __attribute__((noinline)) void unlock_owner() noexcept {
    if (owner_.load(std::memory_order_relaxed) == nullptr) {
      owner_.store(self(), std::memory_order_relaxed);  // once; readers that see nullptr just take the shared lock
      streak_ = 1;
    } else if (++streak_ >= threshold_ && asymmetric_fence_available()) {
      biased_.store(true, std::memory_order_relaxed);
    }
    held_.store(false, std::memory_order_release);
  }

  // Out of line: inlined, its loop and calls made every function that takes
  // the lock save registers and build a frame on the uncontended path too.
  __attribute__((noinline, cold)) void lock_slow() noexcept {
    for (unsigned round = 0;;) {
      while (held_.load(std::memory_order_relaxed)) back_off(round++);
      if (!held_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  // One round of waiting, for lock_slow() and wait_for_owner(): spin briefly,
  // then yield, then nap - the world-locked slow paths of a stream-ordered
  // pool may hold the lock across a device synchronisation.
  static void back_off(unsigned round) noexcept {
    if (round < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (round < 1024) {
      std::this_thread::yield();
    } else {
      const timespec nap{0, 20000};  // 20 us
      nanosleep(&nap, nullptr);
    }
  }

  std::atomic<bool> held_{false};    // the shared lock
  std::atomic<bool> biased_{false};  // the owner may hold it without held_ (set by the owner, cleared by revoke(), both under held_)
  std::atomic<bool> inside_{false};  // the owner holds it biased (written by the owner only)
  std::atomic<const void*> owner_{nullptr};  // set once, under held_
  std::uint32_t streak_ = 0;  // the owner's shared holds in a row (under held_)
  std::uint32_t threshold_ = kFirstThreshold;  // (under held_)
  unsigned revocations_ = 0;  // (under held_)
};

}  // namespace tether::core::detail
