/*
 * tether/binning.h - the binning resource: requests routed by size to bins.
 *
 * A request of n bytes goes to the smallest bin whose size is at least n and
 * that honours its alignment (a fixed-size bin honours alignments up to its
 * blocks' alignment); a request that no bin takes - larger than every bin,
 * or aligned beyond them - goes to the fallback (by default the upstream). A bin added without a resource is a fixed-size
 * resource (tether/fixed_size.h) of the bin's size over the upstream.
 */
#ifndef TETHER_BINNING_H
#define TETHER_BINNING_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_binning_resource_create(). Initialise with TETHER_BINNING_OPTIONS_INIT. */
typedef struct tether_binning_options {
  uint32_t struct_size;
  /** Fixed-size bins of 2^min_size_exponent .. 2^max_size_exponent bytes (both 0: no bins). */
  uint32_t min_size_exponent;
  uint32_t max_size_exponent;
  /** Blocks per upstream chunk of the fixed-size bins this resource creates (0: 128). */
  size_t blocks_to_preallocate;
  /** Serves requests above every bin (borrowed; the binning resource retains it). NULL: the upstream. */
  tether_resource_t* fallback;
} tether_binning_options_t;

#define TETHER_BINNING_OPTIONS_INIT { sizeof(tether_binning_options_t), 0, 0, 0, NULL }

/**
 * Set *options to the defaults (struct_size is the caller's sizeof).
 * INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a struct_size below the first published layout.
 */
TETHER_API tether_status_t tether_binning_options_init(tether_binning_options_t* options, size_t struct_size);

/** What a binning resource routes. Initialise struct_size (TETHER_BINNING_INFO_INIT). */
typedef struct tether_binning_info {
  uint32_t struct_size;
  /** Bins added so far. */
  uint64_t bin_count;
  /** The smallest bin's size (0 without bins). */
  uint64_t smallest_bin;
  /** The largest bin's size: larger requests go to the fallback (0 without bins). */
  uint64_t largest_bin;
} tether_binning_info_t;

#define TETHER_BINNING_INFO_INIT { sizeof(tether_binning_info_t), 0, 0, 0 }

/**
 * A binning resource over `upstream`. Neither upstream nor options->fallback
 * is taken: the binning resource retains both (and every bin resource added
 * later) for as long as it lives. options may be NULL (no bins, the upstream
 * as fallback). Bins only ever get added. Frees go to the resource that
 * served the allocation, which refuses memory it did not hand out
 * (INVALID_ARGUMENT, nothing changed). Stream order is that of the bins and
 * the fallback. Errors: INVALID_ARGUMENT for exponents with min > max or
 * max > 40, or a fallback whose memory differs from the upstream's (device,
 * accessibility). out: receives +1.
 */
TETHER_API tether_status_t tether_binning_resource_create(tether_resource_t* upstream,
                                                          const tether_binning_options_t* options,
                                                          tether_resource_t** out);

/**
 * Add a bin for requests up to `size` bytes, served by `bin_resource`
 * (borrowed; retained by the binning resource) or, if it is NULL, by a new
 * fixed-size resource of `size` over the upstream. Allocations made before
 * are still freed correctly. Errors: NOT_SUPPORTED if `resource` is not a
 * binning resource; INVALID_ARGUMENT for size 0, a size that already has a
 * bin, or a bin resource whose memory differs from the upstream's;
 * OUT_OF_MEMORY if a new fixed-size bin cannot take its first chunk.
 */
TETHER_API tether_status_t tether_binning_resource_add_bin(tether_resource_t* resource, size_t size,
                                                           tether_resource_t* bin_resource);

/** What a binning resource routes; NOT_SUPPORTED for other resources. */
TETHER_API tether_status_t tether_binning_get_info(tether_resource_t* resource, tether_binning_info_t* out);

/**
 * The bin sizes in ascending order: up to `capacity` of them are written to
 * `sizes` (which may be NULL when capacity is 0), and *count receives how many
 * bins there are. NOT_SUPPORTED for other resources; INVALID_ARGUMENT for a
 * NULL count, or NULL sizes with a capacity.
 */
TETHER_API tether_status_t tether_binning_get_bin_sizes(tether_resource_t* resource, size_t* sizes,
                                                        size_t capacity, size_t* count);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_BINNING_H */
