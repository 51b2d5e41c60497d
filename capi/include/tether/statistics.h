/*
 * tether/statistics.h - the statistics adaptor: counts what passes through it.
 *
 * The adaptor forwards every allocation and free to its upstream and counts
 * bytes and allocations (current, peak, total). Allocation, deallocation and
 * refcounting go through tether/resource.h like any resource.
 */
#ifndef TETHER_STATISTICS_H
#define TETHER_STATISTICS_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Counters kept by a statistics adaptor. Initialise struct_size (TETHER_STATISTICS_INIT). */
typedef struct tether_statistics {
  uint32_t struct_size;
  /** Bytes allocated and not yet freed. */
  uint64_t current_bytes;
  /** Highest value current_bytes has had. */
  uint64_t peak_bytes;
  /** Bytes ever allocated. */
  uint64_t total_bytes;
  /** Allocations not yet freed. */
  uint64_t current_count;
  /** Highest value current_count has had. */
  uint64_t peak_count;
  /** Allocations ever made. */
  uint64_t total_count;
} tether_statistics_t;

#define TETHER_STATISTICS_INIT { sizeof(tether_statistics_t), 0, 0, 0, 0, 0, 0 }

/**
 * An adaptor that forwards to `upstream` (retained by the adaptor) and counts
 * bytes and allocations; read them with tether_resource_get_statistics().
 * out: receives +1.
 */
TETHER_API tether_status_t tether_statistics_adaptor_create(tether_resource_t* upstream,
                                                            tether_resource_t** out);

/** Counters of a statistics adaptor; NOT_SUPPORTED for other resources. */
TETHER_API tether_status_t tether_resource_get_statistics(tether_resource_t* resource,
                                                          tether_statistics_t* out);

/** Reset peak_bytes / peak_count of a statistics adaptor to the current values. */
TETHER_API tether_status_t tether_resource_reset_peak_statistics(tether_resource_t* resource);

/**
 * Push a new, zeroed counter set on a statistics adaptor's counter stack
 * (as RMM's push_counters). While it is on top, allocations and frees
 * through the adaptor change only it, and tether_resource_get_statistics()
 * reads it. The stack belongs to the adaptor, not to a thread.
 * NOT_SUPPORTED for other resources.
 */
TETHER_API tether_status_t tether_statistics_adaptor_push_counters(tether_resource_t* resource);

/**
 * Pop the top counter set, write it to *out (caller sets out->struct_size;
 * out may be NULL to discard it), and fold it into the set below:
 * below.peak = max(below.peak, below.current + popped.peak),
 * below.current += popped.current, below.total += popped.total (for bytes
 * and counts). A set's current_* counts allocations made while it was on top
 * minus all frees made while it was on top, so it can be negative if older
 * memory was freed meanwhile; it is reported as 0 then, and folded exactly.
 * Errors: NOT_SUPPORTED for other resources; INVALID_ARGUMENT if only the
 * first set is left (nothing was pushed) - nothing changes then.
 */
TETHER_API tether_status_t tether_statistics_adaptor_pop_counters(tether_resource_t* resource,
                                                                  tether_statistics_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_STATISTICS_H */
