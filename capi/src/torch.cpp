// The entry points of PyTorch's pluggable allocator (tether/torch.h): allocate
// from a bound or the current resource, remember each allocation's origin,
// free into it. The contract - origins, slots, how failures are reported - is
// in the header.
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <algorithm>
#include <cstddef>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "internal.hpp"
#include "tether_core/cuda.hpp"
#include "tether_core/host.hpp"
#include "tether_core/origin_map.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/process.hpp"

namespace tether::capi {
namespace {

// Per-device figures (tether_torch_device_stats_t): CUDA devices 0 ... 63 and the host.
constexpr int kMaxDevices = 64;
constexpr int kHostIndex = kMaxDevices;
constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};

int device_index(int device) noexcept {
  if (device == TETHER_DEVICE_HOST) return kHostIndex;
  return device >= 0 && device < kMaxDevices ? device : -1;
}

struct DeviceCounters {
  std::atomic<std::uint64_t> bytes{0}, peak_bytes{0}, count{0}, peak_count{0};
  std::atomic<std::uint64_t> graph_bytes{0};  // of bytes, allocated from graph pools
  std::atomic<std::uint64_t> graph_held{0};   // what the device's graph pools hold from upstream
  std::atomic<std::uint64_t> peak_reserved{0};
  std::atomic<std::uint64_t> ooms{0}, retries{0}, graph_pools{0};
  std::atomic<std::uint64_t> limit{kNoLimit};
  std::uint64_t reserved() const noexcept {
    const std::uint64_t b = bytes.load(std::memory_order_relaxed), g = graph_bytes.load(std::memory_order_relaxed);
    return (b > g ? b - g : 0) + graph_held.load(std::memory_order_relaxed);
  }
};

void raise_max(std::atomic<std::uint64_t>& m, std::uint64_t v) noexcept {
  std::uint64_t cur = m.load(std::memory_order_relaxed);
  while (cur < v && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// The other streams an allocation was used on (record_stream): a few inline,
// more on the heap (rare).
class StreamSet {
 public:
  // False (nothing changes) if `s` is in the set already. May throw bad_alloc.
  bool add(tether_stream_t s) {
    for (std::size_t i = 0; i < size(); ++i)
      if (data()[i] == s) return false;
    if (!more_ && n_ < inline_.size()) {
      inline_[n_++] = s;
      return true;
    }
    if (!more_) more_ = std::make_unique<std::vector<tether_stream_t>>(inline_.begin(), inline_.begin() + n_);
    more_->push_back(s);
    return true;
  }
  std::size_t size() const noexcept { return more_ ? more_->size() : n_; }
  const tether_stream_t* data() const noexcept { return more_ ? more_->data() : inline_.data(); }

 private:
  std::array<tether_stream_t, 3> inline_{};
  std::uint8_t n_ = 0;
  std::unique_ptr<std::vector<tether_stream_t>> more_;
};

// What a CUDA graph pool takes memory from: its device's plain memory (cuMemAlloc,
// streams ignored), with the thread's capture mode relaxed so that the pool can
// grow inside a capture. It offers no stream order, so the pool over it reuses
// memory in free order whatever the stream (as PyTorch's private pools) and never
// records or waits on an event, which a capture would not allow.
class GraphUpstream final : public core::Resource {
 public:
  GraphUpstream(core::ResourcePtr inner, bool device) : Resource(inner->properties()), inner_(std::move(inner)), device_(device) {}
  const char* name() const noexcept override { return "torch_graph_upstream"; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, core::stream_t) override {
    if (!device_) return inner_->allocate_for(id(), bytes, alignment, 0);
    core::cuda::RelaxedCaptureScope relaxed;
    return inner_->allocate_for(id(), bytes, alignment, 0);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, core::stream_t) override {
    if (!device_) return inner_->deallocate_for(id(), ptr, bytes, alignment, 0);
    core::cuda::RelaxedCaptureScope relaxed;
    inner_->deallocate_for(id(), ptr, bytes, alignment, 0);
  }

 private:
  core::ResourcePtr inner_;
  bool device_;
};

// A CUDA graph pool (one per device and mempool id): alive while a graph uses it
// or an allocation from it is outstanding (each holds a reference).
struct GraphPool {
  core::ResourcePtr pool;
  DeviceCounters* counters = nullptr;
  std::mutex held_mutex;
  std::uint64_t held = 0;  // the pool's size as last added to counters->graph_held
  void update_held() {
    const std::uint64_t now = core::pool_info(*pool).pool_size;
    std::lock_guard<std::mutex> lock(held_mutex);
    if (now >= held) counters->graph_held.fetch_add(now - held, std::memory_order_relaxed);
    else counters->graph_held.fetch_sub(held - now, std::memory_order_relaxed);
    held = now;
  }
  ~GraphPool() {
    counters->graph_held.fetch_sub(held, std::memory_order_relaxed);
    pool.reset();
  }
};

// Where an allocation came from. Bound slots keep their resource for the rest
// of the process, so theirs need no reference per allocation: `core` alone
// (alive as long as the slot). Allocations from the current resource hold a
// handle reference in `resource` for as long as they are outstanding; those
// from a graph pool hold the pool.
struct Origin {
  HandleRef resource;            // empty for a bound slot's or a graph pool's allocation
  core::Resource* core = nullptr;  // set for a bound slot's allocation
  std::shared_ptr<GraphPool> graph;  // set for a graph pool's allocation
  std::size_t size = 0;
  tether_stream_t stream = 0;    // the allocation's stream
  int index = -1;                // device_index() of the allocation's device
  bool device_memory = false;
  StreamSet uses;                // other streams it was used on (record_stream)
};

struct Slot {
  HandleRef resource;  // empty: the current resource at each allocation
  core::ResourcePtr core;  // the resource's core object, held with it (empty with it)
  std::uint32_t flags = 0;
};

// Allocations of one capture go to `pool` while `filter` says yes.
struct Route {
  int device = 0;
  std::uint64_t first = 0, second = 0;
  std::function<bool(void*)> torch_filter;  // PyTorch's, copied (libstdc++ layout)
  tether_torch_stream_filter_t c_filter = nullptr;
  void* user = nullptr;
  std::shared_ptr<GraphPool> pool;
  bool accepts(void* stream) const {
    return c_filter != nullptr ? c_filter(stream, user) != 0 : torch_filter(stream);
  }
};

struct PoolEntry {
  std::shared_ptr<GraphPool> pool;
  int uses = 0;  // begins not yet released
};

// allocations, outstanding_count and outstanding_bytes are the origin map's
// totals (kept under its shard locks), so the hot path moves no shared counter
// beyond its device's two.
struct Hooks {
  core::OriginMap<Origin> origins;
  std::mutex bind_mutex;
  std::array<Slot, TETHER_TORCH_BOUND_SLOTS> slots;
  std::array<std::atomic<bool>, TETHER_TORCH_BOUND_SLOTS> bound{};
  std::atomic<std::uint64_t> failures{0}, unknown_frees{0}, unknown_records{0}, recorded_streams{0};
  // record_stream takes an entry out of the origin map and puts it back
  // (under record_mutex); `reinserted` keeps those out of `allocations`.
  std::mutex record_mutex;
  std::atomic<std::uint64_t> reinserted{0};
  std::array<DeviceCounters, kMaxDevices + 1> devices;
  // CUDA graph pools.
  std::shared_mutex graph_mutex;
  std::atomic<int> active_routes{0};
  std::vector<Route> routes;                                            // under graph_mutex
  std::map<std::tuple<int, std::uint64_t, std::uint64_t>, PoolEntry> graph_pools;  // under graph_mutex
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

// tether_torch_empty_cache: trim what PyTorch's memory comes from. Never throws.
// As PyTorch's emptyCache waits for the events of blocks freed after
// record_stream, the frees waiting for their streams are finished first.
void trim_all(Hooks& h) noexcept {
  core::finish_all_deferred_frees(true);
  for (int i = 0; i < TETHER_TORCH_BOUND_SLOTS; ++i) {
    if (!h.bound[i].load(std::memory_order_acquire) || !h.slots[i].core) continue;
    try {
      h.slots[i].core->trim();
    } catch (...) {  // trimming is best effort
    }
  }
  int devices = 0;
  try {
    devices = core::cuda::device_count();
  } catch (...) {  // no driver or device: the host slot only
  }
  for (int d = -1; d < devices; ++d) {
    try {
      HandleRef res = current_resource(d);
      ResourceRef r(res.get());
      r->core->trim();
    } catch (...) {
    }
  }
}

bool is_out_of_memory(const core::Error& e) noexcept { return e.status() == TETHER_ERROR_OUT_OF_MEMORY; }

// allocate() from `r`, retried once after trim_all() when out of memory.
void* allocate_retrying(Hooks& h, core::Resource& r, std::size_t size, tether_stream_t s, DeviceCounters* c) {
  try {
    return r.allocate(size, 0, s);
  } catch (const core::Error& e) {
    if (!is_out_of_memory(e)) throw;
  }
  if (c != nullptr) c->retries.fetch_add(1, std::memory_order_relaxed);
  trim_all(h);
  return r.allocate(size, 0, s);
}

// The graph pool an allocation on (device, stream) goes to, if a capture's filter selects it.
std::shared_ptr<GraphPool> routed_pool(Hooks& h, int device, void* stream) {
  std::shared_lock<std::shared_mutex> lock(h.graph_mutex);
  for (const Route& r : h.routes)
    if (r.device == device && r.accepts(stream)) return r.pool;
  return nullptr;
}

// Allocate from `slot`'s resource, or (no resource bound) from the current resource of `device`.
void* allocate(const Slot* slot, bool null_on_failure, std::size_t size, int device, void* stream) {
  if (size == 0) return nullptr;
  Hooks& h = hooks();
  const int index = device_index(device);
  DeviceCounters* c = index >= 0 ? &h.devices[index] : nullptr;
  void* ptr = nullptr;
  bool counted = false;  // size is in c->bytes
  bool graph = false;
  const tether_status_t status = guard("tether_torch_allocate", [&] {
    const auto s = reinterpret_cast<tether_stream_t>(stream);
    if (c != nullptr) {  // the memory-fraction limit (PyTorch's set_per_process_memory_fraction)
      const std::uint64_t before = c->bytes.fetch_add(size, std::memory_order_relaxed);
      counted = true;
      const std::uint64_t limit = c->limit.load(std::memory_order_relaxed);
      if (limit != kNoLimit && before + size > limit)
        throw core::OutOfMemory("allocating " + std::to_string(size) + " bytes would take PyTorch's memory on device " +
                                std::to_string(device) + " to " + std::to_string(before + size) +
                                " bytes, beyond the per-process memory fraction's limit of " + std::to_string(limit) +
                                " bytes (torch.cuda.set_per_process_memory_fraction)");
    }
    if (h.active_routes.load(std::memory_order_acquire) > 0) {
      if (std::shared_ptr<GraphPool> gp = routed_pool(h, device, stream)) {
        core::Resource& r = *gp->pool;
        void* got = r.allocate(size, 0, s);
        gp->update_held();
        Origin o{HandleRef(), nullptr, gp, size, s, index, device != TETHER_DEVICE_HOST, {}};
        record(h, got, std::move(o), r, size, s);
        graph = true;
        ptr = got;
        return;
      }
    }
    if (slot != nullptr && slot->core) {
      // A bound resource: the slot keeps it alive, so no handle is borrowed or counted.
      core::Resource& r = *slot->core;
      const core::Properties& p = r.properties();
      check_usable(p, device);  // TETHER_DEVICE_HOST is the host slot, -1
      void* got = allocate_retrying(h, r, size, s, c);
      record(h, got, Origin{HandleRef(), &r, nullptr, size, s, index, p.device_accessible, {}}, r, size, s);
      ptr = got;
      return;
    }
    HandleRef res = current_resource(device);
    ResourceRef r(res.get());
    const core::Properties& p = r->core->properties();
    check_usable(p, device);
    void* got = allocate_retrying(h, *r->core, size, s, c);
    record(h, got, Origin{std::move(res), nullptr, nullptr, size, s, index, p.device_accessible, {}}, *r->core, size, s);
    ptr = got;
  });
  if (status == TETHER_OK) {
    if (c != nullptr) {
      if (graph) c->graph_bytes.fetch_add(size, std::memory_order_relaxed);
      raise_max(c->peak_bytes, c->bytes.load(std::memory_order_relaxed));
      raise_max(c->peak_count, c->count.fetch_add(1, std::memory_order_relaxed) + 1);
      raise_max(c->peak_reserved, c->reserved());
    }
    return ptr;
  }
  if (counted) c->bytes.fetch_sub(size, std::memory_order_relaxed);
  if (c != nullptr && status == TETHER_ERROR_OUT_OF_MEMORY) c->ooms.fetch_add(1, std::memory_order_relaxed);
  h.failures.fetch_add(1, std::memory_order_relaxed);
  if (null_on_failure) return nullptr;
  throw_failure(status);
}

// tether_torch_begin_allocate_to_pool*: route the allocations `route` selects to
// the pool of (device, id), made on first use.
void begin_route(Hooks& h, int device, tether_torch_mempool_id_t id, Route route) {
  const int index = device_index(device);
  if (index < 0) core::throw_invalid_argument("device " + std::to_string(device) + " is neither a CUDA device below 64 nor TETHER_DEVICE_HOST");
  const bool host = device == TETHER_DEVICE_HOST;
  if (!host) core::cuda::check_device(device);
  std::unique_lock<std::shared_mutex> lock(h.graph_mutex);
  h.routes.reserve(h.routes.size() + 1);  // so that nothing below fails after the pool is made
  PoolEntry& entry = h.graph_pools[std::make_tuple(device, id.first, id.second)];
  if (!entry.pool) {
    try {
      core::ResourcePtr inner = host ? core::make_host_resource() : core::cuda::make_cuda_resource(device);
      auto gp = std::make_shared<GraphPool>();
      gp->counters = &h.devices[index];
      gp->pool = core::make_pool_resource(std::make_shared<GraphUpstream>(std::move(inner), !host), core::PoolOptions{});
      entry.pool = std::move(gp);
      h.devices[index].graph_pools.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      h.graph_pools.erase(std::make_tuple(device, id.first, id.second));
      throw;
    }
  }
  route.device = device;
  route.first = id.first;
  route.second = id.second;
  route.pool = entry.pool;
  h.routes.push_back(std::move(route));
  ++entry.uses;
  h.active_routes.fetch_add(1, std::memory_order_release);
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

// tether_torch_stats_t gained unknown_records and recorded_streams after its first release.
template <>
struct first_published_size<tether_torch_stats_t> {
  static constexpr std::size_t value = TETHER_TORCH_STATS_FIRST_SIZE;
};
static_assert(TETHER_TORCH_STATS_FIRST_SIZE == offsetof(tether_torch_stats_t, unknown_records),
              "TETHER_TORCH_STATS_FIRST_SIZE is the layout before unknown_records");

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
    if (origin->index >= 0) {
      DeviceCounters& c = h.devices[origin->index];
      c.bytes.fetch_sub(origin->size, std::memory_order_relaxed);
      c.count.fetch_sub(1, std::memory_order_relaxed);
      if (origin->graph) c.graph_bytes.fetch_sub(origin->size, std::memory_order_relaxed);
    }
    // After exit began, device memory is left to the dying context (DESIGN 2.7).
    if (origin->device_memory && core::process_is_exiting()) return;
    const auto s = reinterpret_cast<tether_stream_t>(stream);
    auto free_into = [&](core::Resource& r) {
      if (origin->uses.size() == 0) r.deallocate(ptr, origin->size, 0, s);
      else r.deallocate_after(ptr, origin->size, 0, s, origin->uses.data(), origin->uses.size());
    };
    // Each alive: held by the origin (graph pool, handle) or by its slot (bound core).
    if (origin->graph) return free_into(*origin->graph->pool);
    if (origin->core != nullptr) return free_into(*origin->core);
    ResourceRef r(origin->resource.get());
    free_into(*r->core);
  });  // the origin's reference (if any) is dropped here, after the free
}

TETHER_API void tether_torch_record_stream(void* ptr, void* stream) {
  Hooks& h = hooks();
  guard("tether_torch_record_stream", [&] {
    const auto s = reinterpret_cast<tether_stream_t>(stream);
    std::optional<Origin> origin;
    std::lock_guard<std::mutex> lock(h.record_mutex);
    if (ptr != nullptr) origin = h.origins.take(ptr);
    if (!origin) {
      h.unknown_records.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    bool added = false;
    try {
      added = s != origin->stream && origin->uses.add(s);
    } catch (...) {  // out of host memory: put the entry back unchanged, then report
      const std::size_t n = origin->size;
      h.origins.insert(ptr, std::move(*origin), n);
      h.reinserted.fetch_add(1, std::memory_order_relaxed);
      throw;
    }
    // Back into the slot it just left, so the insert never grows the shard (never throws).
    const std::size_t n = origin->size;
    h.origins.insert(ptr, std::move(*origin), n);
    h.reinserted.fetch_add(1, std::memory_order_relaxed);
    if (added) h.recorded_streams.fetch_add(1, std::memory_order_relaxed);
  });
}

TETHER_API void tether_torch_empty_cache(void) {
  guard("tether_torch_empty_cache", [] { trim_all(hooks()); });
}

TETHER_API void tether_torch_set_memory_fraction(double fraction, int device) {
  guard("tether_torch_set_memory_fraction", [&] {
    if (!(fraction >= 0.0 && fraction <= 1.0))
      core::throw_invalid_argument("fraction " + std::to_string(fraction) + " is not in [0, 1]");
    const int index = device_index(device);
    if (index < 0)
      core::throw_invalid_argument("device " + std::to_string(device) +
                                   " is neither a CUDA device below 64 nor TETHER_DEVICE_HOST");
    std::uint64_t total = 0;
    if (device == TETHER_DEVICE_HOST) {
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
      if (pages <= 0 || page <= 0) throw core::Error(TETHER_ERROR_NOT_SUPPORTED, "the host's memory size is unknown");
      total = std::uint64_t(pages) * std::uint64_t(page);
    } else {
      std::size_t free_bytes = 0, total_bytes = 0;
      core::cuda::memory_info(device, &free_bytes, &total_bytes);
      total = total_bytes;
    }
    hooks().devices[index].limit.store(static_cast<std::uint64_t>(std::floor(fraction * double(total))),
                                       std::memory_order_relaxed);
  });
}

TETHER_API void tether_torch_begin_allocate_to_pool(int device, tether_torch_mempool_id_t id, void* filter) {
#if defined(__GLIBCXX__)
  // PyTorch passes a std::function<bool(cudaStream_t)> by value: the C++ ABI
  // hands over its address. Its copy calls PyTorch's own manager and invoker.
  const tether_status_t status = guard("tether_torch_begin_allocate_to_pool", [&] {
    if (filter == nullptr) core::throw_invalid_argument("filter must not be NULL");
    Route route;
    route.torch_filter = *static_cast<const std::function<bool(void*)>*>(filter);
    if (!route.torch_filter) core::throw_invalid_argument("filter is an empty std::function");
    begin_route(hooks(), device, id, std::move(route));
  });
  if (status != TETHER_OK) throw std::runtime_error(tether_last_error_message());
#else
  (void)device;
  (void)id;
  (void)filter;
  set_error(TETHER_ERROR_NOT_SUPPORTED,
            "tether_torch_begin_allocate_to_pool: this libtether was not built with libstdc++, so it cannot call "
            "PyTorch's std::function filter; CUDA graph capture with tether's allocator is not supported by this build");
  throw std::runtime_error(tether_last_error_message());
#endif
}

TETHER_API tether_status_t tether_torch_begin_allocate_to_pool_filter(int device, tether_torch_mempool_id_t id,
                                                                      tether_torch_stream_filter_t filter,
                                                                      void* user) {
  return guard("tether_torch_begin_allocate_to_pool_filter", [&] {
    if (filter == nullptr) core::throw_invalid_argument("filter must not be NULL");
    Route route;
    route.c_filter = filter;
    route.user = user;
    begin_route(hooks(), device, id, std::move(route));
  });
}

TETHER_API void tether_torch_end_allocate_to_pool(int device, tether_torch_mempool_id_t id) {
  guard("tether_torch_end_allocate_to_pool", [&] {
    Hooks& h = hooks();
    std::vector<Route> ended;  // destroyed after the lock: PyTorch's filter copies are freed outside it
    std::unique_lock<std::shared_mutex> lock(h.graph_mutex);
    for (auto it = h.routes.begin(); it != h.routes.end();) {
      if (it->device == device && it->first == id.first && it->second == id.second) {
        ended.push_back(std::move(*it));
        it = h.routes.erase(it);
        h.active_routes.fetch_sub(1, std::memory_order_release);
      } else {
        ++it;
      }
    }
    lock.unlock();
  });
}

TETHER_API void tether_torch_release_pool(int device, tether_torch_mempool_id_t id) {
  guard("tether_torch_release_pool", [&] {
    Hooks& h = hooks();
    std::shared_ptr<GraphPool> last;  // destroyed after the lock (frees the pool's memory if nothing is outstanding)
    std::unique_lock<std::shared_mutex> lock(h.graph_mutex);
    auto it = h.graph_pools.find(std::make_tuple(device, id.first, id.second));
    if (it == h.graph_pools.end()) return;
    if (--it->second.uses > 0) return;
    last = std::move(it->second.pool);
    h.graph_pools.erase(it);
    const int index = device_index(device);
    if (index >= 0) h.devices[index].graph_pools.fetch_sub(1, std::memory_order_relaxed);
    lock.unlock();
  });
}

TETHER_API tether_status_t tether_torch_get_device_stats(int device, tether_torch_device_stats_t* out) {
  return guard("tether_torch_get_device_stats", [&] {
    const int index = device_index(device);
    if (index < 0)
      core::throw_invalid_argument("device " + std::to_string(device) +
                                   " is neither a CUDA device below 64 nor TETHER_DEVICE_HOST");
    const DeviceCounters& c = hooks().devices[index];
    tether_torch_device_stats_t v{};
    v.struct_size = sizeof v;
    v.allocated_bytes = c.bytes.load(std::memory_order_relaxed);
    v.peak_allocated_bytes = std::max(c.peak_bytes.load(std::memory_order_relaxed), v.allocated_bytes);
    v.reserved_bytes = c.reserved();
    v.peak_reserved_bytes = std::max(c.peak_reserved.load(std::memory_order_relaxed), v.reserved_bytes);
    v.allocation_count = c.count.load(std::memory_order_relaxed);
    v.peak_allocation_count = std::max(c.peak_count.load(std::memory_order_relaxed), v.allocation_count);
    v.num_ooms = c.ooms.load(std::memory_order_relaxed);
    v.num_alloc_retries = c.retries.load(std::memory_order_relaxed);
    v.memory_limit = c.limit.load(std::memory_order_relaxed);
    v.graph_pools = c.graph_pools.load(std::memory_order_relaxed);
    write_info(out, v, "out");
  });
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
    v.allocations = totals.inserted - std::min(totals.inserted, h.reinserted.load(std::memory_order_relaxed));
    v.failures = h.failures.load(std::memory_order_relaxed);
    v.unknown_frees = h.unknown_frees.load(std::memory_order_relaxed);
    v.unknown_records = h.unknown_records.load(std::memory_order_relaxed);
    v.recorded_streams = h.recorded_streams.load(std::memory_order_relaxed);
    write_info(out, v, "out");
  });
}

}  // extern "C"
