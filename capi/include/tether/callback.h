/*
 * tether/callback.h - a resource whose allocate/deallocate are user functions.
 *
 * Write a memory resource in any language that can export a C function (or in
 * Python: tether.CallbackResource) and use it like every tether resource: pool
 * it, adapt it, install it as the current resource, use it from C++.
 *
 * The resource records every allocation the allocate function handed out, so
 * frees are checked like every resource's: a pointer it did not hand out, one
 * already freed, or a free with a different size or alignment is refused with
 * TETHER_ERROR_INVALID_ARGUMENT before the deallocate function is called.
 */
#ifndef TETHER_CALLBACK_H
#define TETHER_CALLBACK_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The user functions of a callback resource. Initialise with
 * TETHER_CALLBACK_VTABLE_INIT or tether_callback_vtable_init(); fields are only
 * ever appended. `context` is the pointer given to tether_callback_resource_create().
 *
 * The functions may be called from any thread, several at once: they must be
 * thread-safe. They are called without any tether lock held, but a pool over
 * this resource may call allocate while holding the pool's lock, so they must
 * not use a resource built over this one. To report why they failed, call
 * tether_callback_set_error() before returning the status.
 */
typedef struct tether_callback_vtable {
  uint32_t struct_size;
  /**
   * Required. Store in *out memory of at least `size` bytes (never 0) aligned
   * to `alignment` (a power of two, already resolved: never 0), usable by work
   * ordered after `stream`, and return TETHER_OK; or return an error status
   * (TETHER_ERROR_OUT_OF_MEMORY when there is no memory: pools over this
   * resource then try to recover). Returning TETHER_OK with *out NULL counts as
   * out of memory; a misaligned pointer is given back to deallocate and
   * reported as TETHER_ERROR_INVALID_ARGUMENT.
   */
  tether_status_t (*allocate)(void* context, size_t size, size_t alignment, tether_stream_t stream,
                              void** out);
  /**
   * Required. Give back memory from allocate, with the size and alignment it
   * was allocated with. Return TETHER_OK, or an error status to refuse: the
   * allocation then stays live (the caller may try again) and the status is
   * returned to the caller of tether_resource_deallocate().
   */
  tether_status_t (*deallocate)(void* context, void* ptr, size_t size, size_t alignment,
                                tether_stream_t stream);
  /**
   * Optional (NULL: nothing to do). Called exactly once, with `context`, when
   * the resource is destroyed - after the last reference and the last
   * allocation are gone - on whichever thread that happens.
   */
  void (*destroy)(void* context);
} tether_callback_vtable_t;

#define TETHER_CALLBACK_VTABLE_INIT { sizeof(tether_callback_vtable_t), NULL, NULL, NULL }

/**
 * Set *vtable to the defaults (all functions NULL). struct_size is the caller's sizeof.
 * Errors: INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a struct_size smaller
 * than the first published layout.
 */
TETHER_API tether_status_t tether_callback_vtable_init(tether_callback_vtable_t* vtable, size_t struct_size);

/** Options of tether_callback_resource_create(). Initialise with TETHER_CALLBACK_OPTIONS_INIT. */
typedef struct tether_callback_options {
  uint32_t struct_size;
  /** The device whose memory allocate hands out, or TETHER_DEVICE_HOST (the default). */
  int32_t device;
  /** Nonzero if kernels on `device` may access the memory (default 0). */
  int32_t device_accessible;
  /** Nonzero if host code may access the memory (default 1). */
  int32_t host_accessible;
} tether_callback_options_t;

#define TETHER_CALLBACK_OPTIONS_INIT { sizeof(tether_callback_options_t), TETHER_DEVICE_HOST, 0, 1 }

/**
 * Set *options to the defaults (host memory, host-accessible). struct_size is the caller's sizeof.
 * Errors: INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a too small struct_size.
 */
TETHER_API tether_status_t tether_callback_options_init(tether_callback_options_t* options, size_t struct_size);

/**
 * A resource of kind TETHER_RESOURCE_KIND_CALLBACK ("callback") whose
 * allocate/deallocate call the functions of `vtable` with `context`.
 * `vtable` is copied (the caller's struct may go away); options may be NULL
 * (host memory). The properties say what the memory is: tether trusts them
 * (the current-resource table and the hooks check them).
 * Ownership of `context`: on success the resource owns it - destroy(context)
 * is called exactly once when the resource is destroyed, and the functions
 * may be called with it until then. On failure nothing is called and the
 * caller keeps it.
 * Errors: INVALID_ARGUMENT if vtable is NULL or allocate/deallocate is NULL,
 * or for a device below TETHER_DEVICE_HOST; VERSION_MISMATCH for a too small
 * struct_size. out: receives +1.
 */
TETHER_API tether_status_t tether_callback_resource_create(const tether_callback_vtable_t* vtable, void* context,
                                                           const tether_callback_options_t* options,
                                                           tether_resource_t** out);

/**
 * For use inside a vtable function that is about to fail: record `message`
 * (copied; NULL or "" for none) as the reason, so the failing call's error
 * message (tether_last_error_message() of the thread that called allocate or
 * deallocate) ends with it. Returns `status`, so a function can end with
 * `return tether_callback_set_error(TETHER_ERROR_OUT_OF_MEMORY, "arena full");`.
 * Only the calling thread's next callback failure uses it.
 */
TETHER_API tether_status_t tether_callback_set_error(tether_status_t status, const char* message);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_CALLBACK_H */
