// OriginMap: pointer -> where that allocation came from, for allocator hooks
// whose free call does not say which resource the memory belongs to (PyTorch's
// pluggable allocator passes only the pointer, size, device and stream).
//
// Sharded by pointer so threads allocating at once rarely meet on one lock.
// Generic over the value (the C ABI stores an owning handle reference), so the
// core knows nothing of handles. Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace tether::core {

template <class Value>
class OriginMap {
 public:
  // Record `value` for `ptr`. Returns false (and records nothing) if `ptr` is
  // already recorded: the caller handed out the same address twice.
  bool insert(void* ptr, Value value) {
    Shard& s = shard_of(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.map.emplace(ptr, std::move(value)).second;
  }

  // Remove and return what was recorded for `ptr` (nullopt if nothing was).
  std::optional<Value> take(void* ptr) {
    Shard& s = shard_of(ptr);
    std::optional<Value> out;
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.map.find(ptr);
    if (it == s.map.end()) return out;
    out.emplace(std::move(it->second));
    s.map.erase(it);
    return out;
  }

  std::size_t size() {
    std::size_t n = 0;
    for (Shard& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      n += s.map.size();
    }
    return n;
  }

 private:
  static constexpr std::size_t kShards = 64;
  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_map<void*, Value> map;
  };

  Shard& shard_of(void* ptr) {
    // Allocations are at least 256-byte aligned: drop those bits, then mix.
    auto x = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr) >> 8);
    x *= 0x9E3779B97F4A7C15ull;
    return shards_[static_cast<std::size_t>(x >> 58)];  // top 6 bits: 64 shards
  }

  std::array<Shard, kShards> shards_;
};

}  // namespace tether::core
