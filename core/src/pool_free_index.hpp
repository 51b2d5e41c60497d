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

  // Neither insert() nor remove()'s unlinking branches on the list's state
  // (whether it was or becomes empty is a coin toss on mixed sizes): each
  // block links back to the pointer that points at it (the head or the
  // previous block's `next`), and a missing neighbour is the index's own
  // scratch record. bench_pool_callgrind, against prev/next links with
  // branches: random 710 -> 718 instructions but 5.6 -> 4.2 mispredicted
  // branches per pair, steady 1k live 662 -> 672 and 6.0 -> 5.1.
  void insert(Block* b) noexcept {
    unsigned fl, sl;
    map(b->size >> kGranuleShift, fl, sl);
    Block*& head = heads_[fl][sl];
    Block* const h = head;
    b->index = this;
    b->links.pprev = &head;
    b->links.next = h;
    (h != nullptr ? h : &scratch_)->links.pprev = &b->links.next;
    head = b;
    first_level_ |= std::uint64_t{1} << fl;
    second_level_[fl] |= 1u << sl;
    ++count_;
  }

  void remove(Block* b) noexcept {
    Block* const next = b->links.next;
    Block** const pprev = b->links.pprev;
    *pprev = next;
    (next != nullptr ? next : &scratch_)->links.pprev = pprev;
    // Its class emptied if it was a head (pprev is then that head's slot,
    // which also names the class) and had no successor. The maps are
    // written only then, behind a branch: written on every remove (masked,
    // no branch), they took their value from b's links, so the next find()
    // waited for the loads of b's record and its list neighbours (cache
    // misses with many blocks live) instead of running ahead of them.
    // bench_pool_vs_malloc_core's sweep against the masked form (the core
    // pool, interleaved runs on a shared machine): 100k live 9-13% faster
    // (e.g. 180 -> 163 ns per pair), 10k 2-5% faster, 1k 3-4% slower (77.5
    // -> 79.3); bench_pool_callgrind random 647 -> 627 instructions and
    // 5.18 -> 5.33 mispredicts per pair, cache misses unchanged.
    const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(pprev) - reinterpret_cast<std::uintptr_t>(&heads_[0][0]);
    if (__builtin_expect((off < sizeof heads_) & (next == nullptr), 0)) {
      const std::size_t cls = off / sizeof(Block*);
      const unsigned fl = static_cast<unsigned>(cls / kSecond), sl = static_cast<unsigned>(cls % kSecond);
      second_level_[fl] &= ~(1u << sl);
      first_level_ &= ~(std::uint64_t{second_level_[fl] == 0} << fl);
    }
    b->index = nullptr;
    --count_;
  }

  // A block of at least `bytes`, in O(1), or nullptr. It stays in the index.
  Block* find(std::size_t bytes) const noexcept {
    if (first_level_ == 0) return nullptr;  // (a host pool's fresh index always is empty)
    std::uint64_t u = bytes >> kGranuleShift;
    // Up to the next class boundary (no branch: see map(); below kSecond it adds 0).
    u += (std::uint64_t{1} << (log2(u | kSecond) - kSecondBits)) - 1;
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

  // Without a branch: whether a size is below 16 granules is a coin toss on
  // mixed sizes, and a mispredicted branch costs more than the few
  // instructions it saves. (Written with conditional operators, GCC 12 kept
  // a branch here: 1.2 mispredicts per pair on bench_pool_callgrind random.)
  // Below kSecond, l is kSecondBits: row 0, sl = u.
  static void map(std::uint64_t u, unsigned& fl, unsigned& sl) noexcept {
    const unsigned l = log2(u | kSecond);
    fl = l - (kSecondBits - 1) - static_cast<unsigned>(u < kSecond);
    sl = static_cast<unsigned>(u >> (l - kSecondBits)) & (kSecond - 1);
  }

  Arena* const owner_;
  const bool fresh_;
  std::size_t count_ = 0;
  std::uint64_t first_level_ = 0;
  std::uint32_t second_level_[kFirst] = {};
  Block* heads_[kFirst][kSecond] = {};
  Block scratch_;  // stands in for a missing list neighbour (insert, remove); never read
};

}  // namespace tether::core::pool_detail
