/*
 * tether/torch.h - the entry points PyTorch's pluggable allocator calls.
 *
 * PyTorch (torch.cuda.memory.CUDAPluggableAllocator) loads an allocate and a
 * deallocate function by name from a shared library and calls them from C++
 * with exactly these signatures:
 *
 *     void* alloc(size_t size, int device, cudaStream_t stream);
 *     void  free(void* ptr, size_t size, int device, cudaStream_t stream);
 *
 * libtether exports them, so PyTorch's allocations go through tether without
 * entering Python. The Python module tether.torch builds the allocator
 * objects; C and C++ code rarely needs this header (tests drive it with
 * device = TETHER_DEVICE_HOST, which PyTorch never passes, to exercise the
 * bookkeeping on host memory).
 *
 * Origins. Every allocation remembers the resource it came from (one +1
 * reference per outstanding allocation) and tether_torch_deallocate frees it
 * into that resource - never into whatever is current at free time - so a
 * resource stays alive while PyTorch holds any of its memory, whatever the
 * application does with its own handles or with the table meanwhile.
 *
 * Which resource. tether_torch_allocate asks the current-resource table at
 * every allocation (tether_current_resource_get(device), the calling thread's
 * override included). tether_torch_bind() hands out one of a fixed number of
 * further allocate functions (tether_torch_allocate_0 ... _7) bound to one
 * resource; a bound resource is retained for the rest of the process, since
 * PyTorch gives no notice when it stops using an allocator.
 *
 * Failures. PyTorch's global allocator (change_current_allocator) stores
 * whatever the hook returns, unchecked, so a NULL would become a tensor at
 * address 0. The unbound function and slots bound without
 * TETHER_TORCH_NULL_ON_FAILURE therefore report a failure by throwing a C++
 * exception (derived from std::bad_alloc for out of memory, whose what() says
 * "out of memory"; std::runtime_error otherwise), which PyTorch turns into a
 * Python RuntimeError; the thread's tether_last_error_message() says the same.
 * This is the one place where an exception leaves libtether, because the
 * caller is C++ that expects it. Never call those from C. For
 * torch.cuda.MemPool, bind with TETHER_TORCH_NULL_ON_FAILURE: PyTorch's
 * caching allocator checks the result there and raises torch.OutOfMemoryError
 * on NULL. A zero-byte request returns NULL without an error in every mode.
 */
#ifndef TETHER_TORCH_H
#define TETHER_TORCH_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** tether_torch_bind flag: on failure return NULL instead of throwing (for torch.cuda.MemPool). */
#define TETHER_TORCH_NULL_ON_FAILURE 1u
/** How many bound allocate functions there are (tether_torch_allocate_0 ... _7). */
#define TETHER_TORCH_BOUND_SLOTS 8

/**
 * Allocate `size` bytes from the current resource of `device` (a CUDA device
 * id, or TETHER_DEVICE_HOST) at the time of the call, ordered on `stream`
 * (a cudaStream_t). The allocation holds a reference to that resource until
 * tether_torch_deallocate. Out of memory is retried once after
 * tether_torch_empty_cache (counted in num_alloc_retries, as PyTorch's caching
 * allocator frees its cache and retries). While a CUDA graph pool is active
 * (tether_torch_begin_allocate_to_pool) an allocation its filter selects comes
 * from that pool instead. Throws on failure (see the header comment).
 */
TETHER_API void* tether_torch_allocate(size_t size, int device, void* stream);

/**
 * Free `ptr` (from any tether_torch_allocate* function) into the resource it
 * came from, ordered on `stream`, and drop that allocation's reference to it.
 * `size` and `device` are what PyTorch passes back; the recorded size is
 * used. NULL is a no-op; an unknown pointer is ignored and counted (see
 * tether_torch_get_stats). Never fails, never throws.
 */
TETHER_API void tether_torch_deallocate(void* ptr, size_t size, int device, void* stream);
/* With streams recorded (tether_torch_record_stream), the free waits for them
 * on the device, not on the host: see tether_torch_record_stream. */

/**
 * Bind one of the TETHER_TORCH_BOUND_SLOTS allocate functions to `resource`
 * (retained for the rest of the process; NULL: the current resource at each
 * allocation, as tether_torch_allocate) with `flags` (0 or
 * TETHER_TORCH_NULL_ON_FAILURE). *out_slot receives N: the function to hand
 * PyTorch is named "tether_torch_allocate_N". Binding the same resource with
 * the same flags again gives the same slot. Errors: INVALID_HANDLE (resource),
 * INVALID_ARGUMENT (unknown flags, NULL out_slot), OUT_OF_MEMORY (every slot
 * is taken).
 */
TETHER_API tether_status_t tether_torch_bind(tether_resource_t* resource, uint32_t flags, int* out_slot);

/** Allocate through bound slot 0 ... 7 (see tether_torch_bind); the signature PyTorch calls. */
TETHER_API void* tether_torch_allocate_0(size_t size, int device, void* stream);
/** Bound slot 1 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_1(size_t size, int device, void* stream);
/** Bound slot 2 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_2(size_t size, int device, void* stream);
/** Bound slot 3 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_3(size_t size, int device, void* stream);
/** Bound slot 4 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_4(size_t size, int device, void* stream);
/** Bound slot 5 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_5(size_t size, int device, void* stream);
/** Bound slot 6 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_6(size_t size, int device, void* stream);
/** Bound slot 7 (see tether_torch_allocate_0). */
TETHER_API void* tether_torch_allocate_7(size_t size, int device, void* stream);

/** What the PyTorch entry points hold and have seen (tether_torch_get_stats). */
typedef struct tether_torch_stats {
  uint32_t struct_size;         /**< sizeof(tether_torch_stats_t), set by the caller */
  uint64_t outstanding_count;   /**< allocations not yet freed */
  uint64_t outstanding_bytes;   /**< their bytes */
  uint64_t allocations;         /**< successful allocations so far */
  uint64_t failures;            /**< allocations that failed */
  uint64_t unknown_frees;       /**< frees of pointers these entry points did not hand out */
  /* Appended after the first release (not written for a smaller struct_size): */
  uint64_t unknown_records;     /**< tether_torch_record_stream calls on pointers not outstanding */
  uint64_t recorded_streams;    /**< streams recorded on allocations (duplicates and the allocation stream not counted) */
} tether_torch_stats_t;

/** Initialiser for tether_torch_stats_t. */
#define TETHER_TORCH_STATS_INIT { sizeof(tether_torch_stats_t), 0, 0, 0, 0, 0, 0, 0 }
/** sizeof(tether_torch_stats_t) before unknown_records was appended. */
#define TETHER_TORCH_STATS_FIRST_SIZE 48

/** Fill *out (struct_size set by the caller). Errors: INVALID_ARGUMENT, VERSION_MISMATCH. */
TETHER_API tether_status_t tether_torch_get_stats(tether_torch_stats_t* out);

/* ---- the rest of PyTorch's allocator contract ------------------------------
 *
 * PyTorch's pluggable allocator object (CUDAPluggableAllocator.allocator())
 * takes further C function addresses; tether.torch registers these. Each has
 * exactly the signature PyTorch calls (torch/csrc/cuda/Module.cpp, PyTorch
 * 2.11). None of them throws or fails the caller: a bad argument is ignored,
 * with the reason in the thread's tether_last_error_message(). */

/**
 * Tensor.record_stream (set_record_stream_fn: void(void*, cudaStream_t)):
 * `ptr` (an outstanding allocation of these entry points) is also used on
 * `stream`. Its later tether_torch_deallocate frees it so that the memory is
 * handed out again, on any stream, only after the work enqueued on the
 * allocation's stream and on every recorded stream before the free is done
 * (Resource deallocate_after; no host blocking). Recording the allocation's
 * own stream, or a stream again, changes nothing. A pointer that is not
 * outstanding (never allocated here, already freed, NULL) is ignored and
 * counted in unknown_records. Host memory records too (its free is immediate,
 * as host memory has no stream order).
 */
TETHER_API void tether_torch_record_stream(void* ptr, void* stream);

/**
 * torch.cuda.empty_cache (set_reset_fn: void()): give unused memory back
 * upstream (tether_resource_trim) in every bound resource and in the current
 * resource of the host and of every CUDA device (as the calling thread sees
 * it). Memory of CUDA graph pools that a graph still uses is never trimmed.
 */
TETHER_API void tether_torch_empty_cache(void);

/**
 * torch.cuda.set_per_process_memory_fraction (set_memory_fraction_fn:
 * void(double, int)): from now on an allocation on `device` that would take
 * the bytes these entry points hold on it beyond fraction x the device's total
 * memory (cuMemGetInfo; for TETHER_DEVICE_HOST the physical host memory)
 * fails as out of memory (see the header comment: thrown, or NULL for a
 * TETHER_TORCH_NULL_ON_FAILURE slot) and counts in num_ooms. Allocations below
 * the limit are unaffected, and so is memory already held. `fraction` must be
 * in [0, 1]; 1 still limits to the device's total. Ignored (with the reason
 * in the thread's error message) for a bad fraction or device.
 */
TETHER_API void tether_torch_set_memory_fraction(double fraction, int device);

/**
 * A PyTorch memory-pool id (c10::cuda::MempoolId_t: a std::pair of two
 * unsigned long long, which the C++ ABI passes by value like this struct).
 */
typedef struct tether_torch_mempool_id {
  uint64_t first;
  uint64_t second;
} tether_torch_mempool_id_t;

/**
 * CUDA graphs (set_begin_allocate_to_pool: void(int, MempoolId_t,
 * std::function<bool(cudaStream_t)>)): until the matching
 * tether_torch_end_allocate_to_pool, an allocation on `device` whose stream
 * `filter` accepts (for torch.cuda.graph: the streams of that capture) comes
 * from the private pool of `id`: memory that is never handed to an allocation
 * outside the pool's captures (later ones on the capture stream included)
 * until every graph using the pool released it (tether_torch_release_pool)
 * and its last allocation was freed. Graphs sharing an id share the pool
 * (torch.cuda.graph(g, pool=...)). The private pool takes memory with
 * cuMemAlloc of `device` (host memory for TETHER_DEVICE_HOST), with the
 * thread's capture mode relaxed as PyTorch's allocator does, so it may grow
 * during a capture; it does not come from a bound or current resource, since
 * a stream-ordered resource cannot grow inside a capture. Within the pool,
 * memory is reused in free order whatever the stream, as in PyTorch's
 * private pools.
 *
 * `filter` is PyTorch's C++ std::function object passed by value (the C++ ABI
 * passes its address); it is copied and called only by a libtether built
 * with libstdc++, the library PyTorch's Linux wheels use. Other builds throw
 * std::runtime_error here (PyTorch raises RuntimeError before the capture
 * starts). C callers use tether_torch_begin_allocate_to_pool_filter. This
 * function throws (C++ only) when the pool cannot be set up.
 */
TETHER_API void tether_torch_begin_allocate_to_pool(int device, tether_torch_mempool_id_t id, void* filter);

/** A stream filter for tether_torch_begin_allocate_to_pool_filter: nonzero routes the allocation on `stream` to the pool. */
typedef int (*tether_torch_stream_filter_t)(void* stream, void* user);

/**
 * tether_torch_begin_allocate_to_pool for C: `filter(stream, user)` decides
 * (called from the allocating thread during allocations until the matching
 * end; `user` is borrowed and must stay valid until then). Errors: INVALID_ARGUMENT (NULL filter, a
 * device that is neither a CUDA device nor TETHER_DEVICE_HOST), NO_DEVICE,
 * OUT_OF_MEMORY.
 */
TETHER_API tether_status_t tether_torch_begin_allocate_to_pool_filter(int device, tether_torch_mempool_id_t id,
                                                                      tether_torch_stream_filter_t filter,
                                                                      void* user);

/**
 * set_end_allocate_to_pool_fn (void(int, MempoolId_t)): stop routing to `id`'s
 * pool the allocations that the filters of its begin calls on `device` selected
 * (every begin of that device and id ends). The pool keeps its memory. Unknown
 * ids are ignored.
 */
TETHER_API void tether_torch_end_allocate_to_pool(int device, tether_torch_mempool_id_t id);

/**
 * set_release_pool (void(int, MempoolId_t)): one graph using `id`'s pool on
 * `device` lets go of it (one call per begin). Once every begin was released,
 * the pool returns its memory when its last allocation is freed (at once if
 * none is outstanding). Unknown ids are ignored.
 */
TETHER_API void tether_torch_release_pool(int device, tether_torch_mempool_id_t id);

/** Per-device figures of the PyTorch entry points (tether_torch_get_device_stats). */
typedef struct tether_torch_device_stats {
  uint32_t struct_size;              /**< sizeof(tether_torch_device_stats_t), set by the caller */
  uint64_t allocated_bytes;          /**< bytes allocated on the device and not freed */
  uint64_t peak_allocated_bytes;     /**< the most allocated_bytes has been */
  uint64_t reserved_bytes;           /**< allocated_bytes, plus the free bytes held by graph pools */
  uint64_t peak_reserved_bytes;      /**< the most reserved_bytes has been (seen at allocations) */
  uint64_t allocation_count;         /**< allocations not freed */
  uint64_t peak_allocation_count;    /**< the most allocation_count has been */
  uint64_t num_ooms;                 /**< allocations that failed for lack of memory (fraction limit included) */
  uint64_t num_alloc_retries;        /**< out-of-memory allocations retried after an empty_cache */
  uint64_t memory_limit;             /**< the fraction limit in bytes; UINT64_MAX: none */
  uint64_t graph_pools;              /**< graph pools of the device not yet released */
} tether_torch_device_stats_t;

/** Initialiser for tether_torch_device_stats_t. */
#define TETHER_TORCH_DEVICE_STATS_INIT { sizeof(tether_torch_device_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * Fill *out with `device`'s figures (a CUDA device id below 64, or
 * TETHER_DEVICE_HOST; struct_size set by the caller). Errors:
 * INVALID_ARGUMENT (device, NULL out), VERSION_MISMATCH.
 */
TETHER_API tether_status_t tether_torch_get_device_stats(int device, tether_torch_device_stats_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_TORCH_H */
