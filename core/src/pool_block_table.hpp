// Pool internals: the allocated blocks by address, so that deallocate() finds
// a block in O(1) and recognises pointers the pool never handed out.
// Open addressing with linear probing and backward-shift deletion (no
// tombstones); kept at most half full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pool_block.hpp"

namespace tether::core::pool_detail {

class BlockTable {
 public:
  static constexpr std::size_t npos = SIZE_MAX;

  // Make room for one more entry, so that the insert() after it cannot fail.
  // Throws std::bad_alloc, leaving the table as it was.
  void reserve_one() {
    if ((size_ + 1) * 2 > capacity_) rehash(capacity_ == 0 ? kInitialCapacity : capacity_ * 2);
  }

  // Requires reserve_one() and that `key` (non-zero) is not present.
  void insert(std::uintptr_t key, Block* block) noexcept {
    std::size_t i = home(key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{key, block};
    ++size_;
  }

  // The slot holding `key`, or npos.
  std::size_t find(std::uintptr_t key) const noexcept {
    if (capacity_ == 0 || key == 0) return npos;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return i;
      if (slots_[i].key == 0) return npos;
    }
  }

  Block* at(std::size_t slot) const noexcept { return slots_[slot].block; }

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

 private:
  struct Slot {
    std::uintptr_t key = 0;
    Block* block = nullptr;
  };
  static constexpr std::size_t kInitialCapacity = 256;

  // Fibonacci hashing of the address in granules: consecutive blocks spread out.
  std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key >> kGranuleShift) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }

  void rehash(std::size_t capacity) {
    std::unique_ptr<Slot[]> old(new Slot[capacity]);
    old.swap(slots_);
    const std::size_t old_capacity = capacity_;
    capacity_ = capacity;
    mask_ = capacity - 1;
    shift_ = 64u - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].key != 0) insert(old[i].key, old[i].block);
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t capacity_ = 0, mask_ = 0, size_ = 0;
  unsigned shift_ = 64;
};

}  // namespace tether::core::pool_detail
