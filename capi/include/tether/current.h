/*
 * tether/current.h - the process-wide current-resource table.
 *
 * One table lives inside libtether, so every caller in a process - Python, C,
 * C++, any language - sees the same slots. There is one slot per CUDA device
 * and one host slot (TETHER_DEVICE_HOST). An unset slot reads as its default:
 * a host resource for the host slot, a CUDA resource of that device for a
 * device slot; the default is created on first use and kept in the slot.
 * Loading tether changes no slot and no other library's allocator.
 *
 * Three ways to choose a resource, by who is choosing:
 *  - applications set (tether_current_resource_set, then perhaps _lock): the
 *    process slot, seen by every thread;
 *  - libraries get, or install a default with tether_current_resource_set_if_unset,
 *    which never overrides the application's choice;
 *  - scoped use pushes (tether_current_resource_push / _pop): a per-thread
 *    override stack per slot. While a thread's stack for a slot is non-empty,
 *    tether_current_resource_get on that thread returns its top; every other
 *    thread keeps seeing the process slot. Pushes and pops on one thread must
 *    nest per slot.
 * Every call here is atomic with respect to the others, from any thread.
 * TETHER_DEVICE_CURRENT is resolved at each call (the calling thread's current
 * CUDA device then), so pop the slot you pushed: pass the same device id.
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
 * TETHER_DEVICE_HOST or TETHER_DEVICE_CURRENT): the top of the calling
 * thread's override stack for that slot if it has pushed one, else the process
 * slot's resource. Because it is owned, a later tether_current_resource_set()
 * or _pop() from any thread cannot free it under the caller.
 * Errors: INVALID_ARGUMENT (bad device id, NULL out), NO_DEVICE.
 */
TETHER_API tether_status_t tether_current_resource_get(int device, tether_resource_t** out);

/**
 * Atomically install `resource` (retained by the table, not taken; NULL restores
 * the default) as current for `device`. The resource that was current is handed
 * to the caller as +1 in *out_previous, or released if out_previous is NULL
 * (*out_previous is NULL if the slot held nothing yet: neither an installed
 * resource nor the default an earlier get created; that default, once
 * created, is handed back like any other). LOCKED if the slot is locked;
 * INVALID_ARGUMENT if the resource's memory is not usable as `device`'s
 * (device memory of another device in a device slot, device-only memory in the
 * host slot). Changes the process slot only: a thread that has pushed an
 * override for the slot keeps seeing its override until it pops it. A non-NULL
 * resource marks the slot as set (tether_current_resource_set_if_unset then
 * installs nothing); NULL makes it unset again.
 */
TETHER_API tether_status_t tether_current_resource_set(int device, tether_resource_t* resource,
                                                       tether_resource_t** out_previous);

/**
 * Lock `device`'s slot: from now on tether_current_resource_set() on it fails with
 * TETHER_ERROR_LOCKED, from every caller. Irreversible for the process (like
 * PyTorch's allocator, which can be chosen once). Locking an unset slot locks its default
 * (so tether_current_resource_set_if_unset installs nothing there either). New
 * pushes onto a locked slot fail with LOCKED; overrides pushed before the lock
 * stay until their thread pops them.
 */
TETHER_API tether_status_t tether_current_resource_lock(int device);

/** *out = 1 if `device`'s slot is locked. */
TETHER_API tether_status_t tether_current_resource_is_locked(int device, int* out);

/**
 * Library-safe default: install `resource` as current for `device`'s process
 * slot only if no one has explicitly set that slot and it is not locked. The
 * slot's lazily created default does not count as set; a set with NULL makes
 * the slot unset again; an earlier set_if_unset that installed counts as set.
 * If it installs, the table retains `resource` (the caller's reference is not
 * taken) and the default it replaces, if one was created, loses the table's
 * reference (holders of +1 references from get keep theirs). *out_installed
 * (may be NULL) = 1 if it installed, 0 if not; both return TETHER_OK.
 * Errors: INVALID_ARGUMENT (NULL resource, bad device id, memory not usable as
 * `device`'s - the rule of tether_current_resource_set), NO_DEVICE.
 */
TETHER_API tether_status_t tether_current_resource_set_if_unset(int device, tether_resource_t* resource,
                                                                int* out_installed);

/**
 * Push `resource` on the calling thread's override stack for `device`'s slot:
 * until it is popped, tether_current_resource_get(device) on this thread
 * returns it; other threads keep seeing the process slot. The stack retains
 * `resource` (the caller keeps its own reference). Errors: INVALID_ARGUMENT
 * (NULL resource, bad device id, memory not usable as `device`'s - the rule
 * of tether_current_resource_set), LOCKED (the slot is locked: the
 * application fixed it, and an override would circumvent that), NO_DEVICE.
 * Overrides a thread still holds when it exits are released then (during
 * process exit, as any release then: device memory is leaked, not freed).
 */
TETHER_API tether_status_t tether_current_resource_push(int device, tether_resource_t* resource);

/**
 * Pop the top of the calling thread's override stack for `device`'s slot and
 * release the stack's reference to it (references the caller holds are
 * unaffected). Always allowed, also on a locked slot. INVALID_ARGUMENT if this
 * thread has nothing pushed for that slot ("nothing was pushed for device N
 * on this thread"), or a bad device id.
 */
TETHER_API tether_status_t tether_current_resource_pop(int device);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_CURRENT_H */
