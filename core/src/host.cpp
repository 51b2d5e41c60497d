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
#include "tether_core/free_check.hpp"

#include "address_table.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>

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

using detail::SpinLock;


constexpr unsigned kShardBits = 6;
constexpr std::size_t kShards = std::size_t{1} << kShardBits;

// One shard: the entries whose hash has these top bits; the next bits pick the
// home slot. Allocations are at least 16-byte aligned: 4 low bits carry nothing.
struct alignas(64) Shard : detail::AddressTable<Entry, 4, kShardBits> {
  SpinLock lock;
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
      std::lock_guard<SpinLock> g(s.lock);
      const std::size_t i = s.find(user);
      if (i == Shard::npos) {
        e.key = 0;
      } else {
        e = s.at(i);
        if (e.size == bytes && e.alignment == alignment && e.owner == owner) s.erase_at(i);
      }
    }
    // The entry is gone only if everything matched; messages are built unlocked.
    if (e.key == 0) throw_not_allocated("host", "this host resource", ptr);
    check_free("host", "this host resource", ptr, Allocated{e.owner, e.size, e.alignment}, owner, bytes, alignment);
    std::free(reinterpret_cast<void*>(user - e.offset));
  }

 private:
  Shard& shard(std::uintptr_t p) noexcept { return shards_[Shard::hash(p) >> (64 - kShardBits)]; }

  static std::string message(const char* what, std::size_t bytes, std::size_t alignment) {
    return std::string("host: ") + what + " " + std::to_string(bytes) + " bytes (alignment " +
           std::to_string(alignment) + ")";
  }

  Shard shards_[kShards];
};

}  // namespace

ResourcePtr make_host_resource() { return std::make_shared<HostResource>(); }

}  // namespace tether::core
