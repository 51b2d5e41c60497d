"""CUDA IPC from Python without a GPU (tests/python/test_gpu_ipc.py runs it between
processes): what export_ipc refuses and why, what import_ipc refuses before any
driver call (wrong length, foreign or damaged bytes), and NO_DEVICE without a driver."""

from __future__ import annotations

import pickle
import struct

import pytest

import tether


def well_formed(**fields: int) -> bytes:
    """A version-1 handle as core/src/ipc.cpp lays it out (driver handle zeros); fields override."""
    f = dict(version=1, kind=1, flags=0, pid=1, reserved=0, offset=256, size=4096, allocation=1 << 20)
    f.update(fields)
    head = b"TETHRIPC" + struct.pack("<HHIII", f["version"], f["kind"], f["flags"], f["pid"], f["reserved"])
    body = bytes(16) + struct.pack("<QQQ", f["offset"], f["size"], f["allocation"])
    data = head + body + bytes(128)
    assert len(data) == tether.IPC_HANDLE_SIZE
    return data


def test_handle_size_is_the_c_macro():
    assert tether.IPC_HANDLE_SIZE == 192


@pytest.mark.parametrize("make", [
    lambda: tether.HostResource(),
    lambda: tether.PoolResource(tether.HostResource()),
])
def test_host_memory_is_not_supported(make):
    r = make()
    with tether.Buffer(4096, r) as b:
        with pytest.raises(tether.NotSupportedError, match="host memory") as e:
            b.export_ipc()
        assert isinstance(e.value, NotImplementedError)
        with pytest.raises(tether.NotSupportedError, match="device memory only"):
            b.export_ipc(stream=0)
        b.resize(8192)  # a refused export is no export: resize still works
        assert b.size == 8192
    r.close()


def test_export_checks_its_arguments():
    r = tether.HostResource()
    b = tether.Buffer(64, r)
    with pytest.raises(TypeError):
        b.export_ipc(stream="not a stream")
    b.close()
    with pytest.raises(tether.InvalidHandleError, match="closed"):
        b.export_ipc()
    r.close()


def test_import_refuses_the_wrong_length_naming_data():
    for data in (b"", b"x" * 191, b"x" * 193, bytes(1000)):
        with pytest.raises(ValueError, match=r"data must be 192 bytes"):
            tether.import_ipc(data)


def test_import_refuses_what_is_not_bytes():
    with pytest.raises(TypeError, match="data must be bytes"):
        tether.import_ipc("T" * 192)
    with pytest.raises(TypeError, match="data must be bytes"):
        tether.import_ipc(192)
    with pytest.raises(TypeError, match="device"):
        tether.import_ipc(well_formed(), device="0")


@pytest.mark.parametrize("data, needle", [
    (bytes(192), "not a tether IPC handle"),
    (b"\xff" * 192, "magic"),
    (well_formed(version=2), "version 2"),
    (well_formed(kind=7), "kind 7"),
    (well_formed(flags=2), "flags"),
    (well_formed(reserved=1), "reserved"),
    (well_formed(size=0), "inconsistent"),
    (well_formed(offset=(1 << 20) - 1), "inconsistent"),
    (well_formed(offset=(1 << 64) - 1), "inconsistent"),
    (well_formed()[:150] + b"\x01" + well_formed()[151:], "event"),
])
def test_import_refuses_foreign_or_damaged_bytes(data, needle):
    with pytest.raises(tether.InvalidArgumentError, match=needle) as e:
        tether.import_ipc(data)
    assert isinstance(e.value, ValueError)
    assert "handle" in str(e.value)


def test_import_takes_any_bytes_like_object():
    for data in (bytearray(192), memoryview(bytes(192))):
        with pytest.raises(tether.InvalidArgumentError, match="magic"):
            tether.import_ipc(data)


def test_import_refuses_the_host_as_device():
    with pytest.raises(tether.InvalidArgumentError, match="device"):
        tether.import_ipc(well_formed(), device=tether.HOST)


def test_handles_are_picklable_bytes():
    data = well_formed()
    assert pickle.loads(pickle.dumps(data)) == data


@pytest.mark.skipif(tether.cuda_available(), reason="a CUDA device is present (the GPU tests cover this)")
def test_without_a_driver_import_is_no_device():
    for device in (None, 0):
        with pytest.raises(tether.NoDeviceError) as e:
            tether.import_ipc(well_formed(), device=device)
        assert str(e.value)


@pytest.mark.skipif(tether.cuda_available(), reason="a CUDA device is present (the GPU tests cover this)")
def test_without_a_driver_device_memory_export_is_no_device():
    # Memory that claims to be device memory passes the property checks, then needs the driver.
    import ctypes
    blocks: dict[int, ctypes.Array[ctypes.c_char]] = {}

    def allocate(size: int, alignment: int, stream: int) -> int:
        block = ctypes.create_string_buffer(size + alignment)
        address = (ctypes.addressof(block) + alignment - 1) // alignment * alignment
        blocks[address] = block
        return address

    def deallocate(ptr: int, size: int, alignment: int, stream: int) -> None:
        del blocks[ptr]

    try:
        r = tether.CallbackResource(allocate, deallocate, device_accessible=True, host_accessible=False, device=0)
    except tether.NoDeviceError:
        pytest.skip("a device callback resource needs a driver here")
    with tether.Buffer(4096, r) as b:
        with pytest.raises(tether.NoDeviceError):
            b.export_ipc()
    r.close()
