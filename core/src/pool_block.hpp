// Pool internals: the bookkeeping records of a pool. They live in host memory
// owned by the pool, never inside the pooled memory, which may be device
// memory the host cannot touch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "address_table.hpp"
#include "tether_core/resource.hpp"

namespace tether::core::pool_detail {

// Every block size and offset is a multiple of this (the CUDA allocation granularity).
inline constexpr std::size_t kGranule = 256;
inline constexpr unsigned kGranuleShift = 8;

class FreeIndex;
struct Chunk;
struct Extent;
struct Arena;

// Guards the physical layout of one chunk (block sizes, neighbour links, and
// which index each block is in), which the arenas of different streams share
// at chunk boundaries. Held only for a few pointer updates, never with another
// chunk's lock, always after the arena lock.
using detail::SpinLock;

// A piece of one chunk, free or allocated. One cache line.
struct alignas(64) Block {
  struct Links {  // free: the block's place in a free list of `index`
    Block** pprev;  // the pointer to this block: the list head or the previous block's `next`
    Block* next;    // (also links spare records in the pool's record cache)
  };
  struct CacheLink {  // kept in a quick cache (pool_arena.hpp)
    Block* next;
    std::uint64_t tag;  // Request::kCached (request.tag)
  };
  struct Request {  // allocated: what was asked for and by whom, checked on free
    std::size_t bytes;
    std::uint64_t tag;  // owner << 6 | log2(alignment): the block stays one cache line
    void set(std::size_t alignment, owner_t owner) noexcept {
      tag = (static_cast<std::uint64_t>(owner) << 6) | static_cast<std::uint64_t>(__builtin_ctzll(alignment));
    }
    std::size_t alignment() const noexcept { return std::size_t{1} << (tag & 63u); }
    owner_t owner() const noexcept { return tag >> 6; }
    // A freed block kept in its arena's quick cache (pool_arena.hpp) and still
    // in its table: no owner can be 2^58 - 1 and no alignment 2^63, so no
    // allocated block has this tag.
    static constexpr std::uint64_t kCached = ~std::uint64_t{0};
    bool cached() const noexcept { return tag == kCached; }
  };

  std::uintptr_t addr = 0;
  std::size_t size = 0;
  Block* prev_phys = nullptr;  // physical neighbours in the chunk; nullptr at its ends
  Block* next_phys = nullptr;
  Chunk* chunk = nullptr;
  FreeIndex* index = nullptr;  // free: the index holding it; allocated: nullptr (chunk lock)
  union {
    Links links{};
    Request request;
    CacheLink cache;
  };
};
static_assert(sizeof(Block) == 64, "a block record is one cache line");

// One allocation from upstream. It is given back whole, once every chunk
// carved from it is wholly free.
struct Extent {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  std::size_t chunks = 0;  // chunks that tile it
  bool busy = false;       // scratch for the world-locked scans
  bool grown = false;      // asked for by growth (not the initial size): growth may give it back to merge (pool.cpp)
};

// A contiguous piece of one extent, carved into blocks: the unit of physical
// layout and of locking. A grown extent is one chunk. A large extent no stream
// has used yet (the initial size of a stream-ordered pool) is handed to the
// streams in slabs, each its own chunk, so threads on different streams never
// share a chunk lock or counter; blocks coalesce within a chunk only, and the
// out-of-memory step joins the chunks of an extent again. Own cache line.
struct alignas(64) Chunk {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  std::size_t allocated = 0;  // allocated blocks in it: 0 means wholly free
  Block* first = nullptr;     // lowest-addressed block (never merged away)
  Chunk* prev = nullptr;      // the pool's list of chunks
  Chunk* next = nullptr;
  Extent* extent = nullptr;   // the upstream allocation it is part of
  SpinLock lock;              // guards addr/size/links/index of its blocks, and `allocated`
  bool shared = true;         // false: one arena only (a host pool), whose mutex guards it all; no lock taken
};

}  // namespace tether::core::pool_detail
