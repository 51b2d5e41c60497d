/*
 * tether/fixed_size.h - the fixed-size resource: blocks of one size.
 *
 * Every request of at most block_size bytes gets one whole block; blocks are
 * carved from chunks of blocks_to_preallocate blocks taken from the upstream
 * (one chunk at creation, another whenever every block is in use).
 */
#ifndef TETHER_FIXED_SIZE_H
#define TETHER_FIXED_SIZE_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_fixed_size_resource_create(). Initialise with TETHER_FIXED_SIZE_OPTIONS_INIT. */
typedef struct tether_fixed_size_options {
  uint32_t struct_size;
  /** Bytes of every block, rounded up to a multiple of 256 (default 1 MiB; 0 is INVALID_ARGUMENT). */
  size_t block_size;
  /** Blocks per chunk taken from upstream, at creation and at every refill (default 128; 0: 1). */
  size_t blocks_to_preallocate;
} tether_fixed_size_options_t;

#define TETHER_FIXED_SIZE_OPTIONS_INIT { sizeof(tether_fixed_size_options_t), 1048576, 128 }

/**
 * Set *options to the defaults (struct_size is the caller's sizeof).
 * INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a struct_size below the first published layout.
 */
TETHER_API tether_status_t tether_fixed_size_options_init(tether_fixed_size_options_t* options,
                                                          size_t struct_size);

/** What a fixed-size resource holds. Initialise struct_size (TETHER_FIXED_SIZE_INFO_INIT). */
typedef struct tether_fixed_size_info {
  uint32_t struct_size;
  /** Bytes of every block (after rounding). */
  uint64_t block_size;
  /** Every block is aligned to this (the largest power of two dividing block_size, at most 1 MiB). */
  uint64_t block_alignment;
  /** Blocks held from upstream. */
  uint64_t total_blocks;
  /** Of those, blocks not handed out. */
  uint64_t free_blocks;
  /** Chunks held from upstream. */
  uint64_t chunk_count;
} tether_fixed_size_info_t;

#define TETHER_FIXED_SIZE_INFO_INIT { sizeof(tether_fixed_size_info_t), 0, 0, 0, 0, 0 }

/**
 * A fixed-size resource over `upstream` (not taken: the resource retains it
 * itself). options may be NULL for the defaults. A request larger than
 * block_size is OUT_OF_MEMORY naming the size (no block is that large; put
 * the resource under a binning resource to serve mixed sizes); an alignment
 * above block_alignment is INVALID_ARGUMENT. Frees are checked (size, alignment, pointer).
 * tether_resource_trim() gives back chunks whose blocks are all free. Over a
 * CUDA upstream a block freed on stream A is reused on A at once and by
 * another stream only after one device synchronisation (when growing failed,
 * or at trim). Errors: INVALID_ARGUMENT (block_size 0 or above 1 TiB),
 * OUT_OF_MEMORY if the first chunk cannot be obtained. out: receives +1.
 */
TETHER_API tether_status_t tether_fixed_size_resource_create(tether_resource_t* upstream,
                                                             const tether_fixed_size_options_t* options,
                                                             tether_resource_t** out);

/** What a fixed-size resource holds; NOT_SUPPORTED for other resources. */
TETHER_API tether_status_t tether_fixed_size_get_info(tether_resource_t* resource,
                                                      tether_fixed_size_info_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_FIXED_SIZE_H */
