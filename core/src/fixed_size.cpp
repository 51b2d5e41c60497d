// FixedSizeResource: one block per request, blocks carved from upstream
// chunks of `blocks_to_preallocate` blocks.
//
// Books (all under one mutex: every operation is a few pointer moves):
// the chunks by address (for trim and for the chunk of a block), the blocks
// handed out (address -> requested size and owner, so every free is checked),
// and the free blocks. A host resource keeps one free list. Over a
// stream-ordered upstream the free blocks are split: `settled` ones (never
// used, or freed before the last device synchronisation) go to any stream;
// a block freed on stream S goes to S's list and back to S only. When the
// settled list and growing cannot serve a request, the device is
// synchronised once and every stream's list becomes settled
// (stream_reuse.hpp).
// Upstream allocate/deallocate run with the mutex released.
#include "tether_core/fixed_size.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stream_reuse.hpp"
#include "tether_core/free_check.hpp"

namespace tether::core {

namespace {

constexpr std::size_t kBlockGranule = 256;
constexpr std::size_t kMaxBlockAlignment = std::size_t{1} << 20;

Properties fixed_size_properties(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("fixed_size: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_FIXED_SIZE;
  return p;
}

std::size_t checked_block_size(std::size_t block_size) {
  if (block_size == 0) throw_invalid_argument("fixed_size: block_size must be greater than 0");
  if (block_size > (std::size_t{1} << 40))
    throw_invalid_argument("fixed_size: block_size " + std::to_string(block_size) + " is larger than 1 TiB");
  return (block_size + kBlockGranule - 1) & ~(kBlockGranule - 1);
}

class FixedSizeResource final : public Resource {
 public:
  FixedSizeResource(ResourcePtr upstream, const FixedSizeOptions& o)
      : Resource(fixed_size_properties(upstream)),
        upstream_(std::move(upstream)),
        block_size_(checked_block_size(o.block_size)),
        block_alignment_(std::min(block_size_ & (~block_size_ + 1), kMaxBlockAlignment)),
        batch_(o.blocks_to_preallocate == 0 ? 1 : o.blocks_to_preallocate),
        order_(upstream_->stream_order()) {
    if (batch_ > (std::size_t{1} << 40) / block_size_)
      throw_invalid_argument("fixed_size: blocks_to_preallocate " + std::to_string(batch_) + " of " +
                             std::to_string(block_size_) + " bytes is more than 1 TiB");
    std::unique_lock<std::mutex> lock(mutex_);
    grow(lock, batch_);
  }

  ~FixedSizeResource() override {
    // Callers' blocks still outstanding are the C layer's orphans (it keeps
    // this object alive for them); what reaches here is all free.
    try {
      if (unsettled_ != 0) stream_reuse::settle(order_);
      for (const auto& [base, c] : chunks_)
        upstream_->deallocate_for(id(), reinterpret_cast<void*>(base), c.bytes, block_alignment_, 0);
    } catch (...) {  // an upstream failing at teardown: leak rather than terminate
    }
  }

  const char* name() const noexcept override { return "fixed_size"; }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  StreamOrder* stream_order() noexcept override { return order_; }

  void trim() override {
    std::vector<std::pair<std::uintptr_t, std::size_t>> give_back;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      settle_all();
      for (auto it = chunks_.begin(); it != chunks_.end();) {
        if (it->second.free == it->second.blocks) {
          const std::uintptr_t lo = it->first, hi = it->first + it->second.bytes;
          settled_.erase(std::remove_if(settled_.begin(), settled_.end(),
                                        [&](std::uintptr_t b) { return b >= lo && b < hi; }),
                         settled_.end());
          give_back.emplace_back(it->first, it->second.bytes);
          it = chunks_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const auto& [base, bytes] : give_back)
      upstream_->deallocate_for(id(), reinterpret_cast<void*>(base), bytes, block_alignment_, 0);
    upstream_->trim();
  }

  FixedSizeInfo info() const {
    std::lock_guard<std::mutex> lock(mutex_);
    FixedSizeInfo i;
    i.block_size = block_size_;
    i.block_alignment = block_alignment_;
    i.chunk_count = chunks_.size();
    for (const auto& [base, c] : chunks_) {
      i.total_blocks += c.blocks;
      i.free_blocks += c.free;
    }
    return i;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    if (bytes > block_size_)
      throw OutOfMemory("fixed_size: cannot allocate " + std::to_string(bytes) +
                        " bytes: larger than the block_size of " + std::to_string(block_size_) + " bytes");
    if (alignment > block_alignment_)
      throw_invalid_argument("fixed_size: alignment " + std::to_string(alignment) +
                             " is larger than the blocks' alignment of " + std::to_string(block_alignment_));
    std::unique_lock<std::mutex> lock(mutex_);
    if (order_ == nullptr) stream = 0;
    std::uintptr_t b = take(stream);
    if (b == 0) {
      try {
        grow(lock, batch_);
      } catch (const OutOfMemory&) {
        // A smaller batch, then the memory other streams freed (after one device synchronisation).
        try {
          grow(lock, 1);
        } catch (const OutOfMemory&) {
          settle_all();
        }
      }
      b = take(stream);
      if (b == 0)
        throw OutOfMemory("fixed_size: no free block of " + std::to_string(block_size_) +
                          " bytes and the upstream cannot provide more");
    }
    live_.emplace(b, Allocated{owner, bytes, alignment});
    chunk_of(b).free -= 1;
    return reinterpret_cast<void*>(b);
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    const auto b = reinterpret_cast<std::uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(b);
    if (it == live_.end()) throw_not_allocated("fixed_size", "this fixed-size resource", ptr);
    check_free("fixed_size", "this fixed-size resource", ptr, it->second, owner, bytes, alignment);
    live_.erase(it);
    chunk_of(b).free += 1;
    if (order_ == nullptr) {
      settled_.push_back(b);
    } else {
      stream_free_[stream].push_back(b);
      ++unsettled_;
    }
  }

 private:
  struct Chunk {
    std::size_t bytes;
    std::size_t blocks;
    std::size_t free;
  };

  // A free block for `stream` (0 if none): its own frees first, then settled ones.
  std::uintptr_t take(stream_t stream) {
    if (order_ != nullptr) {
      auto it = stream_free_.find(stream);
      if (it != stream_free_.end() && !it->second.empty()) {
        const std::uintptr_t b = it->second.back();
        it->second.pop_back();
        --unsettled_;
        return b;
      }
    }
    if (settled_.empty()) return 0;
    const std::uintptr_t b = settled_.back();
    settled_.pop_back();
    return b;
  }

  // Make every stream's free blocks available to all streams.
  void settle_all() {
    if (unsettled_ == 0) return;  // (always so over a host upstream)
    stream_reuse::settle(order_);
    for (auto& [s, blocks] : stream_free_) settled_.insert(settled_.end(), blocks.begin(), blocks.end());
    stream_free_.clear();
    unsettled_ = 0;
  }

  // Take a chunk of `blocks` blocks from upstream (the lock is released meanwhile).
  void grow(std::unique_lock<std::mutex>& lock, std::size_t blocks) {
    const std::size_t bytes = blocks * block_size_;
    lock.unlock();
    void* p = nullptr;
    try {
      p = upstream_->allocate_for(id(), bytes, block_alignment_, 0);
    } catch (...) {
      lock.lock();
      throw;
    }
    lock.lock();
    const auto base = reinterpret_cast<std::uintptr_t>(p);
    chunks_.emplace(base, Chunk{bytes, blocks, blocks});
    settled_.reserve(settled_.size() + blocks);
    for (std::size_t i = blocks; i-- > 0;) settled_.push_back(base + i * block_size_);  // lowest address first out
  }

  Chunk& chunk_of(std::uintptr_t b) {
    auto it = chunks_.upper_bound(b);
    --it;  // b is a block of a live chunk
    return it->second;
  }

  const ResourcePtr upstream_;
  const std::size_t block_size_;
  const std::size_t block_alignment_;
  const std::size_t batch_;
  StreamOrder* const order_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Chunk> chunks_;
  std::unordered_map<std::uintptr_t, Allocated> live_;
  std::vector<std::uintptr_t> settled_;
  std::unordered_map<stream_t, std::vector<std::uintptr_t>> stream_free_;
  std::size_t unsettled_ = 0;
};

}  // namespace

ResourcePtr make_fixed_size_resource(ResourcePtr upstream, const FixedSizeOptions& options) {
  return std::make_shared<FixedSizeResource>(std::move(upstream), options);
}

FixedSizeInfo fixed_size_info(const Resource& r) {
  auto* f = dynamic_cast<const FixedSizeResource*>(&r);
  if (f == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a fixed_size resource");
  return f->info();
}

}  // namespace tether::core
