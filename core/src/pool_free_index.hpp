// Pool internals: a two-level segregated-fit (TLSF) index of free blocks.
//
// Sizes, in granules (u = bytes / 256), fall into classes: u < 16 has one
// class per value; above, the first level is floor(log2 u) and the second
// splits each power-of-two range into 16 equal parts. One bit per non-empty
// class (a 64-bit first-level map, a 16-bit map per row) finds the smallest
// non-empty class at least as large as a request with a few bit operations.
// The request is rounded up to the next class boundary first, so any block
// of the class found fits: the search never walks a list (good fit, O(1)).
// Each class is a doubly-linked LIFO list, so any block can be removed in
// O(1) when it is coalesced with a neighbour.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pool_block.hpp"

namespace tether::core::pool_detail {

class FreeIndex {
 public:
  // An index of `owner` (nullptr: the pool's memory no stream has used);
  // `fresh`: what the owner's stream freed since the owner last recorded its
  // event (pool.cpp, "Stream ordering").
  FreeIndex(Arena* owner, bool fresh) noexcept : owner_(owner), fresh_(fresh) {}
  FreeIndex(const FreeIndex&) = delete;
  FreeIndex& operator=(const FreeIndex&) = delete;

  Arena* owner() const noexcept { return owner_; }
  bool fresh() const noexcept { return fresh_; }
  bool empty() const noexcept { return first_level_ == 0; }
  std::size_t size() const noexcept { return count_; }  // blocks in the index

  void insert(Block* b) noexcept {
    unsigned fl, sl;
    map(b->size >> kGranuleShift, fl, sl);
    Block*& head = heads_[fl][sl];
    b->index = this;
    b->links.prev = nullptr;
    b->links.next = head;
    if (head != nullptr) head->links.prev = b;
    head = b;
    first_level_ |= std::uint64_t{1} << fl;
    second_level_[fl] |= 1u << sl;
    ++count_;
  }

  void remove(Block* b) noexcept {
    if (b->links.prev != nullptr) {
      b->links.prev->links.next = b->links.next;
    } else {
      unsigned fl, sl;
      map(b->size >> kGranuleShift, fl, sl);
      heads_[fl][sl] = b->links.next;
      if (b->links.next == nullptr) {
        second_level_[fl] &= ~(1u << sl);
        if (second_level_[fl] == 0) first_level_ &= ~(std::uint64_t{1} << fl);
      }
    }
    if (b->links.next != nullptr) b->links.next->links.prev = b->links.prev;
    b->index = nullptr;
    --count_;
  }

  // A block of at least `bytes`, in O(1), or nullptr. It stays in the index.
  Block* find(std::size_t bytes) const noexcept {
    if (first_level_ == 0) return nullptr;  // (a host pool's fresh index always is empty)
    std::uint64_t u = bytes >> kGranuleShift;
    // Up to the next class boundary (no branch: see map()).
    u += u >= kSecond ? (std::uint64_t{1} << (log2(u | 1) - kSecondBits)) - 1 : 0;
    unsigned fl, sl;
    map(u, fl, sl);
    std::uint32_t row = second_level_[fl] & (~0u << sl);
    if (row == 0) {
      const std::uint64_t above = fl + 1 < kFirst ? first_level_ & (~std::uint64_t{0} << (fl + 1)) : 0;
      if (above == 0) return nullptr;
      fl = static_cast<unsigned>(__builtin_ctzll(above));
      row = second_level_[fl];
    }
    return heads_[fl][__builtin_ctz(row)];
  }

  // Best fit among at most `limit` blocks of the class `bytes` itself falls
  // in. find() skips that class (its smaller members would not fit), so this
  // is the fallback before the pool grows.
  Block* scan_own_class(std::size_t bytes, std::size_t limit) const noexcept {
    if (first_level_ == 0) return nullptr;
    unsigned fl, sl;
    map(bytes >> kGranuleShift, fl, sl);
    Block* best = nullptr;
    for (Block* b = heads_[fl][sl]; b != nullptr && limit != 0; b = b->links.next, --limit) {
      if (b->size >= bytes && (best == nullptr || b->size < best->size)) {
        best = b;
        if (b->size == bytes) break;
      }
    }
    return best;
  }

  // Any block (the head of the smallest non-empty class), or nullptr.
  Block* any() const noexcept {
    if (first_level_ == 0) return nullptr;
    const unsigned fl = static_cast<unsigned>(__builtin_ctzll(first_level_));
    return heads_[fl][__builtin_ctz(second_level_[fl])];
  }

  // Size of the largest block (walks the top class only).
  std::size_t largest() const noexcept {
    if (first_level_ == 0) return 0;
    const unsigned fl = 63u - static_cast<unsigned>(__builtin_clzll(first_level_));
    const unsigned sl = 31u - static_cast<unsigned>(__builtin_clz(second_level_[fl]));
    std::size_t best = 0;
    for (Block* b = heads_[fl][sl]; b != nullptr; b = b->links.next)
      if (b->size > best) best = b->size;
    return best;
  }

 private:
  static constexpr unsigned kSecondBits = 4;
  static constexpr unsigned kSecond = 1u << kSecondBits;  // 16 subdivisions
  // Row 0 holds u < 16; row r >= 1 holds floor(log2 u) == r + 3. Sizes are
  // below 2^64 bytes, i.e. u < 2^56, so rows up to 52 are used.
  static constexpr unsigned kFirst = 56;

  static unsigned log2(std::uint64_t u) noexcept { return 63u - static_cast<unsigned>(__builtin_clzll(u)); }

  // Without a branch (the compiler emits conditional moves): whether a
  // size is below 16 granules is a coin toss on mixed sizes, and a
  // mispredicted branch costs more than the few instructions it saves.
  static void map(std::uint64_t u, unsigned& fl, unsigned& sl) noexcept {
    const bool small = u < kSecond;
    const unsigned l = log2(u | 1);
    fl = small ? 0u : l - (kSecondBits - 1);
    sl = static_cast<unsigned>(u >> (small ? 0u : l - kSecondBits)) & (kSecond - 1);
  }

  Arena* const owner_;
  const bool fresh_;
  std::size_t count_ = 0;
  std::uint64_t first_level_ = 0;
  std::uint32_t second_level_[kFirst] = {};
  Block* heads_[kFirst][kSecond] = {};
};

}  // namespace tether::core::pool_detail
