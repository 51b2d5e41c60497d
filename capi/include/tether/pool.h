/*
 * tether/pool.h - the pool resource: a coalescing suballocator over an upstream.
 *
 * A pool takes memory from its upstream in chunks and carves them into
 * blocks; free blocks coalesce with their free neighbours, and
 * tether_resource_trim() gives wholly free chunks back. Allocation,
 * deallocation and refcounting go through tether/resource.h like any resource.
 */
#ifndef TETHER_POOL_H
#define TETHER_POOL_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_pool_resource_create(). Initialise with TETHER_POOL_OPTIONS_INIT. */
typedef struct tether_pool_options {
  uint32_t struct_size;
  /** Bytes taken from upstream when the pool is created (0: none). */
  size_t initial_size;
  /** The pool never holds more than this from upstream (0: no limit). */
  size_t maximum_size;
  /** Smallest chunk the pool asks upstream for when it grows (0: the default, 1 MiB); a
   *  growth step is also at least a sixteenth of what the pool already holds. */
  size_t growth_size;
} tether_pool_options_t;

#define TETHER_POOL_OPTIONS_INIT { sizeof(tether_pool_options_t), 0, 0, 0 }

/**
 * Set *options to the defaults. struct_size is the caller's sizeof, so a program
 * built against older headers keeps working.
 * Returns TETHER_ERROR_INVALID_ARGUMENT for NULL, TETHER_ERROR_VERSION_MISMATCH if
 * struct_size is smaller than the first published layout.
 */
TETHER_API tether_status_t tether_pool_options_init(tether_pool_options_t* options, size_t struct_size);

/**
 * What a pool holds. Initialise struct_size (TETHER_POOL_INFO_INIT).
 *
 * Like every info struct, it only grows at the end. tether writes the fields
 * that fit in the caller's struct_size and nothing past it, so a program built
 * against an older header (a smaller struct_size) keeps working: it gets the
 * fields it knows. struct_size must be at least the first published size,
 * TETHER_POOL_INFO_FIRST_SIZE (up to and including chunk_count).
 */
typedef struct tether_pool_info {
  uint32_t struct_size;
  /** Bytes the pool holds from its upstream. */
  uint64_t pool_size;
  /** Bytes of pool_size not allocated to anyone. */
  uint64_t free_bytes;
  /** The largest block that could be handed out without growing. */
  uint64_t largest_free_block;
  /** Chunks held from upstream. */
  uint64_t chunk_count;
  /**
   * Free blocks: the pieces free_bytes is split into - 1 for an unfragmented
   * pool used from one stream, more as frees leave holes (or as streams take
   * slabs of a CUDA pool), 0 when nothing is free. Appended after the first
   * release: not written for a struct_size below
   * offsetof(tether_pool_info_t, free_blocks) + 8.
   */
  uint64_t free_blocks;
} tether_pool_info_t;

#define TETHER_POOL_INFO_INIT { sizeof(tether_pool_info_t), 0, 0, 0, 0, 0 }

/** The size of tether_pool_info_t as first published (before free_blocks). */
#define TETHER_POOL_INFO_FIRST_SIZE 40

/**
 * A coalescing pool over `upstream` (not taken: the pool retains it itself).
 * options may be NULL for the defaults. Allocations are carved from chunks
 * obtained from upstream (at least growth_size each, at most maximum_size in
 * all); tether_resource_trim() gives wholly free chunks back.
 *
 * When upstream is a CUDA resource the pool is stream-ordered. A block freed
 * on stream A is reused on A at once. A request on stream B that B's own free
 * blocks cannot serve is served, in this order, by: memory no stream has used
 * yet (no wait; a large initial_size is handed to the streams in slabs that
 * grow with each stream's use, so threads on different streams do not share
 * a lock); memory another stream A freed and has covered by an event
 * recorded after the free - B then waits on that event (cuStreamWaitEvent:
 * the host does not block, and A's handle is never used again, since A may
 * have been destroyed meanwhile) - where, in a pool without a maximum_size
 * that has not run out of memory, only a chunk of A's that is wholly free
 * (B takes it whole) or memory A received from frees of blocks other streams
 * allocated (as much as it received) is taken before growing, and other
 * pieces of A's partly used chunks only after growing failed; growing from
 * upstream; and only when growing fails, every stream's free memory - B
 * waits on each stream's event, or synchronises the whole device once if
 * some of those frees are not covered by an event yet - and finally wholly
 * free chunks given back and exactly the needed size asked for. A stream
 * records its event every 64 frees, or at its next free once another stream
 * asked for its memory; a pool with a maximum_size, and any pool after it
 * first ran out of memory, records at every free. trim() and the pool's
 * destruction make stream 0 wait on every stream's event (synchronising the
 * whole device once only if some frees are not covered by an event yet) and
 * give chunks back on stream 0.
 *
 * Errors: INVALID_HANDLE if upstream is NULL or stale; INVALID_ARGUMENT if
 * initial_size > maximum_size, or maximum_size is between 1 and 255 (below
 * the pool's 256-byte granule: such a pool could never allocate);
 * OUT_OF_MEMORY if initial_size cannot be obtained. out: receives +1.
 */
TETHER_API tether_status_t tether_pool_resource_create(tether_resource_t* upstream,
                                                       const tether_pool_options_t* options,
                                                       tether_resource_t** out);

/**
 * Fill *out (caller-owned; the caller sets out->struct_size) with what the
 * pool holds: the fields that fit in out->struct_size, nothing past them.
 * Errors: INVALID_HANDLE for a NULL or stale resource; INVALID_ARGUMENT for a
 * NULL out; VERSION_MISMATCH, naming struct_size, for a struct_size below
 * TETHER_POOL_INFO_FIRST_SIZE; NOT_SUPPORTED for a resource that is not a pool.
 */
TETHER_API tether_status_t tether_resource_get_pool_info(tether_resource_t* resource,
                                                         tether_pool_info_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_POOL_H */
