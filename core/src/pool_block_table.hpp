// Pool internals: the allocated blocks by address, so that deallocate() finds
// a block in O(1) and recognises pointers the pool never handed out (an
// AddressTable keyed by the block's address in granules).
#pragma once

#include <cstddef>
#include <cstdint>

#include "address_table.hpp"
#include "pool_block.hpp"

namespace tether::core::pool_detail {

struct BlockSlot {
  std::uintptr_t key = 0;
  Block* block = nullptr;
};

class BlockTable : public detail::AddressTable<BlockSlot, kGranuleShift, 0, 256> {
 public:
  // Requires reserve_one() and that `key` (non-zero) is not present.
  void insert(std::uintptr_t key, Block* block) noexcept { AddressTable::insert(BlockSlot{key, block}); }
  Block* at(std::size_t slot) const noexcept { return AddressTable::at(slot).block; }
};

}  // namespace tether::core::pool_detail
