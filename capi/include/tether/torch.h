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
 * tether_torch_deallocate. Throws on failure (see the header comment).
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
} tether_torch_stats_t;

/** Initialiser for tether_torch_stats_t. */
#define TETHER_TORCH_STATS_INIT { sizeof(tether_torch_stats_t), 0, 0, 0, 0, 0 }

/** Fill *out (struct_size set by the caller). Errors: INVALID_ARGUMENT, VERSION_MISMATCH. */
TETHER_API tether_status_t tether_torch_get_stats(tether_torch_stats_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_TORCH_H */
