"""tether.Buffer: construction, copies, and zero-copy exports (numpy, memoryview,
DLPack) that keep the memory alive on their own."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import tether


@pytest.fixture
def stats():
    s = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    yield s
    s.close()


def live_buffers():
    gc.collect()
    return tether.debug.live_objects("buffer")


# ---- basics -------------------------------------------------------------------------

def test_attributes(stats):
    with tether.Buffer(1000, resource=stats) as buf:
        assert buf.size == len(buf) == buf.nbytes == 1000
        assert buf.ptr != 0 and buf.ptr % 256 == 0
        assert buf.resource == stats and isinstance(buf.resource, tether.StatisticsAdaptor)
        assert buf.device == tether.HOST and buf.stream == 0
        assert buf.host_accessible and not buf.device_accessible
        assert "1000 bytes" in repr(buf)
        assert stats.statistics().current_bytes == 1000
    assert stats.statistics().current_bytes == 0


def test_from_the_current_host_resource(stats):
    with tether.using(stats, device=tether.HOST):
        with tether.Buffer(64, device=tether.HOST) as buf:
            assert buf.resource == stats
            assert stats.statistics().current_count == 1


def test_zero_size(stats):
    with tether.Buffer(0, resource=stats) as buf:
        assert buf.size == 0 and buf.ptr == 0 and buf.tobytes() == b""
        assert np.asarray(buf).shape == (0,)
        assert np.from_dlpack(buf).shape == (0,)


def test_copies(stats):
    with tether.Buffer(8, resource=stats) as a, tether.Buffer(8, resource=stats) as b:
        a.copy_from_host(b"abcdefgh")
        assert a.tobytes() == b"abcdefgh"
        a.copy_from_host(b"XY", offset=3)
        assert a.copy_to_host() == bytearray(b"abcXYfgh")
        assert a.copy_to_host(offset=6) == bytearray(b"gh")
        out = np.zeros(4, dtype=np.uint8)
        assert a.copy_to_host(out, offset=2) is out and bytes(out) == b"cXYf"
        b.copy_from(a)
        assert b.tobytes() == b"abcXYfgh"
        b.copy_from_host(np.arange(8, dtype=np.uint8))
        assert b.tobytes() == bytes(range(8))
        with pytest.raises(tether.InvalidArgumentError):
            a.copy_from_host(b"123456789")  # larger than the buffer
        with pytest.raises(tether.InvalidArgumentError):
            a.copy_from_host(b"12", offset=7)
        with pytest.raises(tether.InvalidArgumentError):
            a.copy_to_host(bytearray(4), offset=6)
        with pytest.raises(TypeError):
            a.copy_from(b"abc")


def test_resize_keeps_the_prefix(stats):
    with tether.Buffer(4, resource=stats) as buf:
        buf.copy_from_host(b"wxyz")
        buf.resize(1000)
        assert buf.size == 1000 and buf.tobytes()[:4] == b"wxyz"
        assert stats.statistics().current_bytes == 1000
        buf.resize(2)
        assert buf.tobytes() == b"wx"


def test_resize_after_export_is_refused(stats):
    with tether.Buffer(16, resource=stats) as buf:
        view = np.asarray(buf)
        with pytest.raises(BufferError):
            buf.resize(32)
        assert buf.size == 16
        del view


def test_streams(stats):
    class CudaStreamLike:
        def __cuda_stream__(self):
            return (0, 1234)

    with tether.Buffer(8, resource=stats, stream=CudaStreamLike()) as buf:
        assert buf.stream == 1234
        buf.set_stream(99)
        assert buf.stream == 99
        buf.set_stream(None)
        assert buf.stream == 0
        with pytest.raises(TypeError):
            buf.set_stream(1.5)

    class TorchStreamLike:
        cuda_stream = 77

    class BadProtocol:
        def __cuda_stream__(self):
            return 5

    with tether.Buffer(8, resource=stats, stream=TorchStreamLike()) as buf:
        assert buf.stream == 77
    with pytest.raises(TypeError, match="__cuda_stream__"):
        tether.Buffer(8, resource=stats, stream=BadProtocol())
    with pytest.raises(ValueError):
        tether.Buffer(8, resource=stats, stream=-5)


def test_not_picklable(stats):
    import pickle
    with tether.Buffer(8, resource=stats) as buf:
        with pytest.raises(TypeError):
            pickle.dumps(buf)
        with pytest.raises(TypeError):
            pickle.dumps(stats)


# ---- numpy and memoryview --------------------------------------------------------------

def test_numpy_view_is_zero_copy(stats):
    buf = tether.Buffer(100, resource=stats)
    a = np.asarray(buf)
    assert a.dtype == np.uint8 and a.shape == (100,) and a.flags.writeable
    assert a.ctypes.data == buf.ptr
    a[:] = 5
    assert buf.tobytes() == b"\x05" * 100
    buf.copy_from_host(b"\x09" * 100)
    assert int(a.sum()) == 900
    buf.close()


def test_numpy_view_keeps_the_memory_alive(stats):
    before = live_buffers()
    buf = tether.Buffer(64, resource=stats)
    a = np.asarray(buf)
    a[:] = 3
    del buf
    assert live_buffers() == before + 1  # the view holds it
    assert int(a.sum()) == 192 and stats.statistics().current_bytes == 64
    del a
    assert live_buffers() == before
    assert stats.statistics().current_bytes == 0


def test_explicit_close_with_a_live_view_is_safe(stats):
    buf = tether.Buffer(64, resource=stats)
    a = np.asarray(buf)
    buf.close()
    a[:] = 1  # still valid memory: the view owns a reference
    assert int(a.sum()) == 64 and stats.statistics().current_bytes == 64
    del a
    gc.collect()
    assert stats.statistics().current_bytes == 0


def test_memoryview(stats):
    buf = tether.Buffer(4, resource=stats)
    mv = buf.memoryview()
    assert not mv.readonly and mv.nbytes == 4
    mv[:] = b"abcd"
    buf.close()
    assert bytes(mv) == b"abcd"
    mv.release()
    gc.collect()
    assert stats.statistics().current_bytes == 0


def test_array_interface(stats):
    with tether.Buffer(10, resource=stats) as buf:
        ai = buf.__array_interface__
        assert ai["version"] == 3 and ai["shape"] == (10,) and ai["typestr"] == "|u1"
        assert not hasattr(buf, "__cuda_array_interface__")
        del ai
        gc.collect()


# ---- DLPack ------------------------------------------------------------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version_major", ctypes.c_uint32), ("version_minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))), ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor)]

api = ctypes.pythonapi
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = (ctypes.py_object, ctypes.c_char_p)
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = (ctypes.py_object, ctypes.c_char_p)
USED = ctypes.c_char_p(b"used_dltensor")  # must outlive the capsule
USED_V = ctypes.c_char_p(b"used_dltensor_versioned")


def consume(capsule, versioned: bool):
    """What a DLPack consumer does: take the tensor, rename the capsule; returns the tensor."""
    name = b"dltensor_versioned" if versioned else b"dltensor"
    assert api.PyCapsule_IsValid(capsule, name) == 1
    ptr = api.PyCapsule_GetPointer(capsule, name)
    api.PyCapsule_SetName(capsule, USED_V if versioned else USED)
    cls = DLManagedTensorVersioned if versioned else DLManagedTensor
    return ctypes.cast(ptr, ctypes.POINTER(cls))


@pytest.mark.parametrize("versioned", [False, True])
def test_dlpack_tensor_fields(stats, versioned):
    with tether.Buffer(48, resource=stats) as buf:
        cap = buf.__dlpack__(max_version=(1, 0) if versioned else None)
        t = consume(cap, versioned)
        dl = t.contents.dl_tensor
        assert dl.data == buf.ptr and dl.ndim == 1 and dl.shape[0] == 48 and dl.strides[0] == 1
        assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (1, 8, 1)
        assert (dl.device.device_type, dl.device.device_id) == (1, 0)
        if versioned:
            assert (t.contents.version_major, t.contents.version_minor) == (1, 0)
            assert t.contents.flags == 0
        del cap
        t.contents.deleter(t)
        # Had the renamed capsule also run the deleter, the Buffer's own reference
        # would be gone by now.
        assert buf.size == 48


@pytest.mark.parametrize("versioned", [False, True])
def test_dlpack_deleter_releases_exactly_once(stats, versioned):
    before = live_buffers()
    buf = tether.Buffer(8, resource=stats)
    cap = buf.__dlpack__(max_version=(1, 0) if versioned else None)
    t = consume(cap, versioned)
    buf.close()  # the tensor now holds the only reference
    assert live_buffers() == before + 1
    del cap  # consumed (renamed): the capsule does nothing
    assert live_buffers() == before + 1 and stats.statistics().current_bytes == 8
    t.contents.deleter(t)
    assert live_buffers() == before and stats.statistics().current_bytes == 0


@pytest.mark.parametrize("kw", [{}, {"max_version": (1, 0)}, {"max_version": (2, 3)}])
def test_unconsumed_capsule_releases_its_reference(stats, kw):
    before = live_buffers()
    buf = tether.Buffer(8, resource=stats)
    cap = buf.__dlpack__(**kw)
    name = b"dltensor_versioned" if kw else b"dltensor"
    assert api.PyCapsule_IsValid(cap, name) == 1
    buf.close()
    assert live_buffers() == before + 1
    del cap
    assert live_buffers() == before


def test_numpy_from_dlpack_zero_copy_and_keeps_alive(stats):
    before = live_buffers()
    buf = tether.Buffer(32, resource=stats)
    x = np.from_dlpack(buf)
    assert x.dtype == np.uint8 and x.shape == (32,) and x.ctypes.data == buf.ptr
    x[:] = 4
    assert buf.tobytes() == b"\x04" * 32
    buf.close()
    assert live_buffers() == before + 1
    assert int(x.sum()) == 128
    del x
    assert live_buffers() == before


def test_dlpack_copy_and_devices(stats):
    with tether.Buffer(16, resource=stats) as buf:
        buf.copy_from_host(bytes(range(16)))
        assert buf.__dlpack_device__() == (1, 0)
        y = np.from_dlpack(buf, copy=True)
        assert y.ctypes.data != buf.ptr and bytes(y) == bytes(range(16))
        cap = buf.__dlpack__(max_version=(1, 0), copy=True)
        t = consume(cap, True)
        assert t.contents.flags & 2  # DLPACK_FLAG_BITMASK_IS_COPIED
        t.contents.deleter(t)
        del cap, y
        x = np.from_dlpack(buf, device="cpu")
        assert x.ctypes.data == buf.ptr
        del x
        with pytest.raises(BufferError):
            buf.__dlpack__(dl_device=(2, 0))
        with pytest.raises(BufferError):
            buf.__dlpack__(dl_device=(2, 0), copy=False)
        assert stats.statistics().current_count == 1
