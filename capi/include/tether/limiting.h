/*
 * tether/limiting.h - the limiting adaptor: a byte limit over an upstream.
 *
 * The adaptor forwards to its upstream while the bytes it has handed out and
 * not yet taken back stay within `limit`. Bytes are counted as requested (not
 * rounded to the alignment). A request that would pass the limit fails with
 * TETHER_ERROR_OUT_OF_MEMORY and changes nothing (the upstream is not asked).
 * Exact under concurrent threads: no interleaving of calls passes the limit.
 * It accepts frees only of memory it handed out (INVALID_ARGUMENT otherwise,
 * nothing changed). Thread-safe; works over host and CUDA upstreams.
 */
#ifndef TETHER_LIMITING_H
#define TETHER_LIMITING_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_limiting_adaptor_create(). Initialise with TETHER_LIMITING_OPTIONS_INIT. */
typedef struct tether_limiting_options {
  uint32_t struct_size;
  /** The most bytes the adaptor hands out at once (default 0: every request fails). */
  size_t limit;
} tether_limiting_options_t;

#define TETHER_LIMITING_OPTIONS_INIT { sizeof(tether_limiting_options_t), 0 }

/**
 * Set *options to the defaults; struct_size is the caller's sizeof.
 * INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a size below the first layout.
 */
TETHER_API tether_status_t tether_limiting_options_init(tether_limiting_options_t* options, size_t struct_size);

/**
 * A limiting adaptor over `upstream` (not taken: the adaptor retains it).
 * options may be NULL for the defaults (a limit of 0).
 * Errors: INVALID_HANDLE for a bad upstream, INVALID_ARGUMENT for NULL out,
 * VERSION_MISMATCH for a bad options->struct_size. out: receives +1.
 */
TETHER_API tether_status_t tether_limiting_adaptor_create(tether_resource_t* upstream,
                                                          const tether_limiting_options_t* options,
                                                          tether_resource_t** out);

/**
 * *out = the bytes the adaptor has handed out and not yet taken back.
 * NOT_SUPPORTED if `resource` is not a limiting adaptor; INVALID_ARGUMENT for NULL out.
 */
TETHER_API tether_status_t tether_limiting_adaptor_get_used_bytes(tether_resource_t* resource, uint64_t* out);

/** *out = the adaptor's limit in bytes. NOT_SUPPORTED if `resource` is not a limiting adaptor. */
TETHER_API tether_status_t tether_limiting_adaptor_get_limit(tether_resource_t* resource, uint64_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_LIMITING_H */
