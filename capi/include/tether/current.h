/*
 * tether/current.h - the process-wide current-resource table.
 *
 * One table lives inside libtether, so every caller in a process - Python, C,
 * C++, any language - sees the same slots. There is one slot per CUDA device
 * and one host slot (TETHER_DEVICE_HOST). An unset slot reads as its default:
 * a host resource for the host slot, a CUDA resource of that device for a
 * device slot; the default is created on first use and kept in the slot.
 * Loading tether changes no slot and no other library's allocator.
 */
#ifndef TETHER_CURRENT_H
#define TETHER_CURRENT_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * *out receives +1 on the resource current for `device` (a device id,
 * TETHER_DEVICE_HOST or TETHER_DEVICE_CURRENT). Because it is owned, a later
 * tether_current_resource_set() from any thread cannot free it under the caller.
 * Errors: INVALID_ARGUMENT (bad device id, NULL out), NO_DEVICE.
 */
TETHER_API tether_status_t tether_current_resource_get(int device, tether_resource_t** out);

/**
 * Atomically install `resource` (retained by the table, not taken; NULL restores
 * the default) as current for `device`. The resource that was current is handed
 * to the caller as +1 in *out_previous, or released if out_previous is NULL
 * (*out_previous is NULL if the slot was unset). LOCKED if the slot is locked;
 * INVALID_ARGUMENT if the resource's memory is not usable as `device`'s
 * (device memory of another device in a device slot, device-only memory in the
 * host slot).
 */
TETHER_API tether_status_t tether_current_resource_set(int device, tether_resource_t* resource,
                                                       tether_resource_t** out_previous);

/**
 * Lock `device`'s slot: from now on tether_current_resource_set() on it fails with
 * TETHER_ERROR_LOCKED, from every caller. Irreversible for the process (like
 * PyTorch's allocator, which can be chosen once). Locking an unset slot locks its default.
 */
TETHER_API tether_status_t tether_current_resource_lock(int device);

/** *out = 1 if `device`'s slot is locked. */
TETHER_API tether_status_t tether_current_resource_is_locked(int device, int* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_CURRENT_H */
