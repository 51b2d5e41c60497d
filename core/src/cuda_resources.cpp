// The CUDA resources: device memory (cuMemAlloc), stream-ordered memory from
// a CUDA memory pool (cuMemAllocFromPoolAsync), managed memory and pinned
// host memory. All of them:
//   - work in their device's primary context (ScopedContext);
//   - throw OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY;
//   - leak instead of freeing once the process is exiting, and treat frees
//     that find CUDA already torn down as done;
//   - provide stream ordering (for pools over them) through events.
//
// Bookkeeping: each resource records what it handed out (size, alignment,
// the driver's pointer), so a free with a foreign pointer, a wrong size or
// alignment, or a second free is INVALID_ARGUMENT and never reaches the
// driver. The driver returns memory aligned to at least 256 bytes; a larger
// alignment is served by over-allocating, the record keeping the base.
#include "tether_core/cuda.hpp"

#if TETHER_HAVE_CUDA_HEADERS

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>

#include "cuda_driver.hpp"
#include "tether/cuda.h"
#include "tether_core/free_check.hpp"
#include "tether_core/process.hpp"

namespace tether::core::cuda {
namespace {

using namespace detail;

constexpr std::size_t kNativeAlignment = 256;

std::string bytes_detail(std::size_t bytes) { return " allocating " + std::to_string(bytes) + " bytes"; }

// The calling thread's stream-capture mode set to relaxed for one scope
// (cuThreadExchangeStreamCaptureMode), then put back: what lets a query or a
// wait on an event outside a graph run while a graph is captured.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const Driver& d) noexcept : d_(d) {
    mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    ok_ = d_.ThreadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (ok_) (void)d_.ThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const Driver& d_;
  CUstreamCaptureMode mode_;
  bool ok_ = false;
};

// Events no one uses any more, per device, to hand out again instead of a
// cuEventCreate/cuEventDestroy pair (about 1-2 us together): record_stream's
// deferred frees and the pools' arenas take and give back events often. An
// event belongs to the device's primary context, which tether never releases,
// so a spare stays valid whichever resource made it. Re-recording a spare
// replaces its old capture; a wait enqueued on it earlier keeps what it had.
// Never destroyed (frees may come from static destructors at exit).
class SpareEvents {
 public:
  CUevent take() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n_ == 0) return nullptr;
    return events_[--n_];
  }
  // False when full (then the caller destroys the event).
  bool put(CUevent e) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n_ == kMax) return false;
    events_[n_++] = e;
    return true;
  }

 private:
  static constexpr std::size_t kMax = 256;
  std::mutex mutex_;
  CUevent events_[kMax] = {};
  std::size_t n_ = 0;
};

SpareEvents& spare_events(int device) {
  static auto* spares = new std::unordered_map<int, SpareEvents>;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  return (*spares)[device];
}

// Stream ordering on one device: the pool owns its events (one per stream
// it has seen) and asks for them to be recorded and waited on. Every call
// enters the device's primary context; none calls back into a pool.
class EventStreamOrder final : public StreamOrder {
 public:
  explicit EventStreamOrder(int device) noexcept : device_(device) {}

  void synchronize(stream_t stream) override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    check(d.StreamSynchronize(as_stream(stream)), "cuStreamSynchronize", device_);
  }

  void synchronize_device() override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    check(d.CtxSynchronize(), "cuCtxSynchronize", device_);
  }

  event_t create_event() override {
    if (CUevent e = spare_events(device_).take()) return e;
    const Driver& d = driver();
    ScopedContext ctx(device_);
    CUevent e = nullptr;
    check(d.EventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device_);
    return e;
  }

  void destroy_event(event_t event) noexcept override {
    if (event == nullptr || process_is_exiting()) return;
    if (spare_events(device_).put(static_cast<CUevent>(event))) return;
    try {
      ScopedContext ctx(device_);
      (void)driver().EventDestroy(static_cast<CUevent>(event));
    } catch (...) {
      // CUDA already gone: nothing to give back.
    }
  }

  void record_event(event_t event, stream_t stream) override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    check(d.EventRecord(static_cast<CUevent>(event), as_stream(stream)), "cuEventRecord", device_);
  }

  void wait_event(stream_t waiter, event_t event) override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    check(d.StreamWaitEvent(as_stream(waiter), static_cast<CUevent>(event), 0), "cuStreamWaitEvent", device_);
  }

  bool event_done(event_t event) override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    // A query is a "potentially unsafe" call while any thread captures a CUDA
    // graph in global mode; in relaxed mode it is allowed and breaks no capture.
    RelaxedCaptureMode relaxed(d);
    const CUresult r = d.EventQuery(static_cast<CUevent>(event));
    if (r == CUDA_ERROR_NOT_READY) return false;
    check(r, "cuEventQuery", device_);
    return true;
  }

  void synchronize_event(event_t event) override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    RelaxedCaptureMode relaxed(d);
    check(d.EventSynchronize(static_cast<CUevent>(event)), "cuEventSynchronize", device_);
  }

 private:
  int device_;
};

// What a resource knows about each allocation it handed out, so that frees
// of foreign pointers, double frees and frees with the wrong size or
// alignment are rejected (INVALID_ARGUMENT) before the driver sees them.
struct Record {
  std::size_t size;
  std::size_t alignment;  // normalised, as allocated
  std::uintptr_t base;    // what the driver returned (differs when over-aligned)
  owner_t owner;          // who may free it: a caller, or the dependent that took it
};

// Pointer -> Record, sharded so that threads freeing different blocks rarely
// meet on a lock. Resources that is_equal() each other share one table.
class AllocationTable {
 public:
  void insert(std::uintptr_t p, const Record& r) {
    Shard& s = shard(p);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.map.emplace(p, r);
  }

  // Remove and return p's record if size and alignment match; otherwise throw
  // INVALID_ARGUMENT and keep it.
  Record take(std::uintptr_t p, std::size_t size, std::size_t alignment, owner_t freed_by, const char* owner) {
    Shard& s = shard(p);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.map.find(p);
    const void* ptr = reinterpret_cast<const void*>(p);
    if (it == s.map.end()) throw_not_allocated(owner, "this resource", ptr);
    const Record r = it->second;
    check_free(owner, "this resource", ptr, Allocated{r.owner, r.size, r.alignment}, freed_by, size, alignment);
    s.map.erase(it);
    return r;
  }

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::uintptr_t, Record> map;
  };
  static constexpr std::size_t kShards = 16;
  // Multiplicative hash: large CUDA allocations are 2 MiB aligned, so low bits alone would not spread.
  Shard& shard(std::uintptr_t p) noexcept { return shards_[(p * 0x9E3779B97F4A7C15ull) >> 60]; }
  Shard shards_[kShards];
};
static_assert(sizeof(std::uintptr_t) == 8, "the shard hash assumes 64-bit pointers");

// One table per (kind, device) for resources whose memory is interchangeable;
// kept for the process (late frees at exit must still find them).
std::shared_ptr<AllocationTable> shared_table(int kind, int device) {
  static std::mutex* mutex = new std::mutex;
  static auto* tables = new std::unordered_map<std::uint64_t, std::shared_ptr<AllocationTable>>;
  const std::uint64_t key = (std::uint64_t(std::uint32_t(kind)) << 32) | std::uint32_t(device);
  std::lock_guard<std::mutex> lock(*mutex);
  auto& t = (*tables)[key];
  if (!t) t = std::make_shared<AllocationTable>();
  return t;
}

// No CUDA allocation can be this large (2^47 bytes = 128 TiB, beyond any
// device and the usual 47-bit user address space): refused without asking
// the driver, which may answer such requests with other errors than OOM.
constexpr std::size_t kLargestPlausible = std::size_t{1} << 47;

// What the four resources share: context handling, bookkeeping, alignment,
// the shutdown rules and the stream order. Subclasses provide the raw
// driver calls.
class DriverResource : public Resource {
 public:
  DriverResource(Properties p, int device, std::shared_ptr<AllocationTable> table)
      : Resource(p), device_(device), table_(std::move(table)), order_(device) {}

  StreamOrder* stream_order() noexcept override { return &order_; }

 protected:
  // Allocate at least `bytes` (aligned to kNativeAlignment) or throw. Called
  // with the device's primary context current.
  virtual void* raw_allocate(std::size_t bytes, stream_t stream) = 0;
  // Free memory from raw_allocate; returns the driver's result.
  virtual CUresult raw_free(void* p, stream_t stream) = 0;
  // The driver call raw_free makes, for messages.
  virtual const char* free_call() const noexcept = 0;
  // The largest request worth passing to the driver.
  virtual std::size_t largest_request() const noexcept { return kLargestPlausible; }

  [[noreturn]] void throw_alloc_failure(CUresult r, const char* call, std::size_t bytes) const {
    throw_result(r, call, device_, bytes_detail(bytes) + " (" + name() + " resource)");
  }

  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) final {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) final {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) final {
    // Enough slack to place an `alignment` boundary inside the block; cannot
    // overflow (Resource::allocate bounds bytes well below SIZE_MAX).
    const std::size_t total = alignment > kNativeAlignment ? bytes + alignment - kNativeAlignment : bytes;
    if (total > largest_request())
      throw OutOfMemory(std::string(name()) + ": cannot allocate " + std::to_string(bytes) +
                        " bytes on device " + std::to_string(device_) + ": more than this resource can ever provide");
    ScopedContext ctx(device_);
    void* base = raw_allocate(total, stream);
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    const std::uintptr_t aligned = (b + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
    if (alignment <= kNativeAlignment && aligned != b) {
      (void)raw_free(base, stream);
      throw Error(TETHER_ERROR_INTERNAL, std::string(name()) + ": the driver returned " + pointer_text(base) +
                                             ", not aligned to " + std::to_string(alignment) + " bytes");
    }
    try {
      table_->insert(aligned, Record{bytes, alignment, b, owner});
    } catch (...) {
      (void)raw_free(base, stream);
      throw;
    }
    return reinterpret_cast<void*>(aligned);
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) final {
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    const Record r = table_->take(p, bytes, alignment, owner, name());  // throws for foreign pointers
    // After exit has begun the context may be gone: leak (see process.hpp).
    if (process_is_exiting()) return;
    CUresult result;
    try {
      ScopedContext ctx(device_);
      result = raw_free(reinterpret_cast<void*>(r.base), stream);
    } catch (const CudaError& e) {
      if (is_shutdown_result(e.result())) return;  // CUDA already torn down: nothing to free into
      table_->insert(p, r);
      throw;
    }
    if (result != CUDA_SUCCESS && !is_shutdown_result(result)) {
      table_->insert(p, r);  // still allocated as far as anyone can tell
      throw_result(result, free_call(), device_);
    }
  }

  const int device_;

 private:
  std::shared_ptr<AllocationTable> table_;
  EventStreamOrder order_;
};

// ---- device memory: cuMemAlloc / cuMemFree -----------------------------------

class CudaResource final : public DriverResource {
 public:
  explicit CudaResource(int device)
      : DriverResource(Properties{TETHER_RESOURCE_KIND_CUDA, device, true, false}, device,
                       shared_table(TETHER_RESOURCE_KIND_CUDA, device)) {}

  const char* name() const noexcept override { return "cuda"; }

  // cuMemFree accepts any cuMemAlloc pointer of the device.
  bool is_equal(const Resource& other) const noexcept override {
    auto* o = dynamic_cast<const CudaResource*>(&other);
    return o != nullptr && o->device_ == device_;
  }

 protected:
  void* raw_allocate(std::size_t bytes, stream_t) override {
    CUdeviceptr p = 0;
    const CUresult r = driver().MemAlloc(&p, bytes);
    if (r != CUDA_SUCCESS) throw_alloc_failure(r, "cuMemAlloc", bytes);
    return as_ptr(p);
  }
  CUresult raw_free(void* p, stream_t) override { return driver().MemFree(as_dptr(p)); }
  const char* free_call() const noexcept override { return "cuMemFree"; }
};

// ---- stream-ordered: cuMemAllocFromPoolAsync / cuMemFreeAsync ------------------

class AsyncResource final : public DriverResource {
 public:
  // Resources on a pool they do not own (the device's default pool, a view of
  // another library's pool) share one table per device, so memory may be freed
  // through any of them on the same pool; an owned pool has its own.
  // `kind`: ASYNC, ASYNC_VIEW for a view of a pool given by its owner, or MANAGED_ASYNC
  // for the device's default managed pool (managed memory: host-accessible too, and a
  // table of its own, as its pool is not the device-memory pools').
  // `ipc_handle_type`: the pool's TETHER_IPC_HANDLE_* (unknown, -1, for a view).
  AsyncResource(int device, CUmemoryPool pool, bool owned, std::size_t maximum,
                tether_resource_kind_t kind = TETHER_RESOURCE_KIND_ASYNC, int ipc_handle_type = TETHER_IPC_HANDLE_NONE)
      : DriverResource(Properties{kind, device, true, kind == TETHER_RESOURCE_KIND_MANAGED_ASYNC}, device,
                       owned ? std::make_shared<AllocationTable>()
                             : shared_table(kind == TETHER_RESOURCE_KIND_MANAGED_ASYNC ? kind : TETHER_RESOURCE_KIND_ASYNC,
                                            device)),
        pool_(pool),
        owned_(owned),
        maximum_(maximum),
        ipc_handle_type_(ipc_handle_type) {}

  ~AsyncResource() override {
    if (share_.fd >= 0 && !process_is_exiting()) (void)::close(share_.fd);
    // An owned pool goes with its resource. Buffers and pools over this
    // resource hold it, so no allocation is outstanding by now (and if one
    // were, cuMemPoolDestroy defers the release until it comes back).
    if (!owned_ || process_is_exiting()) return;
    try {
      ScopedContext ctx(device_);
      (void)driver().MemPoolDestroy(pool_);
    } catch (...) {
      // CUDA already gone.
    }
  }

  const char* name() const noexcept override {
    switch (properties().kind) {
      case TETHER_RESOURCE_KIND_ASYNC_VIEW: return "async_view";
      case TETHER_RESOURCE_KIND_MANAGED_ASYNC: return "managed_async";
      default: return "async";
    }
  }

  // Memory may be freed into any resource that allocates from the same pool.
  bool is_equal(const Resource& other) const noexcept override {
    auto* o = dynamic_cast<const AsyncResource*>(&other);
    return o != nullptr && o->pool_ == pool_;
  }

  void trim() override {
    const Driver& d = driver();
    ScopedContext ctx(device_);
    check(d.MemPoolTrimTo(pool_, 0), "cuMemPoolTrimTo", device_);
  }

  // The pool's shareable handle as a POSIX fd, exported once and kept.
  PoolShare share() const {
    std::lock_guard<std::mutex> lock(share_mutex_);
    if (share_.fd >= 0) return share_;
    const char* what = name();
    if (ipc_handle_type_ == TETHER_IPC_HANDLE_NONE)
      throw Error(TETHER_ERROR_NOT_SUPPORTED,
                  std::string("memory of an ") + what +
                      " resource whose pool was created without ipc_handle_type='posix_fd' (TETHER_IPC_HANDLE_POSIX_FD) "
                      "cannot be shared with another process: cuMemAllocAsync pools share memory only through a "
                      "shareable handle of the pool. Create the async resource with ipc_handle_type='posix_fd', or "
                      "use a cuda resource (or a pool over one)");
    const Driver& d = driver();
    if (d.MemPoolExportToShareableHandle == nullptr || d.MemPoolExportPointer == nullptr)
      throw Error(TETHER_ERROR_NOT_SUPPORTED, "this CUDA driver does not provide cuMemPoolExportToShareableHandle and "
                                              "cuMemPoolExportPointer, so memory-pool allocations cannot be shared");
    ScopedContext ctx(device_);
    int fd = -1;
    const CUresult r = d.MemPoolExportToShareableHandle(&fd, pool_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS)
      throw Error(TETHER_ERROR_NOT_SUPPORTED,
                  std::string("the CUDA driver refuses to export the ") + what +
                      " resource's pool as a POSIX file descriptor (cuMemPoolExportToShareableHandle: " + result_text(r) +
                      "); only pools created with a POSIX file descriptor handle type (ipc_handle_type='posix_fd') "
                      "can share their memory");
    std::random_device random;
    const std::uint64_t id = (std::uint64_t(random()) << 32) ^ std::uint64_t(random()) ^
                             (std::uint64_t(static_cast<std::uint32_t>(getpid())) << 16) ^
                             std::uint64_t(reinterpret_cast<std::uintptr_t>(pool_));
    share_ = PoolShare{pool_, fd, id == 0 ? 1 : id};
    return share_;
  }

 protected:
  void* raw_allocate(std::size_t bytes, stream_t stream) override {
    CUdeviceptr p = 0;
    const CUresult r = driver().MemAllocFromPoolAsync(&p, bytes, pool_, as_stream(stream));
    if (r != CUDA_SUCCESS) {
      if (r == CUDA_ERROR_OUT_OF_MEMORY && maximum_ != 0)
        throw OutOfMemory("cuMemAllocFromPoolAsync failed: " + result_text(r) + " on device " +
                          std::to_string(device_) + bytes_detail(bytes) + " (async resource, maximum_pool_size " +
                          std::to_string(maximum_) + " bytes)");
      throw_alloc_failure(r, "cuMemAllocFromPoolAsync", bytes);
    }
    return as_ptr(p);
  }
  CUresult raw_free(void* p, stream_t stream) override {
    return driver().MemFreeAsync(as_dptr(p), as_stream(stream));
  }
  const char* free_call() const noexcept override { return "cuMemFreeAsync"; }

 private:
  CUmemoryPool pool_;
  bool owned_;
  std::size_t maximum_;
  int ipc_handle_type_;
  mutable std::mutex share_mutex_;
  mutable PoolShare share_;
};

// ---- managed memory: cuMemAllocManaged ----------------------------------------

class ManagedResource final : public DriverResource {
 public:
  ManagedResource(int device, std::size_t largest)
      : DriverResource(Properties{TETHER_RESOURCE_KIND_MANAGED, device, true, true}, device,
                       shared_table(TETHER_RESOURCE_KIND_MANAGED, device)),
        largest_(largest) {}

  const char* name() const noexcept override { return "managed"; }

  bool is_equal(const Resource& other) const noexcept override {
    auto* o = dynamic_cast<const ManagedResource*>(&other);
    return o != nullptr && o->device_ == device_;
  }

 protected:
  void* raw_allocate(std::size_t bytes, stream_t) override {
    CUdeviceptr p = 0;
    const CUresult r = driver().MemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
    if (r != CUDA_SUCCESS) throw_alloc_failure(r, "cuMemAllocManaged", bytes);
    return as_ptr(p);
  }
  CUresult raw_free(void* p, stream_t) override { return driver().MemFree(as_dptr(p)); }
  const char* free_call() const noexcept override { return "cuMemFree"; }
  // Managed memory may oversubscribe the device, but never beyond device
  // plus host memory; asking for more can wedge the GPU on some systems.
  std::size_t largest_request() const noexcept override { return largest_; }

 private:
  std::size_t largest_;
};

// ---- pinned host memory: cuMemHostAlloc ----------------------------------------

// Properties.device is TETHER_DEVICE_HOST: the memory is host memory and,
// being portable, usable from every device. The device given at creation
// only selects the context that allocates it and orders its streams.
class PinnedHostResource final : public DriverResource {
 public:
  explicit PinnedHostResource(int device)
      : DriverResource(Properties{TETHER_RESOURCE_KIND_PINNED_HOST, TETHER_DEVICE_HOST, true, true}, device,
                       shared_table(TETHER_RESOURCE_KIND_PINNED_HOST, TETHER_DEVICE_HOST)) {}

  const char* name() const noexcept override { return "pinned_host"; }

  // Portable pinned memory may be freed from any context.
  bool is_equal(const Resource& other) const noexcept override {
    return dynamic_cast<const PinnedHostResource*>(&other) != nullptr;
  }

 protected:
  void* raw_allocate(std::size_t bytes, stream_t) override {
    void* p = nullptr;
    const CUresult r = driver().MemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r != CUDA_SUCCESS) throw_alloc_failure(r, "cuMemHostAlloc", bytes);
    return p;
  }
  CUresult raw_free(void* p, stream_t) override { return driver().MemFreeHost(p); }
  const char* free_call() const noexcept override { return "cuMemFreeHost"; }
};

// ---- system memory: malloc'd, used by a device with pageable memory access -------

// Also the base of SamHeadroomResource (`kind` SAM_HEADROOM): the same memory and frees.
class SystemResource : public DriverResource {
 public:
  explicit SystemResource(int device, tether_resource_kind_t kind = TETHER_RESOURCE_KIND_SYSTEM)
      : DriverResource(Properties{kind, device, true, true}, device, shared_table(kind, device)) {}

  const char* name() const noexcept override { return "system"; }

  bool is_equal(const Resource& other) const noexcept override {
    auto* o = dynamic_cast<const SystemResource*>(&other);
    return o != nullptr && o->properties().kind == properties().kind && o->device_ == device_;
  }

 protected:
  void* raw_allocate(std::size_t bytes, stream_t) override {
    void* p = std::aligned_alloc(kNativeAlignment, (bytes + kNativeAlignment - 1) / kNativeAlignment * kNativeAlignment);
    if (p == nullptr) throw OutOfMemory("system: malloc could not allocate " + std::to_string(bytes) + " bytes");
    return p;
  }
  // The C heap knows no streams: wait for the work on `stream` before the memory goes back.
  CUresult raw_free(void* p, stream_t stream) override {
    const CUresult r = driver().StreamSynchronize(as_stream(stream));
    if (r != CUDA_SUCCESS && !is_shutdown_result(r)) return r;
    std::free(p);
    return CUDA_SUCCESS;
  }
  const char* free_call() const noexcept override { return "cuStreamSynchronize before free"; }
};

// ---- system memory placed with a headroom (RMM's sam_headroom_memory_resource) -----

// The system resource's memory; at each allocation the part that the device's free memory
// less the headroom covers (rounded down to kNativeAlignment) is advised to prefer the
// device, the rest to prefer the host (cuMemAdvise, CU_MEM_ADVISE_SET_PREFERRED_LOCATION).
class SamHeadroomResource final : public SystemResource {
 public:
  SamHeadroomResource(int device, std::size_t headroom)
      : SystemResource(device, TETHER_RESOURCE_KIND_SAM_HEADROOM), headroom_(headroom) {}

  const char* name() const noexcept override { return "sam_headroom"; }

  bool is_equal(const Resource& other) const noexcept override {
    auto* o = dynamic_cast<const SamHeadroomResource*>(&other);
    return SystemResource::is_equal(other) && o != nullptr && o->headroom_ == headroom_;
  }

 protected:
  void* raw_allocate(std::size_t bytes, stream_t stream) override {
    void* p = SystemResource::raw_allocate(bytes, stream);
    const Driver& d = driver();
    std::size_t free_bytes = 0, total_bytes = 0;
    CUresult r = d.MemGetInfo(&free_bytes, &total_bytes);
    const std::size_t device_part = r != CUDA_SUCCESS ? 0 : device_share(free_bytes, bytes);
    if (r == CUDA_SUCCESS && device_part != 0)
      r = d.MemAdvise(as_dptr(p), device_part, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device_handle(device_));
    if (r == CUDA_SUCCESS && device_part < bytes)
      r = d.MemAdvise(as_dptr(static_cast<char*>(p) + device_part), bytes - device_part,
                      CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU);
    if (r != CUDA_SUCCESS) {
      std::free(p);  // nothing was enqueued on it
      throw_alloc_failure(r, "cuMemGetInfo or cuMemAdvise", bytes);
    }
    return p;
  }

 private:
  // The bytes of a `bytes` allocation that may prefer the device: what the free memory
  // above the headroom covers, rounded down to kNativeAlignment.
  std::size_t device_share(std::size_t free_bytes, std::size_t bytes) const noexcept {
    const std::size_t room = free_bytes > headroom_ ? free_bytes - headroom_ : 0;
    return (room < bytes ? room : bytes) / kNativeAlignment * kNativeAlignment;
  }

  const std::size_t headroom_;
};

bool device_attribute(int device, CUdevice_attribute attribute, const char* what) {
  int value = 0;
  const CUresult r = driver().DeviceGetAttribute(&value, attribute, device_handle(device));
  if (r != CUDA_SUCCESS) throw_result(r, "cuDeviceGetAttribute", device, std::string(" (") + what + ")");
  return value != 0;
}

CUmemoryPool create_owned_pool(int device, const AsyncOptions& o) {
  const Driver& d = driver();
  if (o.maximum_pool_size != 0 && d.version < 12020)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "async resource: maximum_pool_size needs a CUDA 12.2 driver; this one is " +
                                                std::to_string(d.version));
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = o.ipc_handle_type == TETHER_IPC_HANDLE_POSIX_FD ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                                                      : CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  props.maxSize = o.maximum_pool_size;
  CUmemoryPool pool = nullptr;
  check(d.MemPoolCreate(&pool, &props), "cuMemPoolCreate", device);
  try {
    // The pool keeps at least what it reserved at creation, or the
    // reservation would be returned at the first synchronisation.
    cuuint64_t threshold = o.release_threshold > o.initial_pool_size ? o.release_threshold : o.initial_pool_size;
    check(d.MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
          "cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)", device);
    if (o.initial_pool_size != 0) {
      CUdeviceptr p = 0;
      const CUresult r = d.MemAllocFromPoolAsync(&p, o.initial_pool_size, pool, nullptr);
      if (r != CUDA_SUCCESS)
        throw_result(r, "cuMemAllocFromPoolAsync", device,
                     " reserving initial_pool_size " + std::to_string(o.initial_pool_size) + " bytes");
      check(d.MemFreeAsync(p, nullptr), "cuMemFreeAsync", device);
    }
  } catch (...) {
    (void)d.MemPoolDestroy(pool);
    throw;
  }
  return pool;
}

}  // namespace

ResourcePtr make_cuda_resource(int device) {
  check_device(device);
  return std::make_shared<CudaResource>(device);
}

ResourcePtr make_async_resource(int device, const AsyncOptions& o) {
  check_device(device);
  if (o.ipc_handle_type != TETHER_IPC_HANDLE_NONE && o.ipc_handle_type != TETHER_IPC_HANDLE_POSIX_FD)
    throw_invalid_argument("async resource: unknown ipc_handle_type " + std::to_string(o.ipc_handle_type) +
                           " (use TETHER_IPC_HANDLE_NONE or TETHER_IPC_HANDLE_POSIX_FD)");
  if (!o.use_default_pool && o.maximum_pool_size != 0 && o.initial_pool_size > o.maximum_pool_size)
    throw_invalid_argument("async resource: initial_pool_size (" + std::to_string(o.initial_pool_size) +
                           " bytes) exceeds maximum_pool_size (" + std::to_string(o.maximum_pool_size) + " bytes)");
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "memory pools"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                "async resource: device " + std::to_string(device) + " does not support CUDA memory pools");
  const Driver& d = driver();
  ScopedContext ctx(device);
  if (o.use_default_pool) {
    CUmemoryPool pool = nullptr;
    check(d.DeviceGetDefaultMemPool(&pool, device_handle(device)), "cuDeviceGetDefaultMemPool", device);
    return std::make_shared<AsyncResource>(device, pool, false, 0);
  }
  if (o.ipc_handle_type == TETHER_IPC_HANDLE_POSIX_FD) {
    int types = 0;
    const CUresult r =
        d.DeviceGetAttribute(&types, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, device_handle(device));
    if (r != CUDA_SUCCESS || (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
      throw Error(TETHER_ERROR_NOT_SUPPORTED, "async resource: device " + std::to_string(device) +
                                                  " does not support POSIX file descriptor IPC handles for memory pools");
  }
  CUmemoryPool pool = create_owned_pool(device, o);
  try {
    return std::make_shared<AsyncResource>(device, pool, true, o.maximum_pool_size, TETHER_RESOURCE_KIND_ASYNC,
                                           static_cast<int>(o.ipc_handle_type));
  } catch (...) {
    (void)d.MemPoolDestroy(pool);
    throw;
  }
}

ResourcePtr make_async_view_resource(int device, void* pool) {
  check_device(device);
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "memory pools"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                "async_view resource: device " + std::to_string(device) + " does not support CUDA memory pools");
  CUmemoryPool p = static_cast<CUmemoryPool>(pool);
  if (p == nullptr) {
    ScopedContext ctx(device);
    check(driver().DeviceGetMemPool(&p, device_handle(device)), "cuDeviceGetMemPool", device);
  }
  return std::make_shared<AsyncResource>(device, p, false, 0, TETHER_RESOURCE_KIND_ASYNC_VIEW, -1);
}

PoolShare share_async_pool(const Resource& resource) {
  auto* async = dynamic_cast<const AsyncResource*>(&resource);
  if (async == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("a '") + resource.name() + "' resource has no memory pool to share");
  return async->share();
}

void memory_info(int device, std::size_t* free_bytes, std::size_t* total_bytes) {
  check_device(device);
  ScopedContext ctx(device);
  check(driver().MemGetInfo(free_bytes, total_bytes), "cuMemGetInfo", device);
}

std::string device_name(int device) {
  check_device(device);
  char name[256] = {};
  check(driver().DeviceGetName(name, int(sizeof name - 1), device_handle(device)), "cuDeviceGetName", device);
  return name;
}

ResourcePtr make_managed_resource(int device) {
  check_device(device);
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "managed memory"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                "managed resource: device " + std::to_string(device) + " does not support managed memory");
  std::size_t free_bytes = 0, total_bytes = 0;
  {
    ScopedContext ctx(device);
    check(driver().MemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo", device);
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  const std::size_t host_bytes = pages > 0 && page_size > 0 ? std::size_t(pages) * std::size_t(page_size) : 0;
  return std::make_shared<ManagedResource>(device, total_bytes + host_bytes);
}

ResourcePtr make_system_resource(int device) {
  check_device(device);
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, "pageable memory access"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                "system resource: device " + std::to_string(device) +
                    " cannot access pageable memory (CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS is 0: no HMM or ATS)");
  return std::make_shared<SystemResource>(device);
}

ResourcePtr make_sam_headroom_resource(int device, std::size_t headroom) {
  check_device(device);
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, "pageable memory access"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                "sam_headroom resource: device " + std::to_string(device) +
                    " cannot access pageable memory (CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS is 0: no HMM or ATS)");
  if (driver().MemAdvise == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "sam_headroom resource: the CUDA driver does not provide cuMemAdvise");
  return std::make_shared<SamHeadroomResource>(device, headroom);
}

ResourcePtr make_managed_async_resource(int device) {
  check_device(device);
  const Driver& d = driver();
  const char* what = "managed_async resource";
  auto get_default_pool =
      newer_entry_point(d.MemGetDefaultMemPool, what, "cuMemGetDefaultMemPool", 13000, d.version);
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "memory pools"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string(what) + ": device " + std::to_string(device) +
                                                " does not support CUDA memory pools "
                                                "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)");
  if (!device_attribute(device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "concurrent managed access"))
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                std::string(what) + ": device " + std::to_string(device) +
                    " cannot access managed memory concurrently with the host "
                    "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0), which managed memory pools need");
  ScopedContext ctx(device);
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = device;
  CUmemoryPool pool = nullptr;
  const CUresult r = get_default_pool(&pool, &location, CU_MEM_ALLOCATION_TYPE_MANAGED);
  if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string(what) + ": the CUDA driver has no managed memory pool for device " +
                                                std::to_string(device) + " (cuMemGetDefaultMemPool: " + result_text(r) + ")");
  check(r, "cuMemGetDefaultMemPool", device);
  return std::make_shared<AsyncResource>(device, pool, false, 0, TETHER_RESOURCE_KIND_MANAGED_ASYNC,
                                         TETHER_IPC_HANDLE_NONE);
}

ResourcePtr make_pinned_host_resource(int device) {
  check_device(device);
  return std::make_shared<PinnedHostResource>(device);
}

}  // namespace tether::core::cuda

#endif  // TETHER_HAVE_CUDA_HEADERS
