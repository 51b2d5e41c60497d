/*
 * tether/failure_callback.h - an adaptor that asks a user function what to do
 * when its upstream is out of memory.
 *
 * The classic use is spilling: the function frees memory it knows can go
 * (copies data to disk or host, drops caches) and asks for a retry.
 */
#ifndef TETHER_FAILURE_CALLBACK_H
#define TETHER_FAILURE_CALLBACK_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Called when an allocation of `size` bytes failed with out-of-memory; return
 * nonzero to try the allocation again, 0 to let it fail with
 * TETHER_ERROR_OUT_OF_MEMORY. Called on the allocating thread, with no lock of
 * the adaptor held, possibly from several threads at once; it may free memory
 * of any resource, including memory allocated through this adaptor.
 * Returning nonzero without freeing anything retries forever.
 */
typedef int (*tether_failure_callback_t)(size_t size, void* user);

/** Options of tether_failure_callback_adaptor_create(). Initialise with TETHER_FAILURE_CALLBACK_OPTIONS_INIT. */
typedef struct tether_failure_callback_options {
  uint32_t struct_size;
  /** Required: the function to call on out-of-memory. */
  tether_failure_callback_t callback;
  /** Passed to callback and destroy. */
  void* user;
  /**
   * Optional: called exactly once with `user` when the adaptor is destroyed
   * (and never if creation fails: the caller keeps `user` then).
   */
  void (*destroy)(void* user);
} tether_failure_callback_options_t;

#define TETHER_FAILURE_CALLBACK_OPTIONS_INIT { sizeof(tether_failure_callback_options_t), NULL, NULL, NULL }

/**
 * Set *options to the defaults (no callback). struct_size is the caller's sizeof.
 * Errors: INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a too small struct_size.
 */
TETHER_API tether_status_t tether_failure_callback_options_init(tether_failure_callback_options_t* options,
                                                                size_t struct_size);

/**
 * An adaptor that forwards to `upstream` (retained by the adaptor); when the
 * upstream reports out-of-memory it calls options->callback(size, user) and
 * retries while that returns nonzero. Other errors are returned at once.
 * Errors: INVALID_HANDLE for a bad upstream; INVALID_ARGUMENT if options or
 * options->callback is NULL. out: receives +1.
 */
TETHER_API tether_status_t tether_failure_callback_adaptor_create(tether_resource_t* upstream,
                                                                  const tether_failure_callback_options_t* options,
                                                                  tether_resource_t** out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_FAILURE_CALLBACK_H */
