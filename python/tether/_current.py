"""The process-wide current-resource table (tether/current.h), shared with C and C++.

One table lives inside libtether: what Python installs, C code in the same
process sees, and the reverse. tether.HOST is the host slot. device=None
means: for set_current_resource(), set_current_resource_if_unset(),
push_current_resource() and using(), the slot the resource's memory belongs to
(host memory -> tether.HOST, device memory -> its device, as the C++ wrapper
does); everywhere else the calling thread's current CUDA device (as in RMM).

Who chooses: applications set (and perhaps lock) the process slot; libraries
get, or install a default with set_current_resource_if_unset(), which never
overrides the application's choice; scoped use (``with tether.using(...)``)
pushes a per-thread override that only the calling thread sees.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ._convert import CURRENT_DEVICE, HOST, DeviceLike, device_value
from ._errors import NoDeviceError, check
from ._ffi import ffi, lib
from ._resources import Resource, handle_of, wrap_owned

_HINT = " (device=None means the current CUDA device; pass device=tether.HOST for the host slot)"


def _home_slot(resource: Resource | None, device: DeviceLike | None) -> int:
    """The slot a set with ``device`` addresses: device=None follows the resource's memory."""
    if device is None and resource is not None:
        return resource.device  # TETHER_DEVICE_HOST for host memory (pinned included)
    return device_value(device)


def get_current_resource(device: DeviceLike | None = None) -> Resource:
    """The resource current for ``device`` (a new wrapper with its own reference).

    On a thread inside a using() block (or after push_current_resource()) for
    the slot, that thread's override; else the process slot's resource. A later
    set_current_resource() or pop - from any thread or language - cannot free
    it under you. An unset slot yields its default (a HostResource for the host
    slot, a CudaResource for a device), created on first use.
    """
    out = ffi.new("tether_resource_t**")
    check(lib.tether_current_resource_get(device_value(device), out))
    return wrap_owned(out[0])


def set_current_resource(resource: Resource | None, device: DeviceLike | None = None) -> Resource | None:
    """Install ``resource`` (None: back to the default) for ``device``; return the previous one.

    device=None installs it in the slot its memory belongs to: tether.HOST for
    host memory (pinned host memory included), the resource's device for device
    and managed memory; with resource=None it means the current CUDA device.
    The table keeps the resource alive. The previous resource comes back as a
    new wrapper, or None if the slot was unset. This changes the process slot:
    a thread inside a using() block keeps seeing its override until the block
    ends. Installing a resource marks the slot as set (set_current_resource_if_unset()
    then installs nothing there); None makes it unset again. Raises LockedError
    if the slot was locked, InvalidArgumentError if the memory does not suit
    the slot.
    """
    rh = ffi.NULL if resource is None else handle_of(resource)
    out = ffi.new("tether_resource_t**")
    status = lib.tether_current_resource_set(_home_slot(resource, device), rh, out)
    if status:
        try:
            check(status)
        except NoDeviceError as e:
            if device is None and resource is not None and not resource.device_accessible:
                raise NoDeviceError(str(e) + _HINT) from None
            raise
    return wrap_owned(out[0]) if out[0] else None


def _check_for(status: int, resource: Resource, device: DeviceLike | None) -> None:
    """check(status), with a hint when device=None led to a NoDeviceError."""
    if status:
        try:
            check(status)
        except NoDeviceError as e:
            if device is None and not resource.device_accessible:
                raise NoDeviceError(str(e) + _HINT) from None
            raise


def _resource_argument(resource: object, function: str) -> object:
    """The live handle of ``resource``; None is refused with a TypeError naming the argument."""
    if resource is None:
        raise TypeError(f"{function}(): resource must be a tether resource, not None")
    return handle_of(resource)


def set_current_resource_if_unset(resource: Resource, device: DeviceLike | None = None) -> bool:
    """Install ``resource`` for ``device`` only if no one has set that slot; True if it did.

    The library-safe way to choose a resource: an application's explicit
    set_current_resource() always wins, and a lock as well (a locked slot
    installs nothing). The slot's default, even once created, does not count
    as set; set_current_resource(None, device) makes a slot unset again. Like
    set_current_resource(), it changes the process slot (every thread), keeps
    the resource alive, and device=None means the slot the resource's memory
    belongs to. Raises TypeError for resource=None, InvalidArgumentError if the
    memory does not suit the slot.
    """
    rh = _resource_argument(resource, "set_current_resource_if_unset")
    out = ffi.new("int*")
    _check_for(lib.tether_current_resource_set_if_unset(_home_slot(resource, device), rh, out),
               resource, device)
    return bool(out[0])


def push_current_resource(resource: Resource, device: DeviceLike | None = None) -> None:
    """Make ``resource`` current for ``device`` on the calling thread only, until popped.

    Pushes onto the thread's override stack for the slot (inside libtether, so
    C and C++ code on this thread sees it too); other threads keep seeing the
    process slot. The stack keeps the resource alive. device=None means the
    slot the resource's memory belongs to. Raises TypeError for resource=None,
    LockedError if the slot is locked, InvalidArgumentError if the memory does
    not suit the slot. Prefer ``with tether.using(...)``, which pops for you.
    """
    rh = _resource_argument(resource, "push_current_resource")
    _check_for(lib.tether_current_resource_push(_home_slot(resource, device), rh), resource, device)


def pop_current_resource(device: DeviceLike | None = None) -> None:
    """Pop the calling thread's top override for ``device`` (pushed by push_current_resource()).

    device=None is the current CUDA device, as for get_current_resource();
    pass tether.HOST for the host slot. Always allowed, also on a locked slot.
    Raises InvalidArgumentError (a ValueError) if this thread pushed nothing
    for that slot.
    """
    check(lib.tether_current_resource_pop(device_value(device)))


def _resolve(device: int) -> int:
    """A slot with CURRENT_DEVICE replaced by the calling thread's current CUDA device."""
    if device == CURRENT_DEVICE:
        out = ffi.new("int*")
        check(lib.tether_cuda_get_current_device(out))
        return int(out[0])
    return device


def _current_is(slot: int, handle: object) -> bool:
    """True if the calling thread's current resource for ``slot`` is ``handle``."""
    out = ffi.new("tether_resource_t**")
    if lib.tether_current_resource_get(slot, out) != lib.TETHER_OK:
        return False
    same = out[0] == handle
    lib.tether_resource_release(out[0])
    return bool(same)


@contextlib.contextmanager
def using(resource: Resource, device: DeviceLike | None = None) -> Iterator[Resource]:
    """``with tether.using(res, device=...):`` - res is current inside the block, on this thread.

    Pushes ``res`` on the calling thread's override stack for the slot on entry
    and pops it on exit, also when the block raises. Only the calling thread
    sees it (C and C++ code on that thread included); other threads keep seeing
    the process slot, and blocks in different threads may overlap freely. A
    set_current_resource() meanwhile changes the process slot, not this
    override. device=None means the slot the resource's memory belongs to (see
    set_current_resource); the slot is resolved once, on entry. Raises
    TypeError for resource=None (to go back to a slot's default, use
    set_current_resource(None, device)), LockedError if the slot is locked.

    using() is per thread, not per asyncio task or generator (like CuPy's
    using_allocator): blocks must nest on each thread. If, on exit, this
    block's resource is no longer the thread's current one for the slot (say,
    two asyncio tasks interleaved their blocks on one thread), the top override
    is popped anyway, so the stack stays balanced, and RuntimeError is raised.
    """
    rh = _resource_argument(resource, "using")
    slot = _resolve(_home_slot(resource, device))
    _check_for(lib.tether_current_resource_push(slot, rh), resource, device)
    try:
        yield resource
    finally:
        nested = _current_is(slot, rh)
        status = lib.tether_current_resource_pop(slot)
        if not nested:
            name = "the host slot" if slot == HOST else f"device {slot}"
            raise RuntimeError(
                f"tether.using(): on leaving the block, its resource was no longer current for {name} "
                "on this thread: using() blocks must nest per thread (they are per thread, not per "
                "asyncio task or generator); the thread's top override was popped anyway")
        check(status)


def lock_current_resource(device: DeviceLike | None = None) -> None:
    """Lock ``device``'s slot for the rest of the process: later sets raise LockedError.

    Irreversible (like choosing PyTorch's allocator). Locking an unset slot locks
    its default (set_current_resource_if_unset() then installs nothing). Later
    pushes (using()) on the slot raise LockedError too; overrides pushed before
    the lock stay until popped.
    """
    check(lib.tether_current_resource_lock(device_value(device)))


def is_current_resource_locked(device: DeviceLike | None = None) -> bool:
    """True if ``device``'s slot was locked."""
    out = ffi.new("int*")
    check(lib.tether_current_resource_is_locked(device_value(device), out))
    return bool(out[0])


__all__ = ["HOST", "get_current_resource", "set_current_resource", "set_current_resource_if_unset",
           "push_current_resource", "pop_current_resource", "using",
           "lock_current_resource", "is_current_resource_locked"]
