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

struct Origin {
  HandleRef resource;  // +1 for as long as the allocation is outstanding
  std::size_t size = 0;
  bool device_memory = false;
};

struct Slot {
  HandleRef resource;  // empty: the current resource at each allocation
  std::uint32_t flags = 0;
};

struct Hooks {
  core::OriginMap<Origin> origins;
  std::mutex bind_mutex;
  std::array<Slot, TETHER_TORCH_BOUND_SLOTS> slots;
  std::array<std::atomic<bool>, TETHER_TORCH_BOUND_SLOTS> bound{};
  std::atomic<std::uint64_t> outstanding_count{0}, outstanding_bytes{0}, allocations{0}, failures{0},
      unknown_frees{0};
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

// `bound`: the slot's resource, or empty for the current resource of `device`.
void* allocate(const HandleRef& bound, bool null_on_failure, std::size_t size, int device, void* stream) {
  if (size == 0) return nullptr;
  Hooks& h = hooks();
  void* ptr = nullptr;
  const tether_status_t status = guard("tether_torch_allocate", [&] {
    HandleRef res = bound ? bound : current_resource(device);
    ResourceRef r(res.get());
    const core::Properties& p = r->core->properties();
    check_usable(p, device);  // TETHER_DEVICE_HOST is the host slot, -1
    const auto s = reinterpret_cast<tether_stream_t>(stream);
    void* got = r->core->allocate(size, 0, s);
    bool recorded = false;
    try {
      recorded = h.origins.insert(got, Origin{std::move(res), size, p.device_accessible});
    } catch (...) {
      r->core->deallocate(got, size, 0, s);
      throw;
    }
    if (!recorded)  // the resource handed out an address that is still outstanding: leak, never double-free
      throw core::Error(TETHER_ERROR_INTERNAL, "the resource returned an address that is still allocated");
    ptr = got;
  });
  if (status == TETHER_OK) {
    h.allocations.fetch_add(1, std::memory_order_relaxed);
    h.outstanding_count.fetch_add(1, std::memory_order_relaxed);
    h.outstanding_bytes.fetch_add(size, std::memory_order_relaxed);
    return ptr;
  }
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
  return allocate(slot.resource, (slot.flags & TETHER_TORCH_NULL_ON_FAILURE) != 0, size, device, stream);
}

}  // namespace
}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API void* tether_torch_allocate(size_t size, int device, void* stream) {
  return allocate(HandleRef(), false, size, device, stream);
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
    h.outstanding_count.fetch_sub(1, std::memory_order_relaxed);
    h.outstanding_bytes.fetch_sub(origin->size, std::memory_order_relaxed);
    // After exit began, device memory is left to the dying context (DESIGN 2.7).
    if (origin->device_memory && core::process_is_exiting()) return;
    ResourceRef r(origin->resource.get());
    r->core->deallocate(ptr, origin->size, 0, reinterpret_cast<tether_stream_t>(stream));
  });  // the origin's reference is dropped here, after the free
}

TETHER_API tether_status_t tether_torch_bind(tether_resource_t* resource, uint32_t flags, int* out_slot) {
  return guard("tether_torch_bind", [&] {
    require_out(out_slot, "out_slot");
    *out_slot = -1;
    if ((flags & ~TETHER_TORCH_NULL_ON_FAILURE) != 0)
      core::throw_invalid_argument("unknown flags " + std::to_string(flags) + " (only TETHER_TORCH_NULL_ON_FAILURE)");
    HandleRef res;
    if (resource != nullptr) {
      ResourceRef r(resource);
      res = retained(r);
    }
    Hooks& h = hooks();
    std::lock_guard<std::mutex> lock(h.bind_mutex);
    for (int i = 0; i < TETHER_TORCH_BOUND_SLOTS; ++i) {
      if (!h.bound[i].load(std::memory_order_relaxed)) {
        h.slots[i].resource = std::move(res);
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
    v.outstanding_count = h.outstanding_count.load(std::memory_order_relaxed);
    v.outstanding_bytes = h.outstanding_bytes.load(std::memory_order_relaxed);
    v.allocations = h.allocations.load(std::memory_order_relaxed);
    v.failures = h.failures.load(std::memory_order_relaxed);
    v.unknown_frees = h.unknown_frees.load(std::memory_order_relaxed);
    write_info(out, v, "out");
  });
}

}  // extern "C"
