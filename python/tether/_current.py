"""The process-wide current-resource table (tether/current.h), shared with C and C++.

One table lives inside libtether: what Python installs, C code in the same
process sees, and the reverse. tether.HOST is the host slot. device=None
means: for set_current_resource() and using(), the slot the resource's memory
belongs to (host memory -> tether.HOST, device memory -> its device, as the
C++ wrapper does); everywhere else the calling thread's current CUDA device
(as in RMM).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ._convert import HOST, device_value
from ._errors import NoDeviceError, check
from ._ffi import ffi, lib
from ._resources import Resource, handle_of, wrap_owned

_HINT = " (device=None means the current CUDA device; pass device=tether.HOST for the host slot)"


def _home_slot(resource: Resource | None, device: int | None) -> int:
    """The slot a set with ``device`` addresses: device=None follows the resource's memory."""
    if device is None and resource is not None:
        return resource.device  # TETHER_DEVICE_HOST for host memory (pinned included)
    return device_value(device)


def get_current_resource(device: int | None = None) -> Resource:
    """The resource current for ``device`` (a new wrapper with its own reference).

    A later set_current_resource() - from any thread or language - cannot free
    it under you. An unset slot yields its default (a HostResource for the host
    slot, a CudaResource for a device), created on first use.
    """
    out = ffi.new("tether_resource_t**")
    check(lib.tether_current_resource_get(device_value(device), out))
    return wrap_owned(out[0])


def set_current_resource(resource: Resource | None, device: int | None = None) -> Resource | None:
    """Install ``resource`` (None: back to the default) for ``device``; return the previous one.

    device=None installs it in the slot its memory belongs to: tether.HOST for
    host memory (pinned host memory included), the resource's device for device
    and managed memory; with resource=None it means the current CUDA device.
    The table keeps the resource alive. The previous resource comes back as a
    new wrapper, or None if the slot was unset. Raises LockedError if the slot
    was locked, InvalidArgumentError if the memory does not suit the slot.
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


def _resolve(device: int | None) -> int:
    if device is None:
        out = ffi.new("int*")
        check(lib.tether_cuda_get_current_device(out))
        return out[0]
    return device_value(device)


@contextlib.contextmanager
def using(resource: Resource, device: int | None = None) -> Iterator[Resource]:
    """``with tether.using(res, device=...):`` - res is current inside the block.

    The previous resource (or the unset default) is restored on exit, also when
    the block raises. device=None means the slot the resource's memory belongs
    to (see set_current_resource); it is resolved once, on entry.
    """
    slot = _resolve(device) if resource is None and device is None else _home_slot(resource, device)
    previous = set_current_resource(resource, slot)
    try:
        yield resource
    finally:
        replaced = set_current_resource(previous, slot)
        if replaced is not None:
            replaced.close()
        if previous is not None:
            previous.close()


def lock_current_resource(device: int | None = None) -> None:
    """Lock ``device``'s slot for the rest of the process: later sets raise LockedError.

    Irreversible (like choosing PyTorch's allocator). Locking an unset slot locks its default.
    """
    check(lib.tether_current_resource_lock(device_value(device)))


def is_current_resource_locked(device: int | None = None) -> bool:
    """True if ``device``'s slot was locked."""
    out = ffi.new("int*")
    check(lib.tether_current_resource_is_locked(device_value(device), out))
    return bool(out[0])


__all__ = ["HOST", "get_current_resource", "set_current_resource", "using",
           "lock_current_resource", "is_current_resource_locked"]
