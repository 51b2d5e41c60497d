/*
 * tether/aligned.h - the aligned adaptor: a larger alignment from a size on.
 *
 * Allocations of at least `threshold` bytes are aligned to at least
 * `alignment` (the caller's alignment if larger); smaller ones keep the
 * caller's. The adaptor asks its upstream for that alignment. A free applies
 * the same rule to its size and alignment, so give memory back with the size
 * and alignment you allocated it with, as for every resource (at or above
 * the threshold, alignments up to `alignment` all become `alignment` and
 * cannot be told apart, so a free naming another one of them is accepted;
 * one naming a larger alignment is refused). It accepts
 * frees only of memory it handed out (INVALID_ARGUMENT otherwise, nothing
 * changed). Thread-safe; works over host and CUDA upstreams.
 */
#ifndef TETHER_ALIGNED_H
#define TETHER_ALIGNED_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_aligned_adaptor_create(). Initialise with TETHER_ALIGNED_OPTIONS_INIT. */
typedef struct tether_aligned_options {
  uint32_t struct_size;
  /** The alignment given to large allocations: a power of two up to 1 GiB (default 256). */
  size_t alignment;
  /** Allocations of at least this many bytes get `alignment` (default 0: all of them). */
  size_t threshold;
} tether_aligned_options_t;

#define TETHER_ALIGNED_OPTIONS_INIT { sizeof(tether_aligned_options_t), TETHER_DEFAULT_ALIGNMENT, 0 }

/**
 * Set *options to the defaults; struct_size is the caller's sizeof.
 * INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a size below the first layout.
 */
TETHER_API tether_status_t tether_aligned_options_init(tether_aligned_options_t* options, size_t struct_size);

/**
 * An aligned adaptor over `upstream` (not taken: the adaptor retains it).
 * options may be NULL for the defaults.
 * Errors: INVALID_HANDLE for a bad upstream; INVALID_ARGUMENT naming
 * options.alignment if it is not a power of two in [1, 1 GiB].
 * out: receives +1.
 */
TETHER_API tether_status_t tether_aligned_adaptor_create(tether_resource_t* upstream,
                                                         const tether_aligned_options_t* options,
                                                         tether_resource_t** out);

/**
 * Fill *out (caller sets out->struct_size) with the options the adaptor was made with.
 * NOT_SUPPORTED if `resource` is not an aligned adaptor.
 */
TETHER_API tether_status_t tether_aligned_adaptor_get_options(tether_resource_t* resource,
                                                              tether_aligned_options_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_ALIGNED_H */
