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

#ifdef __cplusplus
}
#endif
#endif /* TETHER_STATISTICS_H */
