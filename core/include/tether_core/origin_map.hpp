// OriginMap: pointer -> where that allocation came from, for allocator hooks
// whose free call does not say which resource the memory belongs to (PyTorch's
// pluggable allocator passes only the pointer, size, device and stream).
//
// Sharded by pointer so threads allocating at once rarely meet on one lock.
// Each shard is an open-addressing table (linear probing, deletion by
// backward shift) under a short spin lock: an insert or take allocates
// nothing except when the shard grows, and takes no mutex. Each entry carries
// a weight (the hook records the size), and the shards keep the live count,
// the live weight and how many entries were ever inserted, so the hook needs
// no counters of its own on the hot path. Generic over the value (the C ABI
// stores an owning handle reference), so the core knows nothing of handles.
// Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace tether::core {

template <class Value>
class OriginMap {
 public:
  struct Totals {
    std::uint64_t live_count = 0, live_weight = 0, inserted = 0;
  };

  // Record `value` (with `weight`) for `ptr` (not null). Returns false (and
  // records nothing) if `ptr` is already recorded: the caller handed out the
  // same address twice. Throws std::bad_alloc only when the shard must grow
  // and cannot (nothing is recorded then).
  bool insert(void* ptr, Value value, std::uint64_t weight) {
    const std::uint64_t h = mix(ptr);
    Shard& s = shards_[static_cast<std::size_t>(h >> 58)];  // top 6 bits: 64 shards
    Lock lock(s.busy);
    if ((s.used + 1) * 2 > s.entries.size()) s.grow();
    const std::size_t mask = s.entries.size() - 1;
    for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
      Entry& e = s.entries[i];
      if (e.key == ptr) return false;
      if (e.key == nullptr) {
        e.value = std::move(value);
        e.weight = weight;
        e.key = ptr;
        ++s.used;
        s.live_weight.store(s.live_weight.load(std::memory_order_relaxed) + weight, std::memory_order_relaxed);
        s.inserted.store(s.inserted.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        s.live_count.store(s.used, std::memory_order_relaxed);
        return true;
      }
    }
  }

  // Remove and return what was recorded for `ptr` (nullopt if nothing was).
  std::optional<Value> take(void* ptr) {
    const std::uint64_t h = mix(ptr);
    Shard& s = shards_[static_cast<std::size_t>(h >> 58)];
    std::optional<Value> out;
    Lock lock(s.busy);
    if (s.used == 0) return out;
    const std::size_t mask = s.entries.size() - 1;
    std::size_t i = static_cast<std::size_t>(h) & mask;
    for (;; i = (i + 1) & mask) {
      if (s.entries[i].key == ptr) break;
      if (s.entries[i].key == nullptr) return out;
    }
    Entry& found = s.entries[i];
    out.emplace(std::move(found.value));
    s.live_weight.store(s.live_weight.load(std::memory_order_relaxed) - found.weight, std::memory_order_relaxed);
    --s.used;
    s.live_count.store(s.used, std::memory_order_relaxed);
    // Backward shift: pull later entries of the probe run into the hole, so
    // lookups never need tombstones.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
      Entry& e = s.entries[j];
      if (e.key == nullptr) break;
      const std::size_t home = static_cast<std::size_t>(mix(e.key)) & mask;
      // e may move to the hole if its home is not in (hole, j] (cyclically).
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        s.entries[hole] = std::move(e);
        hole = j;
      }
    }
    s.entries[hole].key = nullptr;
    s.entries[hole].value = Value();
    return out;
  }

  // Live entries, their weight, and every insert so far (each shard read at
  // its own instant: exact when no thread inserts or takes meanwhile).
  Totals totals() const noexcept {
    Totals t;
    for (const Shard& s : shards_) {
      t.live_count += s.live_count.load(std::memory_order_relaxed);
      t.live_weight += s.live_weight.load(std::memory_order_relaxed);
      t.inserted += s.inserted.load(std::memory_order_relaxed);
    }
    return t;
  }

  std::size_t size() const noexcept { return static_cast<std::size_t>(totals().live_count); }

 private:
  static constexpr std::size_t kShards = 64;

  struct Entry {
    void* key = nullptr;  // nullptr: empty
    std::uint64_t weight = 0;
    Value value{};
  };

  struct alignas(64) Shard {
    std::atomic<bool> busy{false};
    std::size_t used = 0;  // under busy
    std::vector<Entry> entries;  // under busy; size 0 or a power of two
    // Written under busy, read by totals() without it.
    std::atomic<std::uint64_t> live_count{0}, live_weight{0}, inserted{0};

    void grow() {
      std::vector<Entry> bigger(entries.empty() ? 16 : entries.size() * 2);  // may throw: nothing changed
      const std::size_t mask = bigger.size() - 1;
      for (Entry& e : entries) {
        if (e.key == nullptr) continue;
        std::size_t i = static_cast<std::size_t>(mix(e.key)) & mask;
        while (bigger[i].key != nullptr) i = (i + 1) & mask;
        bigger[i] = std::move(e);
      }
      entries.swap(bigger);
    }
  };

  // A spin lock held for a few dozen instructions (longer only while a shard grows).
  class Lock {
   public:
    explicit Lock(std::atomic<bool>& busy) noexcept : busy_(busy) {
      for (unsigned spins = 0; busy_.exchange(true, std::memory_order_acquire); ++spins) {
        while (busy_.load(std::memory_order_relaxed)) {
          if (++spins > 64) std::this_thread::yield();
        }
      }
    }
    ~Lock() { busy_.store(false, std::memory_order_release); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    std::atomic<bool>& busy_;
  };

  static std::uint64_t mix(const void* ptr) noexcept {
    // Allocations are at least 256-byte aligned: drop those bits, then mix.
    // The top 6 bits pick the shard, the low bits the slot in it.
    std::uint64_t x = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr) >> 8);
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
  }

  std::array<Shard, kShards> shards_;
};

}  // namespace tether::core
