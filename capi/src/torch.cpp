// The entry points of PyTorch's pluggable allocator (tether/torch.h): allocate
// from a bound or the current resource, remember each allocation's origin,
// free into it. The contract - origins, slots, how failures are reported - is
// in the header.
#include <array>
#include <atomic>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "internal.hpp"
#include "tether_core/origin_map.hpp"
#include "tether_core/process.hpp"

namespace tether::capi {
namespace {

// Where an allocation came from. Bound slots keep their resource for the rest
// of the process, so theirs need no reference per allocation: `core` alone
// (alive as long as the slot). Allocations from the current resource hold a
// handle reference in `resource` for as long as they are outstanding.
struct Origin {
  HandleRef resource;            // empty for a bound slot's allocation
  core::Resource* core = nullptr;  // set for a bound slot's allocation
  std::size_t size = 0;
  bool device_memory = false;
};

struct Slot {
  HandleRef resource;  // empty: the current resource at each allocation
  core::ResourcePtr core;  // the resource's core object, held with it (empty with it)
  std::uint32_t flags = 0;
};

// allocations, outstanding_count and outstanding_bytes are the origin map's
// totals (kept under its shard locks), so the hot path moves no shared counter.
struct Hooks {
  core::OriginMap<Origin> origins;
  std::mutex bind_mutex;
  std::array<Slot, TETHER_TORCH_BOUND_SLOTS> slots;
  std::array<std::atomic<bool>, TETHER_TORCH_BOUND_SLOTS> bound{};
  std::atomic<std::uint64_t> failures{0}, unknown_frees{0};
};

Hooks& hooks() {
  // Never destroyed: PyTorch frees tensors from its own static destructors,
  // after ours would have run.
  static Hooks* h = new Hooks;
  return *h;
}

// What leaves libtether when PyTorch's allocation fails (see tether/torch.h).
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

[[noreturn]] void throw_failure(tether_status_t status) {
  std::string message = tether_last_error_message();
  if (status == TETHER_ERROR_OUT_OF_MEMORY) throw OutOfMemory("tether: out of memory: " + message);
  throw std::runtime_error(std::move(message));
}

// Record `got` (from `core`, through `origin`) or give it back and throw.
void record(Hooks& h, void* got, Origin origin, core::Resource& core, std::size_t size, tether_stream_t s) {
  bool recorded = false;
  try {
    recorded = h.origins.insert(got, std::move(origin), size);
  } catch (...) {
    core.deallocate(got, size, 0, s);
    throw;
  }
  if (!recorded)  // the resource handed out an address that is still outstanding: leak, never double-free
    throw core::Error(TETHER_ERROR_INTERNAL, "the resource returned an address that is still allocated");
}

// Allocate from `slot`'s resource, or (no resource bound) from the current resource of `device`.
void* allocate(const Slot* slot, bool null_on_failure, std::size_t size, int device, void* stream) {
  if (size == 0) return nullptr;
  Hooks& h = hooks();
  void* ptr = nullptr;
  const tether_status_t status = guard("tether_torch_allocate", [&] {
    const auto s = reinterpret_cast<tether_stream_t>(stream);
    if (slot != nullptr && slot->core) {
      // A bound resource: the slot keeps it alive, so no handle is borrowed or counted.
      core::Resource& r = *slot->core;
      const core::Properties& p = r.properties();
      check_usable(p, device);  // TETHER_DEVICE_HOST is the host slot, -1
      void* got = r.allocate(size, 0, s);
      record(h, got, Origin{HandleRef(), &r, size, p.device_accessible}, r, size, s);
      ptr = got;
      return;
    }
    HandleRef res = current_resource(device);
    ResourceRef r(res.get());
    const core::Properties& p = r->core->properties();
    check_usable(p, device);
    void* got = r->core->allocate(size, 0, s);
    record(h, got, Origin{std::move(res), nullptr, size, p.device_accessible}, *r->core, size, s);
    ptr = got;
  });
  if (status == TETHER_OK) return ptr;
  h.failures.fetch_add(1, std::memory_order_relaxed);
  if (null_on_failure) return nullptr;
  throw_failure(status);
}

template <int N>
void* allocate_bound(std::size_t size, int device, void* stream) {
  Hooks& h = hooks();
  if (!h.bound[N].load(std::memory_order_acquire)) {
    set_error(TETHER_ERROR_INVALID_ARGUMENT,
              "tether_torch_allocate_" + std::to_string(N) + ": this slot was never bound (tether_torch_bind)");
    h.failures.fetch_add(1, std::memory_order_relaxed);
    throw std::runtime_error(tether_last_error_message());
  }
  const Slot& slot = h.slots[N];
  return allocate(&slot, (slot.flags & TETHER_TORCH_NULL_ON_FAILURE) != 0, size, device, stream);
}

}  // namespace
}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API void* tether_torch_allocate(size_t size, int device, void* stream) {
  return allocate(nullptr, false, size, device, stream);
}

TETHER_API void tether_torch_deallocate(void* ptr, size_t size, int device, void* stream) {
  (void)size;
  (void)device;
  if (ptr == nullptr) return;
  Hooks& h = hooks();
  guard("tether_torch_deallocate", [&] {
    auto origin = h.origins.take(ptr);
    if (!origin) {
      h.unknown_frees.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // After exit began, device memory is left to the dying context (DESIGN 2.7).
    if (origin->device_memory && core::process_is_exiting()) return;
    const auto s = reinterpret_cast<tether_stream_t>(stream);
    if (origin->core != nullptr) {  // a bound slot's resource, alive for the rest of the process
      origin->core->deallocate(ptr, origin->size, 0, s);
      return;
    }
    ResourceRef r(origin->resource.get());
    r->core->deallocate(ptr, origin->size, 0, s);
  });  // the origin's reference (if any) is dropped here, after the free
}

TETHER_API tether_status_t tether_torch_bind(tether_resource_t* resource, uint32_t flags, int* out_slot) {
  return guard("tether_torch_bind", [&] {
    require_out(out_slot, "out_slot");
    *out_slot = -1;
    if ((flags & ~TETHER_TORCH_NULL_ON_FAILURE) != 0)
      core::throw_invalid_argument("unknown flags " + std::to_string(flags) + " (only TETHER_TORCH_NULL_ON_FAILURE)");
    HandleRef res;
    core::ResourcePtr core_object;
    if (resource != nullptr) {
      ResourceRef r(resource);
      res = retained(r);
      core_object = r->core;
    }
    Hooks& h = hooks();
    std::lock_guard<std::mutex> lock(h.bind_mutex);
    for (int i = 0; i < TETHER_TORCH_BOUND_SLOTS; ++i) {
      if (!h.bound[i].load(std::memory_order_relaxed)) {
        h.slots[i].resource = std::move(res);
        h.slots[i].core = std::move(core_object);
        h.slots[i].flags = flags;
        h.bound[i].store(true, std::memory_order_release);
        *out_slot = i;
        return;
      }
      if (h.slots[i].resource.get() == resource && h.slots[i].flags == flags) {
        *out_slot = i;
        return;
      }
    }
    throw core::Error(TETHER_ERROR_OUT_OF_MEMORY,
                      "all " + std::to_string(TETHER_TORCH_BOUND_SLOTS) +
                          " bound PyTorch allocators are taken (each distinct resource and flags takes one for the "
                          "rest of the process; use resource=None with tether.using() for per-scope resources)");
  });
}

#define TETHER_TORCH_SLOT(N)                                                              \
  TETHER_API void* tether_torch_allocate_##N(size_t size, int device, void* stream) {     \
    return allocate_bound<N>(size, device, stream);                                        \
  }
TETHER_TORCH_SLOT(0)
TETHER_TORCH_SLOT(1)
TETHER_TORCH_SLOT(2)
TETHER_TORCH_SLOT(3)
TETHER_TORCH_SLOT(4)
TETHER_TORCH_SLOT(5)
TETHER_TORCH_SLOT(6)
TETHER_TORCH_SLOT(7)
#undef TETHER_TORCH_SLOT
static_assert(TETHER_TORCH_BOUND_SLOTS == 8, "one TETHER_TORCH_SLOT line per bound slot");

TETHER_API tether_status_t tether_torch_get_stats(tether_torch_stats_t* out) {
  return guard("tether_torch_get_stats", [&] {
    Hooks& h = hooks();
    tether_torch_stats_t v{};
    v.struct_size = sizeof v;
    const auto totals = h.origins.totals();
    v.outstanding_count = totals.live_count;
    v.outstanding_bytes = totals.live_weight;
    v.allocations = totals.inserted;
    v.failures = h.failures.load(std::memory_order_relaxed);
    v.unknown_frees = h.unknown_frees.load(std::memory_order_relaxed);
    write_info(out, v, "out");
  });
}

}  // extern "C"
