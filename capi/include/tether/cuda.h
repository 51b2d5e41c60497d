/*
 * tether/cuda.h - CUDA resources and the CUDA driver.
 *
 * tether links nothing from CUDA: libcuda.so.1 is loaded on first use. On a
 * machine without a driver or device these functions fail with
 * TETHER_ERROR_NO_DEVICE and a message saying why; host resources keep working.
 * All CUDA work happens in the device's primary context, as the CUDA runtime
 * does, so memory and streams interoperate with CuPy, PyTorch, Numba and
 * cuda.core in the same process.
 */
#ifndef TETHER_CUDA_H
#define TETHER_CUDA_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** IPC handle types for an owned async pool (values of CUmemAllocationHandleType). */
#define TETHER_IPC_HANDLE_NONE 0
#define TETHER_IPC_HANDLE_POSIX_FD 1

/** Options of tether_async_resource_create(). Initialise with TETHER_ASYNC_OPTIONS_INIT. */
typedef struct tether_async_options {
  uint32_t struct_size;
  /** Nonzero: allocate from the device's default memory pool; the fields below are ignored. */
  int32_t use_default_pool;
  /** Bytes the owned pool reserves at creation (0: none) and keeps: its release threshold is at least this. */
  size_t initial_pool_size;
  /** Bytes the owned pool keeps when idle instead of returning them (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD). */
  size_t release_threshold;
  /** Upper bound of the owned pool (0: no limit). */
  size_t maximum_pool_size;
  /** TETHER_IPC_HANDLE_NONE or TETHER_IPC_HANDLE_POSIX_FD. */
  uint32_t ipc_handle_type;
} tether_async_options_t;

#define TETHER_ASYNC_OPTIONS_INIT { sizeof(tether_async_options_t), 0, 0, 0, 0, TETHER_IPC_HANDLE_NONE }

/** Set *options to the defaults (see tether_pool_options_init for struct_size). */
TETHER_API tether_status_t tether_async_options_init(tether_async_options_t* options, size_t struct_size);

/**
 * Options of tether_async_view_resource_create(). Initialise with
 * TETHER_ASYNC_VIEW_OPTIONS_INIT or tether_async_view_options_init().
 */
typedef struct tether_async_view_options {
  uint32_t struct_size;
  /**
   * The CUDA memory pool to allocate from (a CUmemoryPool / cudaMemPool_t), owned by
   * someone else: CuPy's MemoryAsyncPool, cuda.core's DeviceMemoryResource, PyTorch's
   * cudaMallocAsync backend, a pool the application made. NULL: the device's current
   * memory pool at creation (cuDeviceGetMemPool: the default pool unless someone set
   * another with cudaDeviceSetMemPool).
   */
  void* pool;
} tether_async_view_options_t;

#define TETHER_ASYNC_VIEW_OPTIONS_INIT { sizeof(tether_async_view_options_t), NULL }

/** Set *options to the defaults (see tether_pool_options_init for struct_size). */
TETHER_API tether_status_t tether_async_view_options_init(tether_async_view_options_t* options,
                                                          size_t struct_size);

/**
 * Options of tether_sam_headroom_resource_create(). Initialise with
 * TETHER_SAM_HEADROOM_OPTIONS_INIT or tether_sam_headroom_options_init().
 */
typedef struct tether_sam_headroom_options {
  uint32_t struct_size;
  /**
   * Bytes of the device's memory kept free for other allocations (RMM's headroom): of each
   * allocation, only the part that the device's free memory (cuMemGetInfo) less this covers
   * is advised to prefer the device; the rest is advised to prefer the host.
   */
  size_t headroom;
} tether_sam_headroom_options_t;

#define TETHER_SAM_HEADROOM_OPTIONS_INIT { sizeof(tether_sam_headroom_options_t), 0 }

/** Set *options to the defaults (see tether_pool_options_init for struct_size). */
TETHER_API tether_status_t tether_sam_headroom_options_init(tether_sam_headroom_options_t* options,
                                                            size_t struct_size);

/** *out = number of CUDA devices. NO_DEVICE (with the reason) if there is no usable driver. */
TETHER_API tether_status_t tether_cuda_get_device_count(int* out);

/** *out = the driver's CUDA version (e.g. 13000). NO_DEVICE if no driver. */
TETHER_API tether_status_t tether_cuda_get_driver_version(int* out);

/** *out = the calling thread's current device: its current context's device, else 0. */
TETHER_API tether_status_t tether_cuda_get_current_device(int* out);

/**
 * Free and total memory of `device` (an id or TETHER_DEVICE_CURRENT), in bytes,
 * as cuMemGetInfo reports them in its primary context. Both out-pointers are
 * required. Errors: NO_DEVICE, INVALID_ARGUMENT (bad id, NULL out).
 */
TETHER_API tether_status_t tether_cuda_get_memory_info(int device, size_t* out_free, size_t* out_total);

/**
 * The name of `device` (an id or TETHER_DEVICE_CURRENT) as cuDeviceGetName
 * reports it, e.g. "NVIDIA H200". Text rule (as tether/tracking.h): the name
 * and its NUL are copied to `buffer` as far as `capacity` allows (always
 * NUL-terminated when capacity > 0) and *out_needed receives the size the
 * whole name needs, NUL included; buffer = NULL, capacity = 0 asks for the size.
 * Errors: NO_DEVICE, INVALID_ARGUMENT (bad id, NULL out_needed, NULL buffer
 * with capacity > 0).
 */
TETHER_API tether_status_t tether_cuda_get_device_name(int device, char* buffer, size_t capacity,
                                                       size_t* out_needed);

/** Wait until all work on `stream` (of `device`'s primary context) is done. */
TETHER_API tether_status_t tether_cuda_stream_synchronize(int device, tether_stream_t stream);

/** Device memory of `device` from cuMemAlloc / cuMemFree (streams are ignored). out: +1. */
TETHER_API tether_status_t tether_cuda_resource_create(int device, tether_resource_t** out);

/**
 * Stream-ordered device memory from a CUDA memory pool (cuMemAllocFromPoolAsync).
 * options may be NULL (an owned pool with defaults). An owned pool is destroyed
 * only when the last handle and the last allocation are gone. out: +1.
 */
TETHER_API tether_status_t tether_async_resource_create(int device, const tether_async_options_t* options,
                                                        tether_resource_t** out);

/**
 * Stream-ordered device memory of `device` from a CUDA memory pool that tether does not
 * own (cuMemAllocFromPoolAsync / cuMemFreeAsync), as RMM's cuda_async_view_memory_resource:
 * tether, CuPy, PyTorch and cuda.core can then allocate from one pool. options may be
 * NULL (the device's current pool); options->pool must be a live pool whose memory is
 * on `device`, and must outlive the resource and every allocation from it (the view
 * never destroys or trims anything but through tether_resource_trim, which trims the
 * pool to 0 bytes). The driver checks the handle as far as it can: a pool that is not
 * one is undefined behaviour in CUDA, so pass only pools you got from CUDA.
 * A spec names the view of the device's current pool only: async_view(device=N);
 * tether_resource_get_spec refuses (NOT_SUPPORTED) a view of a pool given by handle.
 * Errors: NO_DEVICE, INVALID_ARGUMENT (bad device), NOT_SUPPORTED (a device without
 * memory pools). out: +1.
 */
TETHER_API tether_status_t tether_async_view_resource_create(int device, const tether_async_view_options_t* options,
                                                             tether_resource_t** out);

/**
 * Plain malloc'd (pageable) host memory handed to `device`, for a device that can access
 * pageable memory (HMM or ATS; RMM's system_memory_resource): host- and device-accessible.
 * A free first waits for the work on its stream (cuStreamSynchronize), then calls free().
 * Errors: NO_DEVICE, INVALID_ARGUMENT (bad device), NOT_SUPPORTED (a device whose
 * CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS is 0). Spec: system(device=N). out: +1.
 */
TETHER_API tether_status_t tether_system_resource_create(int device, tether_resource_t** out);

/**
 * Stream-ordered managed (unified) memory from `device`'s default managed memory pool
 * (cuMemGetDefaultMemPool with a device location and CU_MEM_ALLOCATION_TYPE_MANAGED, then
 * cuMemAllocFromPoolAsync / cuMemFreeAsync), as RMM's cuda_async_managed_memory_resource:
 * host- and device-accessible, ordered on the streams it is given like
 * tether_async_resource_create's memory (a free with recorded streams waits for them).
 * tether_resource_trim trims the pool to 0 bytes; the pool is the driver's and is never destroyed.
 * Errors: NO_DEVICE, INVALID_ARGUMENT (bad device), NOT_SUPPORTED (a driver older than
 * CUDA 13.0, which has no cuMemGetDefaultMemPool; a device whose
 * CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED or CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
 * is 0; a driver that has no managed pool for it). Spec: managed_async(device=N). out: +1.
 */
TETHER_API tether_status_t tether_managed_async_resource_create(int device, tether_resource_t** out);

/**
 * Plain malloc'd (pageable) memory for a device with pageable memory access, placed with
 * a headroom (RMM's sam_headroom_memory_resource): the memory of
 * tether_system_resource_create (same frees: a free waits for its stream, then free()),
 * and at each allocation the part of it that the device's free memory (cuMemGetInfo) less
 * options->headroom covers, rounded down to 256 bytes, is advised to prefer the device
 * (cuMemAdvise, CU_MEM_ADVISE_SET_PREFERRED_LOCATION); the rest is advised to prefer the
 * host. options may be NULL (headroom 0). Errors: NO_DEVICE, INVALID_ARGUMENT (bad device),
 * NOT_SUPPORTED (a device whose CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS is 0).
 * Spec: sam_headroom(device=N, headroom=SIZE). out: +1.
 */
TETHER_API tether_status_t tether_sam_headroom_resource_create(int device,
                                                               const tether_sam_headroom_options_t* options,
                                                               tether_resource_t** out);

/** Managed (unified) memory from cuMemAllocManaged, attached globally. out: +1. */
TETHER_API tether_status_t tether_managed_resource_create(int device, tether_resource_t** out);

/**
 * Page-locked host memory from cuMemHostAlloc (portable, device-mapped): host- and
 * device-accessible. `device` is the device whose primary context allocates it. out: +1.
 */
TETHER_API tether_status_t tether_pinned_host_resource_create(int device, tether_resource_t** out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_CUDA_H */
