// Internals shared by the resources that keep their live allocations by
// address (the pool's blocks, the host resource's side table): an open-
// addressing table and a small spin lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

namespace tether::core::detail {

// Guards a few word updates; never held across a call that can block.
class SpinLock {
 public:
  void lock() noexcept {
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// Entries keyed by address: open addressing with linear probing and
// backward-shift deletion (no tombstones), kept at most half full.
//   Slot      a struct with `std::uintptr_t key` (0: empty) and the payload;
//   KeyShift  low address bits that carry no information (alignment);
//   UsedBits  top bits of the hash the caller already used (e.g. to pick a shard).
// A multiplicative hash with a fold (hash()), so consecutive and strided
// addresses spread out. Not thread-safe.
template <class Slot, unsigned KeyShift, unsigned UsedBits = 0, std::size_t InitialCapacity = 64>
class AddressTable {
 public:
  static constexpr std::size_t npos = SIZE_MAX;

  // Fibonacci hashing alone clusters strided keys (blocks of one size laid
  // out one after another: the stride multiplies the golden ratio, and the
  // homes fall on a few short arcs, so probe runs grow to tens of slots); the
  // xor of the product's middle bits into its top ones (the home slot)
  // breaks the stride: a 256 B allocate+free pair with 100 blocks of 4 KiB
  // live went from 1020 to 771 instructions (bench_pool_callgrind hot256).
  static std::uint64_t hash(std::uintptr_t key) noexcept {
    std::uint64_t h = static_cast<std::uint64_t>(key >> KeyShift) * 0x9E3779B97F4A7C15ull;
    return h ^ (h << 24);
  }

  // Make room for one more entry, so that the insert() after it cannot fail.
  // Throws std::bad_alloc, leaving the table as it was.
  void reserve_one() {
    if ((size_ + 1) * 2 > capacity_) rehash(capacity_ == 0 ? InitialCapacity : capacity_ * 2);
  }

  // Requires reserve_one() and that s.key (non-zero) is not present.
  void insert(const Slot& s) noexcept {
    std::size_t i = home(s.key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = s;
    ++size_;
  }

  // The slot holding `key`, or npos.
  std::size_t find(std::uintptr_t key) const noexcept {
    if (key == 0) return npos;  // (an empty table's slots are none_: no capacity test)
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return i;
      if (slots_[i].key == 0) return npos;
    }
  }

  const Slot& at(std::size_t i) const noexcept { return slots_[i]; }

  void erase_at(std::size_t i) noexcept {
    // Pull later members of the probe run back into the hole, unless that
    // would move one before its home slot.
    for (std::size_t j = i;;) {
      j = (j + 1) & mask_;
      if (slots_[j].key == 0) break;
      const std::size_t k = home(slots_[j].key);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
  }

  std::size_t size() const noexcept { return size_; }

  AddressTable() = default;
  AddressTable(const AddressTable&) = delete;
  AddressTable& operator=(const AddressTable&) = delete;
  ~AddressTable() {
    if (slots_ != none_) delete[] slots_;
  }

 private:
  std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>((hash(key) << UsedBits) >> shift_);
  }

  void rehash(std::size_t capacity) {
    Slot* const old = slots_;
    slots_ = new Slot[capacity];  // may throw: nothing changed yet
    const std::size_t old_capacity = capacity_;
    capacity_ = capacity;
    mask_ = capacity - 1;
    shift_ = 64u - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].key != 0) insert(old[i]);
    if (old != none_) delete[] old;
  }

  // Before the first insert the table has no capacity and its slots are
  // none_, two empty slots that home() (shift 63: slot 0 or 1) lands on, so
  // find() needs no test for a table never filled. Never written.
  static inline Slot none_[2] = {};
  Slot* slots_ = none_;
  std::size_t capacity_ = 0, mask_ = 0, size_ = 0;
  unsigned shift_ = 63;
};

}  // namespace tether::core::detail
