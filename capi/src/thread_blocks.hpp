// Per-thread records that other threads scan (the registry's hazard words, the
// fork gate): a global, never-freed list of blocks; a thread claims a free one
// on first use and gives it back when it exits. The give-back runs from a
// pthread key's destructor, not a thread_local with a destructor: registering
// one of those allocates, and glibc aborts the process when that allocation fails.
#pragma once

#include <pthread.h>

#include <atomic>
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
