"""tether.Buffer: an allocation that owns its memory (a tether_buffer_t handle).

A buffer keeps the resource it came from alive and frees into it - never into
whatever is current at the time. Exports (memoryview, numpy via
``__array_interface__``, DLPack) each hold their *own* reference to the C
buffer, so the memory stays valid while any of them is alive, even after
``close()`` or ``del`` of the Buffer. ``__cuda_array_interface__`` cannot carry
a reference: its consumers keep the Buffer object alive, and must not outlive
an explicit close().
"""

from __future__ import annotations

import ctypes
import functools

from ._convert import CURRENT_DEVICE, device_value, parse_size, stream_value
from ._errors import NoDeviceError, check, closed_error, error_for
from ._ffi import ffi, lib
from ._handle import Handle
from ._resources import Resource, ResourceKind, wrap_borrowed

# DLPack device types (DLDeviceType).
kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
_DLPACK_FLAG_IS_COPIED = 1 << 1

_create = lib._tether_py_buffer_create
_last_status = lib._tether_py_last_status
_gc = ffi.gc
_HOST = lib.TETHER_DEVICE_HOST


class Buffer(Handle):
    """``size`` bytes (an int or a string like "64 KiB") from a tether resource.

    resource: the resource to allocate from; None means the current resource
    of ``device`` (None: the current CUDA device; tether.HOST: the host slot).
    stream: where the allocation (and the eventual free) is ordered - None (the
    default stream), an int, or any object with ``__cuda_stream__``.
    """

    # _exported: set (to True) once memory was handed out (views, DLPack, CAI):
    # resize() then refuses, since it would free memory a consumer may still use.
    __slots__ = ("_exported",)
    _release = lib.tether_buffer_release

    def __init__(self, size, resource: Resource | None = None, device: int | None = None, stream=None):
        if size.__class__ is not int or size < 0:
            size = parse_size(size)
        if resource is None:
            rh = ffi.NULL
            dev = CURRENT_DEVICE if device is None else device_value(device)
        else:
            try:
                rh = resource._h
            except AttributeError:
                raise TypeError(f"resource must be a tether resource, not {type(resource).__name__}") from None
            if rh is None:
                raise closed_error(resource)
            dev = 0
        s = 0 if stream is None else stream_value(stream)
        try:
            h = _create(rh, dev, size, s)
        except OverflowError:
            raise ValueError(f"size {size} does not fit in size_t") from None
        if not h:
            err = error_for(_last_status())
            if resource is None and device is None and isinstance(err, NoDeviceError):
                err = NoDeviceError(str(err) + " (device=None means the current CUDA device;"
                                    " pass device=tether.HOST for host memory)")
            raise err
        self._h = h

    @classmethod
    def from_handle(cls, handle: int, *, owned: bool = False) -> "Buffer":
        """Wrap a C ``tether_buffer_t*`` given as an int (e.g. made by C code).

        owned=False (default): borrowed; the Buffer takes its own reference.
        owned=True: the Buffer takes over the caller's reference.
        """
        raw = ffi.cast("tether_buffer_t*", handle)
        if owned:
            size = ffi.new("size_t*")
            check(lib.tether_buffer_get_size(raw, size))  # refuse a dead handle before adopting it
        else:
            check(lib.tether_buffer_retain(raw))
        obj = cls.__new__(cls)
        obj._h = raw
        return obj

    # ---- queries --------------------------------------------------------------

    def _info(self):
        info = ffi.new("tether_buffer_info_t*")
        info.struct_size = ffi.sizeof("tether_buffer_info_t")
        self._check(lib.tether_buffer_get_info(self._live(), info))
        return info

    @property
    def size(self) -> int:
        """Size in bytes."""
        out = ffi.new("size_t*")
        self._check(lib.tether_buffer_get_size(self._live(), out))
        return out[0]

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
        return self._info().device

    @property
    def stream(self) -> int:
        """The stream the memory is ordered on (and will be freed on)."""
        return self._info().stream

    @property
    def device_accessible(self) -> bool:
        """True if kernels may access the memory."""
        return bool(self._info().device_accessible)

    @property
    def host_accessible(self) -> bool:
        """True if host code may access the memory (then it exports the buffer protocol)."""
        return bool(self._info().host_accessible)

    # ---- changes --------------------------------------------------------------

    def set_stream(self, stream) -> None:
        """Order the buffer on ``stream`` from now on (the caller orders it after the old one)."""
        self._check(lib.tether_buffer_set_stream(self._live(), stream_value(stream)))

    def resize(self, new_size) -> None:
        """Reallocate to ``new_size`` bytes from the same resource, keeping the common prefix.

        Earlier ``ptr`` values become invalid. Raises BufferError if the memory
        was exported (memoryview, numpy, DLPack, CUDA array interface), because
        the consumer could still be using the old memory.
        """
        h = self._live()
        if getattr(self, "_exported", False):
            raise BufferError("cannot resize a Buffer whose memory was exported (memoryview, numpy, "
                              "DLPack, __cuda_array_interface__); copy into a new Buffer instead")
        self._check(lib.tether_buffer_resize(h, parse_size(new_size, "new_size")))

    # ---- copies ---------------------------------------------------------------

    def copy_from_host(self, src, offset: int = 0) -> None:
        """Copy the bytes of ``src`` (bytes, bytearray, memoryview, a contiguous numpy array...)
        into the buffer at ``offset``. Returns when the copy is complete."""
        h = self._live()
        data = ffi.from_buffer(src)
        self._check(lib.tether_buffer_copy_from_host(h, parse_size(offset, "offset"), data, len(data)))

    def copy_to_host(self, out=None, offset: int = 0, size=None):
        """Copy bytes of the buffer (from ``offset``) to host memory; returns when complete.

        out=None: returns a new bytearray of ``size`` bytes (default: up to the end).
        Otherwise ``out`` is a writable buffer (bytearray, numpy array, memoryview)
        that receives ``size`` bytes (default: len of out in bytes); returns ``out``.
        """
        h = self._live()
        offset = parse_size(offset, "offset")
        if out is None:
            n = max(self.size - offset, 0) if size is None else parse_size(size)
            out = bytearray(n)
        dst = ffi.from_buffer(out, require_writable=True)
        n = len(dst) if size is None else parse_size(size)
        if n > len(dst):
            raise ValueError(f"out has {len(dst)} bytes, fewer than size={n}")
        self._check(lib.tether_buffer_copy_to_host(h, offset, dst, n))
        return out

    def tobytes(self) -> bytes:
        """The buffer's contents as bytes (a copy)."""
        return bytes(self.copy_to_host())

    def copy_from(self, src: "Buffer", size=None) -> None:
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

        The view holds its own reference: the memory stays valid while the view
        (or anything made from it) lives, whatever happens to this object.
        """
        info = self._info()
        if not info.host_accessible:
            raise BufferError("the buffer's memory is not host-accessible (device memory); "
                              "use DLPack or __cuda_array_interface__, or copy_to_host()")
        self._exported = True
        if info.size == 0:
            return memoryview(bytearray())
        # Our own reference for the view; the gc'd data pointer gives it back.
        keep = ffi.cast("tether_buffer_t*", self._h)
        check(lib.tether_buffer_retain(keep))
        data = _gc(ffi.cast("char*", info.ptr), functools.partial(lib._tether_py_release_view, keep))
        return memoryview(ffi.buffer(data, info.size))

    def __buffer__(self, flags: int) -> memoryview:
        """PEP 688 (Python >= 3.12): ``memoryview(buf)``, ``bytes(buf)``; same as memoryview()."""
        return self.memoryview()

    @property
    def __array_interface__(self) -> dict:
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
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface (v3) of device-accessible memory: 1-D uint8.

        'stream' is the buffer's stream for the consumer to synchronise with;
        the default stream (0 in tether) is reported as 1, the CAI value of the
        legacy default stream (0 is not allowed by the protocol).
        """
        info = self._info()
        if not info.device_accessible:
            raise AttributeError("host memory has no __cuda_array_interface__; use numpy, memoryview or DLPack")
        self._exported = True
        return {"version": 3, "shape": (info.size,), "typestr": "|u1",
                "data": (int(ffi.cast("uintptr_t", info.ptr)), False), "strides": None,
                "stream": info.stream if info.stream != 0 else 1}

    # ---- exports: DLPack ---------------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        """(device type, device id) in DLPack terms: (1, 0) host, (2, d) CUDA device,
        (3, 0) pinned host, (13, d) managed."""
        return _dl_device(self, self._info())

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the bytes as a 1-D uint8 tensor (array API / DLPack 1.0 protocol).

        The tensor holds its own reference to the memory, given back by its
        deleter (or by the capsule if nobody consumed it). stream: the
        consumer's stream (None: legacy default, -1: no synchronisation); if it
        differs from the buffer's stream, the buffer's stream is synchronised
        first. copy=True exports a copy; dl_device other than the buffer's own
        device is supported for the host (kDLCPU) only (a copy).
        """
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
        versioned = 1 if max_version is not None and tuple(max_version)[0] >= 1 else 0
        tensor = lib._tether_py_dlpack_new(source._live(), versioned, dev[0], dev[1], flags)
        if not tensor:
            raise error_for(_last_status())
        if source is self:
            self._exported = True
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

    def _check(self, status: int) -> None:
        if status:
            if self._h is None:
                raise closed_error(self)
            check(status)


def _leaf_kind(buffer: Buffer) -> int:
    """The kind of the resource at the end of the buffer's upstream chain."""
    r = buffer.resource
    while True:
        up = r.upstream
        if up is None:
            return r._kind
        r.close()
        r = up


def _dl_device(buffer: Buffer, info) -> tuple[int, int]:
    host, dev_acc = bool(info.host_accessible), bool(info.device_accessible)
    if host and not dev_acc:
        return (kDLCPU, 0)
    if dev_acc and not host:
        return (kDLCUDA, info.device)
    kind = _leaf_kind(buffer)  # both: pinned host or managed
    if kind == ResourceKind.MANAGED or (kind != ResourceKind.PINNED_HOST and info.device >= 0):
        return (kDLCUDAManaged, max(info.device, 0))
    return (kDLCUDAHost, 0)


def _sync_for_consumer(dev: tuple[int, int], info, stream) -> None:
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
