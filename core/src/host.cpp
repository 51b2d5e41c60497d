// HostResource: aligned allocations from the C heap, recorded in a side
// table of live allocations so that deallocate() rejects pointers, sizes,
// alignments and owners it did not hand out without ever reading memory.
//
// Why a table, not a header before the pointer: to check a header the
// resource must read memory at the pointer it was given, and a foreign
// pointer ((void*)4096, an mmap'd page, a numpy array, the page after a
// PROT_NONE page, a block already given back) is memory it has no right to
// read. The table is consulted first; memory is touched only once the table
// says the pointer is this resource's.
//
// Layout of one allocation: malloc(bytes + slack), the returned pointer is
// the first `alignment` boundary in it (no slack when malloc's own alignment
// suffices). The table keeps, per returned pointer: the size and alignment
// asked for, the offset back to what malloc returned, and the owner (a caller
// of allocate(), or the dependent resource that took it with allocate_for()).
//
// Each resource has its own table, so one host resource refuses another's
// pointers (all draw from one C heap, but every layer keeps exact books).
// The table is sharded by pointer hash; each shard is an open-addressing
// hash table (linear probing, backward-shift deletion, at most half full)
// behind a spin lock held for a few loads and stores.
#include "tether_core/host.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>

namespace tether::core {

namespace {

constexpr std::size_t kMallocAlignment = alignof(std::max_align_t);

struct Entry {
  std::uintptr_t key = 0;      // the pointer handed out; 0 = empty slot
  std::uint64_t size = 0;      // bytes requested
  owner_t owner = kCaller;     // who may free it
  std::uint32_t alignment = 0;  // requested (<= kMaxAlignment = 2^30)
  std::uint32_t offset = 0;     // key - what malloc returned (< 2^30)
};

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

class LockGuard {
 public:
  explicit LockGuard(SpinLock& l) noexcept : l_(l) { l_.lock(); }
  ~LockGuard() { l_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  SpinLock& l_;
};

inline std::uint64_t mix(std::uintptr_t p) noexcept {
  return static_cast<std::uint64_t>(p >> 4) * 0x9E3779B97F4A7C15ull;
}

constexpr unsigned kShardBits = 6;
constexpr std::size_t kShards = std::size_t{1} << kShardBits;

// One shard: the entries whose mixed hash has these top bits. The next bits
// of the hash pick the home slot.
class alignas(64) Shard {
 public:
  static constexpr std::size_t npos = SIZE_MAX;
  SpinLock lock;

  // Room for one more entry; throws std::bad_alloc with nothing changed.
  void reserve_one() {
    if ((size_ + 1) * 2 > capacity_) rehash(capacity_ == 0 ? kInitialCapacity : capacity_ * 2);
  }
  // Requires reserve_one(); e.key non-zero and absent.
  void insert(const Entry& e) noexcept {
    std::size_t i = home(e.key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = e;
    ++size_;
  }
  std::size_t find(std::uintptr_t key) const noexcept {
    if (capacity_ == 0 || key == 0) return npos;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return i;
      if (slots_[i].key == 0) return npos;
    }
  }
  const Entry& at(std::size_t i) const noexcept { return slots_[i]; }
  void erase_at(std::size_t i) noexcept {
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
    slots_[i] = Entry{};
    --size_;
  }
  std::size_t size() const noexcept { return size_; }

 private:
  static constexpr std::size_t kInitialCapacity = 64;
  std::size_t home(std::uintptr_t key) const noexcept {
    return static_cast<std::size_t>((mix(key) << kShardBits) >> shift_);
  }
  void rehash(std::size_t capacity) {
    std::unique_ptr<Entry[]> old(new Entry[capacity]);
    old.swap(slots_);
    const std::size_t old_capacity = capacity_;
    capacity_ = capacity;
    mask_ = capacity - 1;
    shift_ = 64u - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].key != 0) insert(old[i]);
  }

  std::unique_ptr<Entry[]> slots_;
  std::size_t capacity_ = 0, mask_ = 0, size_ = 0;
  unsigned shift_ = 64;
};

class HostResource final : public Resource {
 public:
  HostResource() noexcept : Resource(Properties{TETHER_RESOURCE_KIND_HOST, TETHER_DEVICE_HOST, false, true}) {}
  // Allocations still live are left to the C heap (never freed behind their
  // holder's back); the table goes.
  ~HostResource() override = default;

  const char* name() const noexcept override { return "host"; }

  // Every host resource draws from the same C heap: any two compare equal.
  // Frees are not interchangeable: each resource accepts only its own
  // pointers (see the top of this file).
  bool is_equal(const Resource& other) const noexcept override {
    return dynamic_cast<const HostResource*>(&other) != nullptr;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t) override {
    const std::size_t slack = alignment > kMallocAlignment ? alignment - kMallocAlignment : 0;
    // malloc refuses anything above PTRDIFF_MAX; saying so here avoids the
    // overflow in the total and sanitizer complaints about absurd sizes.
    const std::size_t limit = static_cast<std::size_t>(PTRDIFF_MAX) - slack;
    if (bytes > limit) throw OutOfMemory(message("cannot allocate", bytes, alignment));
    void* raw = std::malloc(bytes + slack);
    if (raw == nullptr) throw OutOfMemory(message("out of host memory allocating", bytes, alignment));
    const auto raw_addr = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t user = (raw_addr + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    Entry e;
    e.key = user;
    e.size = bytes;
    e.owner = owner;
    e.alignment = static_cast<std::uint32_t>(alignment);
    e.offset = static_cast<std::uint32_t>(user - raw_addr);
    Shard& s = shard(user);
    s.lock.lock();
    try {
      s.reserve_one();
    } catch (...) {
      s.lock.unlock();
      std::free(raw);
      throw OutOfMemory(message("out of host memory recording", bytes, alignment));
    }
    s.insert(e);
    s.lock.unlock();
    return reinterpret_cast<void*>(user);
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t) override {
    const auto user = reinterpret_cast<std::uintptr_t>(ptr);
    Shard& s = shard(user);
    Entry e;
    {
      LockGuard g(s.lock);
      const std::size_t i = s.find(user);
      if (i == Shard::npos) {
        e.key = 0;
      } else {
        e = s.at(i);
        if (e.size == bytes && e.alignment == alignment && e.owner == owner) s.erase_at(i);
      }
    }
    // The entry is gone only if everything matched; messages are built unlocked.
    if (e.key == 0) throw_invalid_argument(not_ours(ptr));
    if (e.owner != owner) throw_invalid_argument(wrong_owner(ptr, e.owner, owner));
    if (e.size != bytes) {
      throw_invalid_argument("host: size mismatch freeing " + address(ptr) + ": allocated " + std::to_string(e.size) +
                             " bytes, freed with " + std::to_string(bytes));
    }
    if (e.alignment != alignment) {
      throw_invalid_argument("host: alignment mismatch freeing " + address(ptr) + ": allocated with alignment " +
                             std::to_string(e.alignment) + ", freed with " + std::to_string(alignment));
    }
    std::free(reinterpret_cast<void*>(user - e.offset));
  }

 private:
  Shard& shard(std::uintptr_t p) noexcept { return shards_[mix(p) >> (64 - kShardBits)]; }

  static std::string address(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
  }
  static std::string not_ours(const void* p) {
    return "host: pointer " + address(p) + " was not allocated by this host resource (or was already freed)";
  }
  static std::string wrong_owner(const void* p, owner_t held_by, owner_t freed_by) {
    if (freed_by == kCaller)
      return "host: pointer " + address(p) +
             " is held by a resource over this one (a pool's chunk or an adaptor's allocation); "
             "free it into the resource that handed it out";
    if (held_by == kCaller)
      return "host: pointer " + address(p) +
             " was allocated directly from this host resource, not through the resource it was freed into; "
             "free it into the host resource";
    return "host: pointer " + address(p) +
           " was handed out through another resource over this one than the one it was freed into";
  }
  static std::string message(const char* what, std::size_t bytes, std::size_t alignment) {
    return std::string("host: ") + what + " " + std::to_string(bytes) + " bytes (alignment " +
           std::to_string(alignment) + ")";
  }

  Shard shards_[kShards];
};

}  // namespace

ResourcePtr make_host_resource() { return std::make_shared<HostResource>(); }

}  // namespace tether::core
