"""tether.Buffer: an allocation that owns its memory (a tether_buffer_t handle).

A buffer keeps the resource it came from alive and frees into it - never into
whatever is current at the time. Exports (memoryview, numpy via
``__array_interface__``, DLPack) each hold their *own* pin of the C buffer
(``tether_buffer_pin``: a reference, and resize refused), so the memory stays
valid and in place while any of them is alive, even after ``close()`` or
``del`` of the Buffer, and whoever asks for a resize - another wrapper of the
handle, C code. ``__cuda_array_interface__`` cannot carry a reference: its
consumers keep the Buffer object alive, so the first one pins the buffer for
as long as this wrapper is open, and must not outlive an explicit close().
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import operator
from typing import Any, TypeVar, cast

from ._convert import (CURRENT_DEVICE, IPC_HANDLE_SIZE, DeviceLike, Size, StreamLike, device_value, handle_value,
                       ipc_handle_value, parse_size, stream_value)
from ._errors import InvalidArgumentError, NoDeviceError, PinnedError, check, closed_error, error_for, stale_handle_error
from ._ffi import ffi, lib
from ._handle import Handle
from ._resources import Resource, wrap_borrowed

# DLPack device types (DLDeviceType).
kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
_DLPACK_FLAG_IS_COPIED = 1 << 1

# The two calls of the hot path keep the GIL when libtether's quick path
# serves them, and release it otherwise (python/ffibuild.py says why that is safe).
_create = lib._tether_py_gil_buffer_create
_release = lib._tether_py_gil_buffer_release
_last_status = lib._tether_py_last_status
_gc = ffi.gc
_HOST = lib.TETHER_DEVICE_HOST
_W = TypeVar("_W")


class Buffer(Handle):
    """``size`` bytes (an int or a string like "64 KiB") from a tether resource.

    resource: the resource to allocate from; None means the current resource
    of ``device`` (None: the current CUDA device; tether.HOST: the host slot).
    stream: where the allocation (and the eventual free) is ordered - None (the
    default stream), an int, or any object with ``__cuda_stream__``.
    """

    # _pin: the pin this wrapper holds for exports that carry no lifetime of
    # their own (__cuda_array_interface__, hooks that set _exported): an ffi.gc
    # cdata whose destructor is tether_buffer_unpin, dropped by close() or with
    # the wrapper. Views and DLPack tensors hold pins of their own instead.
    __slots__ = ("_pin",)
    _release = lib._tether_py_gil_buffer_release

    def __init__(self, size: Size, resource: Resource | None = None, device: DeviceLike | None = None,
                 stream: StreamLike = None) -> None:
        # The hot path (an int size, a resource, no stream) runs the fewest
        # bytecodes: one isinstance, one cffi call (see tether_py.h), no helper call.
        if size.__class__ is not int or size < 0:
            size = parse_size(size)
        if resource is not None:
            if not isinstance(resource, Resource):
                raise TypeError(f"resource must be a tether resource, not {type(resource).__name__}")
            rh = resource._h
            if rh is None:
                raise closed_error(resource)
            s = 0 if stream is None else stream_value(stream)
            try:
                h = _create(rh, 0, size, s)
            except OverflowError:
                raise ValueError(f"size {size} does not fit in size_t") from None
            if h:
                self._h = h
                return
            raise error_for(_last_status())
        dev = CURRENT_DEVICE if device is None else device_value(device)
        s = 0 if stream is None else stream_value(stream)
        try:
            h = _create(ffi.NULL, dev, size, s)
        except OverflowError:
            raise ValueError(f"size {size} does not fit in size_t") from None
        if not h:
            err = error_for(_last_status())
            if device is None and isinstance(err, NoDeviceError):
                err = NoDeviceError(str(err) + " (device=None means the current CUDA device;"
                                    " pass device=tether.HOST for host memory)")
            raise err
        self._h = h

    def __del__(self) -> None:
        # Handle.close without its method lookups: this runs once per Buffer.
        # A pin this wrapper holds (_pin) is dropped with the object's slots
        # afterwards; the pin has a reference of its own.
        try:
            h = self._h
        except AttributeError:  # __init__ failed before the handle existed
            return
        if h is not None:
            self._h = None
            _release(h)

    @classmethod
    def from_handle(cls, handle: int, *, owned: bool = False) -> "Buffer":
        """Wrap a C ``tether_buffer_t*`` given as an int (e.g. made by C code).

        owned=False (default): borrowed; the Buffer takes its own reference.
        owned=True: the Buffer takes over the caller's reference.
        """
        raw = ffi.cast("tether_buffer_t*", handle_value(handle))
        if owned:
            size = ffi.new("size_t*")
            check(lib.tether_buffer_get_size(raw, size))  # refuse a dead handle before adopting it
        elif lib.tether_buffer_retain(raw):
            raise stale_handle_error("Buffer.from_handle", raw, "buffer")
        obj = cls.__new__(cls)
        obj._h = raw
        return obj

    # ---- queries --------------------------------------------------------------

    def _info(self, h: Any = None) -> Any:
        info = ffi.new("tether_buffer_info_t*")
        info.struct_size = ffi.sizeof("tether_buffer_info_t")
        self._check(lib.tether_buffer_get_info(self._live() if h is None else h, info))
        return info

    @property
    def pin_count(self) -> int:
        """How many exports pin the memory now (``tether_buffer_get_pin_count``); resize needs 0."""
        out = ffi.new("size_t*")
        self._check(lib.tether_buffer_get_pin_count(self._live(), out))
        return int(out[0])

    @property
    def _exported(self) -> bool:
        """True while this wrapper holds its own pin (see __slots__)."""
        return getattr(self, "_pin", None) is not None

    @_exported.setter
    def _exported(self, value: bool) -> None:
        # Kept for the hook modules, which mark a Buffer exported: that now pins it in C.
        if value:
            self._hold_pin()

    def _hold_pin(self) -> None:
        """Pin the memory for as long as this wrapper is open (once per wrapper)."""
        if getattr(self, "_pin", None) is None:
            h = self._live()
            self._check(lib.tether_buffer_pin(h))
            self._pin = _gc(ffi.cast("tether_buffer_t*", h), lib.tether_buffer_unpin)

    def close(self) -> None:
        """Give this object's reference (and its pin, if an export took one) back. Idempotent."""
        self._pin = None  # the ffi.gc destructor unpins
        # Handle.close, written out (one Python call less on the hot path); the
        # same read-and-clear of _h without a call in between, so of two racing
        # close() calls exactly one releases.
        try:
            h = self._h
        except AttributeError:  # __init__ failed before the handle existed
            return
        if h is not None:
            self._h = None
            _release(h)

    @property
    def size(self) -> int:
        """Size in bytes."""
        out = ffi.new("size_t*")
        self._check(lib.tether_buffer_get_size(self._live(), out))
        return int(out[0])

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Size in bytes (same as ``size``)."""
        return self.size

    @property
    def ptr(self) -> int:
        """Address of the memory (0 for a 0-byte buffer). Valid while the buffer is open."""
        out = ffi.new("void**")
        self._check(lib.tether_buffer_get_ptr(self._live(), out))
        return int(ffi.cast("uintptr_t", out[0]))

    @property
    def resource(self) -> Resource:
        """The resource the buffer came from (a new wrapper holding its own reference)."""
        out = ffi.new("tether_resource_t**")
        self._check(lib.tether_buffer_get_resource(self._live(), out))
        return wrap_borrowed(out[0])

    @property
    def device(self) -> int:
        """The device of the memory, or tether.HOST (-1) for host memory."""
        return int(self._info().device)

    @property
    def stream(self) -> int:
        """The stream the memory is ordered on (and will be freed on)."""
        return int(self._info().stream)

    @property
    def device_accessible(self) -> bool:
        """True if kernels may access the memory."""
        return bool(self._info().device_accessible)

    @property
    def host_accessible(self) -> bool:
        """True if host code may access the memory (then it exports the buffer protocol)."""
        return bool(self._info().host_accessible)

    # ---- changes --------------------------------------------------------------

    def set_stream(self, stream: StreamLike) -> None:
        """Order the buffer on ``stream`` from now on (the caller orders it after the old one)."""
        self._check(lib.tether_buffer_set_stream(self._live(), stream_value(stream)))

    def record_stream(self, stream: StreamLike) -> None:
        """Mark the memory as used on ``stream`` too, as ``torch.Tensor.record_stream`` does.

        When the buffer is freed (its last reference, ``close()``, or a
        ``resize`` that replaces its memory), the memory is handed out again -
        on any stream, the buffer's own included - only after ``stream`` has
        finished the work enqueued on it before the free. The free never
        blocks: an event is recorded on each recorded stream and the resource
        keeps the memory until they are complete (it still counts as
        allocated meanwhile; ``trim()`` and an out-of-memory retry wait for
        it). ``stream`` must still exist when the buffer is freed. Recording
        the buffer's own stream, the default stream or a stream twice is
        allowed; for host-only memory this is a no-op. ``stream``: None, an
        int, or an object with ``__cuda_stream__``.
        """
        self._check(lib.tether_buffer_record_stream(self._live(), stream_value(stream)))

    def resize(self, new_size: Size) -> None:
        """Reallocate to ``new_size`` bytes from the same resource, keeping the common prefix.

        Earlier ``ptr`` values become invalid. Raises PinnedError (a BufferError
        and a ValueError) while the memory is exported - a live memoryview,
        numpy array or DLPack tensor of it, or ``__cuda_array_interface__`` of a
        still-open wrapper - through any wrapper of the handle or from C,
        because the consumer could still be using the old memory.
        """
        h = self._live()
        status = lib.tether_buffer_resize(h, parse_size(new_size, "new_size"))
        if status:
            err = closed_error(self) if self._h is None else error_for(status)
            if status == lib.TETHER_ERROR_INVALID_ARGUMENT:
                pins = ffi.new("size_t*")
                if lib.tether_buffer_get_pin_count(h, pins) == lib.TETHER_OK and pins[0]:
                    raise PinnedError(str(err), status) from None
            raise err

    # ---- sharing with other processes ------------------------------------------

    def export_ipc(self, stream: StreamLike = None) -> bytes:
        """Share this buffer's device memory with another process (CUDA IPC).

        Returns ``tether.IPC_HANDLE_SIZE`` bytes to send to the other process
        any way bytes travel (pickle, a pipe, a Dask message); there
        :py:func:`tether.import_ipc` maps the same memory. Nothing is
        transferred: this buffer still owns the memory and must stay alive
        (not closed, not collected) until every importer has closed its
        imported buffer - a free in the exporter while another process maps
        the memory is undefined in CUDA. From now on :py:meth:`resize` is
        refused (ValueError).

        ``stream``: None, or a stream (an int, or an object with
        ``__cuda_stream__``) on which work that writes the buffer was
        enqueued: an interprocess event is recorded on it, and ``import_ipc``
        waits for it, so the importer sees that work done. With None nothing
        is recorded: make sure the writes are complete (synchronise) before
        the importer reads.

        Device memory from a ``cuda`` resource, or a pool, arena, binning or
        adaptor over one, can be shared. Raises NotSupportedError (a
        NotImplementedError) with the reason for host, pinned-host and managed
        memory, an ``async`` resource created without
        ``ipc_handle_type="posix_fd"`` and memory the driver refuses;
        NoDeviceError without CUDA; ValueError for a 0-byte buffer. Memory of
        a ``posix_fd`` async pool is shared through the pool's file
        descriptor, which importers need too (:py:mod:`tether.ipc`).
        """
        out = ffi.new("tether_ipc_handle_t*")
        self._check(lib.tether_buffer_export_ipc(self._live(), 0 if stream is None else stream_value(stream), out))
        return bytes(ffi.buffer(out.data, IPC_HANDLE_SIZE))

    # ---- copies ---------------------------------------------------------------

    def copy_from_host(self, src: object, offset: Size = 0) -> None:
        """Copy the bytes of ``src`` (bytes, bytearray, memoryview, a contiguous numpy array...)
        into the buffer at ``offset``. Returns when the copy is complete."""
        h = self._live()
        offset = parse_size(offset, "offset")
        try:
            data = ffi.from_buffer(src)
        except TypeError:
            raise TypeError(f"src must be a bytes-like object (bytes, bytearray, memoryview, a contiguous "
                            f"numpy array...), not {type(src).__name__}") from None
        self._check(lib.tether_buffer_copy_from_host(h, offset, data, len(data)))

    def copy_to_host(self, out: _W | None = None, offset: Size = 0, size: Size | None = None) -> _W | bytearray:
        """Copy bytes of the buffer (from ``offset``) to host memory; returns when complete.

        out=None: returns a new bytearray of ``size`` bytes (default: up to the end).
        Otherwise ``out`` is a writable buffer (bytearray, numpy array, memoryview)
        that receives ``size`` bytes (default: len of out in bytes); returns ``out``.
        """
        h = self._live()
        offset = parse_size(offset, "offset")
        target: Any = out
        if out is None:
            have = self.size
            n = max(have - offset, 0) if size is None else parse_size(size)
            if offset > have or n > have - offset:  # before allocating n bytes for nothing
                raise InvalidArgumentError(f"copy_to_host: offset {offset} + size {n} exceeds the buffer's {have} bytes")
            target = bytearray(n)
        try:
            dst = ffi.from_buffer(target, require_writable=True)
        except (TypeError, BufferError):  # not a buffer, or a read-only one (bytes)
            raise TypeError(f"out must be a writable bytes-like object (bytearray, numpy array, memoryview...), "
                            f"not {'read-only ' if isinstance(target, (bytes, memoryview)) else ''}"
                            f"{type(target).__name__}") from None
        n = len(dst) if size is None else parse_size(size)
        if n > len(dst):
            raise ValueError(f"out has {len(dst)} bytes, fewer than size={n}")
        self._check(lib.tether_buffer_copy_to_host(h, offset, dst, n))
        return cast("_W | bytearray", target)

    def tobytes(self) -> bytes:
        """The buffer's contents as bytes (a copy)."""
        return bytes(self.copy_to_host())

    def copy_from(self, src: "Buffer", size: Size | None = None) -> None:
        """Copy ``size`` bytes (default: all of src) from buffer ``src`` to the start of this one.

        Ordered on this buffer's stream; asynchronous for device memory.
        """
        if not isinstance(src, Buffer):
            raise TypeError(f"src must be a tether.Buffer, not {type(src).__name__}")
        n = src.size if size is None else parse_size(size)
        self._check(lib.tether_buffer_copy(self._live(), 0, src._live(), 0, n))

    # ---- exports: memoryview / numpy ---------------------------------------------

    def memoryview(self) -> memoryview:
        """A writable memoryview of host-accessible memory, without copying.

        The view holds its own pin (a reference; resize refused meanwhile): the
        memory stays valid and in place while the view (or anything made from
        it) lives, whatever happens to this object.
        """
        h = self._live()  # read once: a close() on another thread cannot change it under us
        # The view's pin first, so no resize can move the memory between the info and the view.
        self._check(lib.tether_buffer_pin(h))
        try:
            info = self._info(h)
        except BaseException:
            lib.tether_buffer_unpin(h)
            raise
        if not info.host_accessible or info.size == 0:
            lib.tether_buffer_unpin(h)
            if info.size == 0 and info.host_accessible:
                return memoryview(bytearray())
            raise BufferError("the buffer's memory is not host-accessible (device memory); "
                              "use DLPack or __cuda_array_interface__, or copy_to_host()")
        # The gc'd data pointer gives the pin back when the last view of it dies.
        data = _gc(ffi.cast("char*", info.ptr), functools.partial(lib._tether_py_release_view, h))
        return memoryview(ffi.buffer(data, info.size))

    def __buffer__(self, flags: int) -> builtins.memoryview:
        """PEP 688 (Python >= 3.12): ``memoryview(buf)``, ``bytes(buf)``; same as memoryview()."""
        return self.memoryview()

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """The numpy array interface (v3) of host-accessible memory: 1-D uint8, zero-copy.

        'data' is a memoryview (see memoryview()), which numpy keeps as the
        array's base: the array keeps the memory alive on its own.
        """
        if not self.host_accessible:
            raise AttributeError("device memory has no __array_interface__; use __cuda_array_interface__ or DLPack")
        view = self.memoryview()
        return {"version": 3, "shape": (len(view),), "typestr": "|u1", "data": view, "strides": None}

    # ---- exports: CUDA ----------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA array interface (v3) of device-accessible memory: 1-D uint8.

        'stream' is the buffer's stream for the consumer to synchronise with;
        the default stream (0 in tether) is reported as 1, the CAI value of the
        legacy default stream (0 is not allowed by the protocol).
        """
        info = self._info()
        if not info.device_accessible:
            raise AttributeError("host memory has no __cuda_array_interface__; use numpy, memoryview or DLPack")
        self._hold_pin()
        info = self._info()  # pinned now: this is the memory that stays
        return {"version": 3, "shape": (info.size,), "typestr": "|u1",
                "data": (int(ffi.cast("uintptr_t", info.ptr)), False), "strides": None,
                "stream": info.stream if info.stream != 0 else 1}

    # ---- exports: DLPack ---------------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        """(device type, device id) in DLPack terms: (1, 0) host, (2, d) CUDA device,
        (3, 0) pinned host, (13, d) managed."""
        return _dl_device(self, self._info())

    def __dlpack__(self, *, stream: StreamLike = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> object:
        """A DLPack capsule of the bytes as a 1-D uint8 tensor (array API / DLPack 1.0 protocol).

        The tensor holds its own reference to the memory, given back by its
        deleter (or by the capsule if nobody consumed it). stream: the
        consumer's stream (None: legacy default, -1: no synchronisation); if it
        differs from the buffer's stream, the buffer's stream is synchronised
        first. copy=True exports a copy; dl_device other than the buffer's own
        device is supported for the host (kDLCPU) only (a copy).
        """
        versioned = _dlpack_versioned(max_version)
        if dl_device is not None:
            dl_device = _dlpack_device_argument(dl_device)
        if stream is not None and stream != -1:
            stream_value(stream)  # a bad stream fails here, before any copy
        info = self._info()
        dev = _dl_device(self, info)
        source = self
        flags = 0
        if dl_device is not None and tuple(dl_device) != dev:
            if copy is False:
                raise BufferError(f"the buffer is on DLPack device {dev}, not {tuple(dl_device)}, and copy=False")
            if tuple(dl_device) != (kDLCPU, 0):
                raise BufferError(f"cannot export to DLPack device {tuple(dl_device)} (only to the host, as a copy)")
            source = Buffer(info.size, device=_HOST)
            self.copy_to_host(source.memoryview())
            dev, flags = (kDLCPU, 0), _DLPACK_FLAG_IS_COPIED
        elif copy:
            with self.resource as resource:
                source = Buffer(info.size, resource=resource, stream=info.stream)
            source.copy_from(self)
            flags = _DLPACK_FLAG_IS_COPIED
        if dev[0] != kDLCPU:
            _sync_for_consumer(dev, source._info(), stream)
        tensor = lib._tether_py_dlpack_new(source._live(), versioned, dev[0], dev[1], flags)
        if not tensor:
            raise error_for(_last_status())
        try:
            return _capsule_new(int(ffi.cast("uintptr_t", tensor)), _CAPSULE_NAMES[versioned], _CAPSULE_DESTRUCTOR)
        except BaseException:
            lib._tether_py_dlpack_discard(tensor, versioned)
            raise

    # ---- misc -------------------------------------------------------------------

    def __repr__(self) -> str:
        if getattr(self, "_h", None) is None:
            return "<tether.Buffer (closed)>"
        info = self._info()
        where = "host" if info.device == _HOST else f"device {info.device}"
        return f"<tether.Buffer {info.size} bytes, {where}, ptr=0x{int(ffi.cast('uintptr_t', info.ptr)):x}>"

def _dlpack_versioned(max_version: Any) -> int:
    """1 for a DLManagedTensorVersioned (the consumer accepts DLPack >= 1.0), 0 for the legacy struct."""
    if max_version is None:
        return 0
    try:
        major, _minor = max_version
        major, _minor = operator.index(major), operator.index(_minor)
    except (TypeError, ValueError):
        raise TypeError(f"max_version must be None or a (major, minor) tuple of ints, not {max_version!r}") from None
    return 1 if major >= 1 else 0


def _dlpack_device_argument(dl_device: Any) -> tuple[int, int]:
    try:
        device_type, device_id = dl_device
        return (operator.index(device_type), operator.index(device_id))
    except (TypeError, ValueError):
        raise TypeError(f"dl_device must be None or a (device_type, device_id) tuple of ints, "
                        f"not {dl_device!r}") from None


def _leaf_kind(buffer: Buffer) -> int:
    """The kind of the resource at the end of the buffer's upstream chain."""
    r = buffer.resource
    while True:
        up = r.upstream
        if up is None:
            return int(r._kind)
        r.close()
        r = up


def _dl_device(buffer: Buffer, info: Any) -> tuple[int, int]:
    host, dev_acc = bool(info.host_accessible), bool(info.device_accessible)
    if host and not dev_acc:
        return (kDLCPU, 0)
    if dev_acc and not host:
        return (kDLCUDA, info.device)
    kind = _leaf_kind(buffer)  # both: pinned host or managed
    if kind == lib.TETHER_RESOURCE_KIND_MANAGED or (kind != lib.TETHER_RESOURCE_KIND_PINNED_HOST and info.device >= 0):
        return (kDLCUDAManaged, max(info.device, 0))
    return (kDLCUDAHost, 0)


def _sync_for_consumer(dev: tuple[int, int], info: Any, stream: StreamLike) -> None:
    """Make the memory safe to use on the consumer's stream (DLPack stream semantics)."""
    if stream == -1:
        return  # the consumer asked for no synchronisation
    consumer = 1 if stream is None else stream_value(stream)
    ours = info.stream
    legacy = {0, 1}  # tether's 0 is the legacy default stream, DLPack's 1
    if consumer == ours or (consumer in legacy and ours in legacy):
        return
    # No cross-stream event API in the C ABI: waiting for our stream is conservative and correct.
    device = info.device if info.device >= 0 else (dev[1] if dev[0] != kDLCUDAHost else 0)
    check(lib.tether_cuda_stream_synchronize(device, ours))


# PyCapsule_New through ctypes (cffi cannot return a PyObject*); the name and
# the destructor are static C data of the extension, so they outlive every capsule.
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_CAPSULE_NAMES = tuple(int(ffi.cast("uintptr_t", lib._tether_py_dlpack_capsule_name(v))) for v in (0, 1))
_CAPSULE_DESTRUCTOR = lib._tether_py_dlpack_capsule_destructor()


def import_ipc(data: object, device: DeviceLike | None = None, fd: int | None = None) -> Buffer:
    """Map device memory that another process exported with :py:meth:`Buffer.export_ipc`.

    ``data``: the exported bytes (any bytes-like object of
    ``tether.IPC_HANDLE_SIZE`` bytes; ValueError naming ``data`` for another
    length or bytes that are no tether IPC handle). ``device``: the CUDA
    device whose context maps the memory; None maps it on the GPU that holds
    it, found by its UUID (device numbers differ between processes with
    different ``CUDA_VISIBLE_DEVICES``); another device maps it through peer
    access. If the export was given a stream, this waits until the
    exporter's work on it before the export is done.

    Returns a new device Buffer of the exported size on the default stream.
    It works like any device buffer (copies, ``__cuda_array_interface__``,
    DLPack), except that :py:meth:`Buffer.resize` raises NotSupportedError
    and it cannot be exported again. Closing it (or its collection) waits
    for the device's work and unmaps the memory; the exporter's memory is not
    freed. Raises NoDeviceError without CUDA or when the exporter's GPU is not
    visible, CudaError when the driver cannot map the memory (the exporter
    exited or freed it, or this is the exporting process).

    ``fd``: for memory of an async pool created with
    ``ipc_handle_type="posix_fd"``, a file descriptor (in this process) of
    the exporter's pool, e.g. from :py:func:`tether.ipc.recv_handle`. It is
    borrowed (not closed) and used only when this process has not imported
    that pool yet. Without it tether takes the descriptor from the exporter
    with ``pidfd_getfd`` where the kernel permits, and raises
    NotSupportedError saying why where it does not. See :doc:`/ipc`.
    """
    raw = ipc_handle_value(data)
    if fd is not None and (isinstance(fd, bool) or not isinstance(fd, int)):
        raise TypeError(f"fd must be an int file descriptor or None, not {type(fd).__name__}")
    dev = CURRENT_DEVICE if device is None else device_value(device)
    handle = ffi.new("tether_ipc_handle_t*")
    ffi.memmove(handle.data, raw, IPC_HANDLE_SIZE)
    out = ffi.new("tether_buffer_t**")
    check(lib.tether_buffer_import_ipc_fd(handle, -1 if fd is None else fd, dev, out))
    obj = Buffer.__new__(Buffer)
    obj._h = out[0]
    return obj
