// CUDA through the driver API, loaded at run time (libcuda.so.1 is never a
// link-time dependency). Every function throws Error(NO_DEVICE, reason) when
// no usable driver or device is present (the reason says which: no driver,
// no device, or a driver too old), and Error(CUDA, "<call> failed: <name>")
// when a driver call fails (OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY). All
// work happens in the device's primary context, retained once and kept for the
// process. The implementation lives in core/src/cuda_*.cpp (cuda_driver.hpp
// describes the loader).
//
// The resources (all thread-safe, all with a stream_order() for pools over them):
//   cuda         cuMemAlloc / cuMemFree; streams ignored. Equal to any cuda resource of its device.
//   async        cuMemAllocFromPoolAsync / cuMemFreeAsync on the given stream, from an owned pool
//                (destroyed with the resource) or the device's default pool. Equal only to async
//                resources on the same pool. trim() is cuMemPoolTrimTo(pool, 0). An owned pool's
//                release threshold is max(release_threshold, initial_pool_size), so the memory
//                reserved at creation is kept rather than returned at the first synchronisation.
//   managed      cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL): host- and device-accessible.
//   pinned_host  cuMemHostAlloc(PORTABLE | DEVICEMAP): host- and device-accessible. Its
//                properties().device is TETHER_DEVICE_HOST: the memory is host memory, usable
//                from every device; the device given at creation only picks the context that
//                allocates it and orders its streams. Equal to every pinned_host resource.
// Every resource records what it handed out: freeing a foreign pointer, twice, or with another
// size or alignment than allocated is INVALID_ARGUMENT and never reaches the driver. Once the
// process is exiting (process.hpp) frees make no CUDA call (the memory is leaked), and frees
// that find CUDA already torn down (DEINITIALIZED, CONTEXT_IS_DESTROYED) count as done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tether_core/resource.hpp"

namespace tether::core::cuda {

// Number of devices. Throws NO_DEVICE.
int device_count();
// The driver's CUDA version (cuDriverGetVersion). Throws NO_DEVICE.
int driver_version();
// The calling thread's current context's device, else 0. Throws NO_DEVICE.
int current_device();
// Throws INVALID_ARGUMENT if device is not in [0, device_count()), NO_DEVICE if none.
void check_device(int device);
// Free and total bytes of `device` (cuMemGetInfo in its primary context). Throws NO_DEVICE, CUDA.
void memory_info(int device, std::size_t* free_bytes, std::size_t* total_bytes);
// The device's name as the driver reports it (cuDeviceGetName). Throws NO_DEVICE, INVALID_ARGUMENT.
std::string device_name(int device);
// Wait for all work on `stream` (stream 0: the legacy default stream of device's primary context).
void stream_synchronize(int device, stream_t stream);

// Relaxes the calling thread's stream-capture mode (cuThreadExchangeStreamCaptureMode to
// CU_STREAM_CAPTURE_MODE_RELAXED) for the guard's lifetime and restores it after, as PyTorch's
// own allocator does around cudaMalloc: while a stream is captured in global or thread-local
// mode, allocation calls such as cuMemAlloc on this thread would otherwise invalidate the
// capture. Does nothing (and never throws) without a usable driver.
class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope() noexcept;
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  int previous_ = 0;
  bool exchanged_ = false;
};

ResourcePtr make_cuda_resource(int device);

// Options of make_async_resource (see tether_async_options_t). Throws
// INVALID_ARGUMENT for an unknown ipc_handle_type or initial > maximum,
// NOT_SUPPORTED if the device has no memory pools or no IPC handle support.
struct AsyncOptions {
  bool use_default_pool = false;
  std::size_t initial_pool_size = 0;
  std::size_t release_threshold = 0;
  std::size_t maximum_pool_size = 0;
  unsigned ipc_handle_type = 0;  // TETHER_IPC_HANDLE_*
};
ResourcePtr make_async_resource(int device, const AsyncOptions& options);
// A view of a CUDA memory pool someone else owns (NULL: the device's current pool);
// never destroys it. Kind TETHER_RESOURCE_KIND_ASYNC_VIEW, name "async_view".
ResourcePtr make_async_view_resource(int device, void* pool);
ResourcePtr make_managed_resource(int device);
// malloc'd (pageable) memory for a device with pageable memory access (HMM/ATS); NOT_SUPPORTED
// naming CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS elsewhere. Kind TETHER_RESOURCE_KIND_SYSTEM.
ResourcePtr make_system_resource(int device);
// Stream-ordered managed memory from the device's default managed memory pool (CUDA 13:
// cuMemGetDefaultMemPool, CU_MEM_ALLOCATION_TYPE_MANAGED); an AsyncResource on that pool.
// NOT_SUPPORTED naming the missing driver function (a driver before 13.0) or device attribute
// (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS).
// Kind TETHER_RESOURCE_KIND_MANAGED_ASYNC, name "managed_async".
ResourcePtr make_managed_async_resource(int device);
// The system resource's memory, each allocation's pages advised to prefer the device as far
// as the device's free memory less `headroom` covers them, the rest the host (RMM's
// sam_headroom_memory_resource). Kind TETHER_RESOURCE_KIND_SAM_HEADROOM, name "sam_headroom".
ResourcePtr make_sam_headroom_resource(int device, std::size_t headroom);
ResourcePtr make_pinned_host_resource(int device);

// For IPC (core/src/ipc.cpp): the CUDA memory pool behind an async or async_view
// resource and a POSIX file descriptor of its shareable handle
// (cuMemPoolExportToShareableHandle), exported on the first call and kept by the
// resource (closed when it is destroyed), with a random 64-bit id that names the
// pool to importers. Throws NOT_SUPPORTED, saying why, when `resource` is no
// async resource, its pool was not created with ipc_handle_type posix_fd (or,
// for a view, the driver refuses to export the pool), or the driver lacks the
// entry points; NO_DEVICE without a driver.
struct PoolShare {
  void* pool = nullptr;  // the CUmemoryPool
  int fd = -1;           // owned by the resource: do not close
  std::uint64_t id = 0;
};
PoolShare share_async_pool(const Resource& resource);

// Copy n bytes between any host, pinned, managed or device pointers, ordered on
// `stream` of `device`'s primary context; if synchronous, returns once done.
void copy(void* dst, const void* src, std::size_t n, int device, stream_t stream, bool synchronous);

}  // namespace tether::core::cuda
