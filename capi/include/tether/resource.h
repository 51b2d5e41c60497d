/*
 * tether/resource.h - memory resources: creation, refcounting, allocation.
 *
 * A resource handle is refcounted. Every *_create function hands the caller
 * one reference (+1). tether_resource_retain() adds one, tether_resource_release()
 * drops one. When the last reference is gone the handle becomes stale: any
 * later use returns TETHER_ERROR_INVALID_HANDLE (never undefined behaviour).
 *
 * Dependents keep what they depend on alive: a pool or adaptor retains its
 * upstream, a buffer retains its resource, the current-resource table retains
 * what is installed in it. Handles may therefore be released in any order.
 * A resource whose last reference goes away while raw allocations made with
 * tether_resource_allocate() are outstanding is kept (not destroyed, its memory
 * not freed behind the caller's back) and reported by tether_debug_*.
 *
 * All functions are thread-safe; every resource is thread-safe.
 */
#ifndef TETHER_RESOURCE_H
#define TETHER_RESOURCE_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a resource is. Values are stable. */
typedef enum tether_resource_kind {
  /* Written by ci/gen_kinds.py from capi/kinds.json: edit the registry, not these lines. */
  TETHER_RESOURCE_KIND_HOST = 1,              /* aligned host allocations (the C heap) */
  TETHER_RESOURCE_KIND_POOL = 2,              /* coalescing suballocator over an upstream (tether/pool.h) */
  TETHER_RESOURCE_KIND_STATISTICS = 3,        /* counts what passes through to its upstream (tether/statistics.h) */
  TETHER_RESOURCE_KIND_CUDA = 4,              /* cuMemAlloc / cuMemFree on one device (tether/cuda.h) */
  TETHER_RESOURCE_KIND_ASYNC = 5,             /* stream-ordered, from a CUDA memory pool (tether/cuda.h) */
  TETHER_RESOURCE_KIND_MANAGED = 6,           /* cuMemAllocManaged (tether/cuda.h) */
  TETHER_RESOURCE_KIND_PINNED_HOST = 7,       /* cuMemHostAlloc: page-locked, device-accessible (tether/cuda.h) */
  TETHER_RESOURCE_KIND_ARENA = 8,             /* per-thread / per-stream arenas over a global arena (tether/arena.h) */
  TETHER_RESOURCE_KIND_BINNING = 9,           /* size classes routed to bin resources (tether/binning.h) */
  TETHER_RESOURCE_KIND_FIXED_SIZE = 10,       /* blocks of one size (tether/fixed_size.h) */
  TETHER_RESOURCE_KIND_LIMITING = 11,         /* a byte limit over an upstream (tether/limiting.h) */
  TETHER_RESOURCE_KIND_TRACKING = 12,         /* records outstanding allocations (tether/tracking.h) */
  TETHER_RESOURCE_KIND_LOGGING = 13,          /* logs every allocate/free of its upstream (tether/logging.h) */
  TETHER_RESOURCE_KIND_FAILURE_CALLBACK = 14, /* asks a user function on out-of-memory (tether/failure_callback.h) */
  TETHER_RESOURCE_KIND_ALIGNED = 15,          /* a larger alignment from a size on (tether/aligned.h) */
  TETHER_RESOURCE_KIND_PREFETCH = 16,         /* prefetches managed memory to its device (tether/prefetch.h) */
  TETHER_RESOURCE_KIND_CALLBACK = 17,         /* user allocate/deallocate functions (tether/callback.h) */
  TETHER_RESOURCE_KIND_IPC = 18,              /* the mapping of one imported IPC buffer (tether/ipc.h) */
  TETHER_RESOURCE_KIND_ASYNC_VIEW = 19,       /* stream-ordered, from a CUDA memory pool it does not own (tether/cuda.h) */
  TETHER_RESOURCE_KIND_SYSTEM = 20,           /* malloc'd (pageable) host memory a device with pageable memory access uses (tether/cuda.h) */
  TETHER_RESOURCE_KIND_MANAGED_ASYNC = 21,    /* stream-ordered managed memory from the device's default managed memory pool (CUDA 13) (tether/cuda.h) */
  TETHER_RESOURCE_KIND_SAM_HEADROOM = 22      /* system (malloc'd) memory placed on the GPU while its free memory stays above a headroom (tether/cuda.h) */
} tether_resource_kind_t;

/** Properties of a resource. Initialise struct_size (TETHER_RESOURCE_PROPERTIES_INIT). */
typedef struct tether_resource_properties {
  uint32_t struct_size;
  /** A tether_resource_kind_t value. */
  uint32_t kind;
  /** The device whose memory this is, or TETHER_DEVICE_HOST for host memory. */
  int32_t device;
  /** Nonzero if kernels on `device` may access the memory. */
  int32_t device_accessible;
  /** Nonzero if host code may access the memory. */
  int32_t host_accessible;
} tether_resource_properties_t;

#define TETHER_RESOURCE_PROPERTIES_INIT { sizeof(tether_resource_properties_t), 0, 0, 0, 0 }

/* ---- creation ------------------------------------------------------------ */

/**
 * A resource of aligned host allocations from the C heap.
 * out: receives +1. It detects frees of memory that it did not allocate.
 */
TETHER_API tether_status_t tether_host_resource_create(tether_resource_t** out);

/* ---- refcounting --------------------------------------------------------- */

/** Add one reference. INVALID_HANDLE if `resource` is NULL or stale. Touches no error state. */
TETHER_API tether_status_t tether_resource_retain(tether_resource_t* resource);

/**
 * Drop one reference; the last one makes the handle stale. NULL is a no-op (TETHER_OK).
 * INVALID_HANDLE for a stale handle. Touches no error state.
 */
TETHER_API tether_status_t tether_resource_release(tether_resource_t* resource);

/* ---- allocation ---------------------------------------------------------- */

/**
 * Allocate `size` bytes aligned to `alignment` (a power of two; 0 means
 * TETHER_DEFAULT_ALIGNMENT), ordered on `stream`. *out_ptr receives the memory,
 * owned by the caller until given back with tether_resource_deallocate() on the
 * same resource with the same size and alignment. size 0 gives *out_ptr = NULL.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL out_ptr, bad alignment),
 * OUT_OF_MEMORY (*out_ptr is then NULL).
 */
TETHER_API tether_status_t tether_resource_allocate(tether_resource_t* resource, size_t size,
                                                    size_t alignment, tether_stream_t stream,
                                                    void** out_ptr);

/**
 * Give back memory from tether_resource_allocate() of this resource. The memory
 * may be reused by work ordered after `stream`. NULL with size 0 is a no-op.
 * A resource accepts only memory it handed out itself to the caller: not
 * another resource's (not even an equal one's - tether_resource_is_equal() is
 * for comparison; free into the resource you allocated from), not memory that
 * came through an adaptor or pool over it (a pool's chunk), not memory of its
 * upstream freed through an adaptor, not a pointer already freed.
 * Errors: INVALID_HANDLE; INVALID_ARGUMENT, naming the pointer, for any of
 * those and for a size or alignment that differs from the allocation: the
 * memory is then left untouched (never read) and no resource's counters
 * change. Host, pool and statistics resources check every free; CUDA
 * resources of one kind and device share one table of allocations, so they
 * accept each other's caller allocations.
 */
TETHER_API tether_status_t tether_resource_deallocate(tether_resource_t* resource, void* ptr,
                                                      size_t size, size_t alignment,
                                                      tether_stream_t stream);

/* ---- queries ------------------------------------------------------------- */

/** Fill *out (caller sets out->struct_size). INVALID_HANDLE / INVALID_ARGUMENT. */
TETHER_API tether_status_t tether_resource_get_properties(tether_resource_t* resource,
                                                          tether_resource_properties_t* out);

/** A short name ("host", "pool", ...). Borrowed, static storage; "" for a stale handle. */
TETHER_API const char* tether_resource_get_name(tether_resource_t* resource);

/**
 * The upstream of a pool or adaptor: *out is borrowed (valid while `resource` is
 * alive; retain it to keep it longer), NULL for resources without an upstream.
 */
TETHER_API tether_status_t tether_resource_get_upstream(tether_resource_t* resource,
                                                        tether_resource_t** out);

/**
 * *out = 1 if `a` and `b` are the same resource or two resources of one kind
 * that share one memory source (two host resources, two CUDA resources of one
 * device), else 0. For comparison only: memory is freed into the resource that
 * allocated it (see tether_resource_deallocate()).
 */
TETHER_API tether_status_t tether_resource_is_equal(tether_resource_t* a, tether_resource_t* b,
                                                    int* out);

/**
 * Give memory the resource holds but does not use back to its upstream (a pool
 * returns its wholly free chunks; an async resource trims its CUDA pool).
 * A no-op (TETHER_OK) for resources that hold nothing. First, memory freed
 * after use on other streams (tether_buffer_record_stream,
 * tether_torch_record_stream) that still waits for those streams is waited
 * for and freed, in every resource: so a trim may block the host until that
 * work is done (the one call besides an out-of-memory retry that does).
 */
TETHER_API tether_status_t tether_resource_trim(tether_resource_t* resource);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_RESOURCE_H */
