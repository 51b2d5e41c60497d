/*
 * tether/buffer.h - buffers: allocations that own their memory.
 *
 * A buffer retains the resource it was allocated from and, when its last
 * reference is released, frees its memory into that resource on the buffer's
 * stream - never into "whatever resource is current now". Buffers may be
 * released before or after their resource, from any thread.
 */
#ifndef TETHER_BUFFER_H
#define TETHER_BUFFER_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a buffer is. Initialise struct_size (TETHER_BUFFER_INFO_INIT). */
typedef struct tether_buffer_info {
  uint32_t struct_size;
  /** Start of the memory (NULL for a 0-byte buffer). Valid while the buffer is alive. */
  void* ptr;
  /** Size in bytes. */
  size_t size;
  /** The stream the memory is ordered on (and will be freed on). */
  tether_stream_t stream;
  /** The device of the memory, or TETHER_DEVICE_HOST. */
  int32_t device;
  /** Nonzero if kernels may access the memory. */
  int32_t device_accessible;
  /** Nonzero if host code may access the memory. */
  int32_t host_accessible;
} tether_buffer_info_t;

#define TETHER_BUFFER_INFO_INIT { sizeof(tether_buffer_info_t), NULL, 0, 0, 0, 0, 0 }

/**
 * Allocate a buffer of `size` bytes (TETHER_DEFAULT_ALIGNMENT) on `stream`.
 * resource: the resource to allocate from (retained by the buffer, not taken);
 *           NULL means the current resource of `device` (see tether/current.h),
 *           in which case `device` is a device id, TETHER_DEVICE_HOST or
 *           TETHER_DEVICE_CURRENT. `device` is ignored when resource is not NULL.
 * out: receives +1.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT, OUT_OF_MEMORY, NO_DEVICE.
 */
TETHER_API tether_status_t tether_buffer_create(tether_resource_t* resource, int device,
                                                size_t size, tether_stream_t stream,
                                                tether_buffer_t** out);

/** Add one reference. INVALID_HANDLE if NULL or stale. Touches no error state. */
TETHER_API tether_status_t tether_buffer_retain(tether_buffer_t* buffer);

/**
 * Drop one reference; the last one frees the memory into the buffer's resource
 * on its stream and releases the buffer's reference to that resource.
 * NULL is a no-op. INVALID_HANDLE for a stale handle. Touches no error state.
 */
TETHER_API tether_status_t tether_buffer_release(tether_buffer_t* buffer);

/** Fill *out (caller sets out->struct_size). */
TETHER_API tether_status_t tether_buffer_get_info(tether_buffer_t* buffer, tether_buffer_info_t* out);

/** *out = start of the memory. */
TETHER_API tether_status_t tether_buffer_get_ptr(tether_buffer_t* buffer, void** out);

/** *out = size in bytes. */
TETHER_API tether_status_t tether_buffer_get_size(tether_buffer_t* buffer, size_t* out);

/** *out = the resource the buffer came from: borrowed (valid while the buffer is alive). */
TETHER_API tether_status_t tether_buffer_get_resource(tether_buffer_t* buffer, tether_resource_t** out);

/**
 * Order the buffer on a new stream: later frees and copies use `stream`. The
 * caller is responsible for ordering `stream` after work on the old stream.
 */
TETHER_API tether_status_t tether_buffer_set_stream(tether_buffer_t* buffer, tether_stream_t stream);

/**
 * Mark the buffer's memory as used on `stream` too (PyTorch's record_stream):
 * when the buffer is freed (its last release, or a resize that replaces its
 * memory), that memory is handed out again - on any stream, the buffer's own
 * included - only once every recorded stream has finished the work enqueued
 * on it before the free. The free never blocks the host: an event is recorded
 * on each recorded stream (and on the buffer's stream), and the resource
 * keeps the memory until the events are complete; its later allocations hand
 * it out once they are (an out-of-memory retry and tether_resource_trim wait
 * for them). Until then the memory still counts as allocated in the resource
 * and its adaptors.
 *
 * Each recorded stream must still exist when the buffer is freed (as with
 * PyTorch). Recording the buffer's own stream, the default stream (0) or a
 * stream already recorded is allowed and records it once. A resize keeps the
 * recorded streams for the new memory too. Host-only memory (a host resource,
 * a pool over one) has no streams to wait for: a no-op that still checks the
 * handle. Errors: INVALID_HANDLE (a released, stale or forged buffer), and
 * OUT_OF_MEMORY if the list of streams cannot grow.
 */
TETHER_API tether_status_t tether_buffer_record_stream(tether_buffer_t* buffer, tether_stream_t stream);

/**
 * Copy `size` bytes from host memory `src` into the buffer at `offset`, ordered
 * on the buffer's stream; returns once the copy is complete (src may be reused).
 * `src` may overlap the buffer's own (host) memory: the copy is then done as if
 * through a temporary (memmove), as tether_buffer_copy does for one buffer.
 * INVALID_ARGUMENT if offset + size exceeds the buffer.
 */
TETHER_API tether_status_t tether_buffer_copy_from_host(tether_buffer_t* buffer, size_t offset,
                                                        const void* src, size_t size);

/** Copy `size` bytes at `offset` of the buffer into host memory `dst`; returns when complete. */
TETHER_API tether_status_t tether_buffer_copy_to_host(tether_buffer_t* buffer, size_t offset,
                                                      void* dst, size_t size);

/**
 * Copy `size` bytes from src (at src_offset) to dst (at dst_offset), ordered on
 * dst's stream; asynchronous for device memory. Buffers may be on different devices.
 */
TETHER_API tether_status_t tether_buffer_copy(tether_buffer_t* dst, size_t dst_offset,
                                              tether_buffer_t* src, size_t src_offset, size_t size);

/**
 * Change the buffer's size to new_size: new memory is allocated from the same
 * resource, min(old, new) bytes are copied, the old memory is freed on the
 * buffer's stream. The handle stays the same; earlier pointers become invalid.
 * INVALID_ARGUMENT, and nothing changes, while the buffer is pinned
 * (tether_buffer_pin): someone still uses the memory at the current pointer.
 * On failure the buffer is unchanged.
 */
TETHER_API tether_status_t tether_buffer_resize(tether_buffer_t* buffer, size_t new_size);

/**
 * Pin the buffer's memory for an export (a view, a DLPack tensor, a pointer
 * handed to another library): adds one reference AND one pin. While any pin
 * is held, tether_buffer_resize fails with INVALID_ARGUMENT whoever calls it
 * (any handle of the buffer, any language), so the memory at the current
 * pointer stays valid until the matching tether_buffer_unpin.
 * Ownership: the caller owns the reference and the pin it gets (+1 each) and
 * gives both back with one tether_buffer_unpin; tether_buffer_release must not
 * be used for them.
 * Errors: INVALID_HANDLE if NULL or stale (with the thread's error message).
 */
TETHER_API tether_status_t tether_buffer_pin(tether_buffer_t* buffer);

/**
 * Give back one pin and the reference that came with it (see tether_buffer_pin);
 * the last reference frees the buffer as tether_buffer_release does. Safe from
 * any thread, also from a destructor. Touches no error state.
 * Errors: INVALID_HANDLE if NULL or stale; INVALID_ARGUMENT if the buffer
 * holds no pin (an unbalanced unpin: nothing is released).
 */
TETHER_API tether_status_t tether_buffer_unpin(tether_buffer_t* buffer);

/** *out = the number of pins held on the buffer now (0: resize is allowed). */
TETHER_API tether_status_t tether_buffer_get_pin_count(tether_buffer_t* buffer, size_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_BUFFER_H */
