"""Exports pin the memory in the C buffer (tether_buffer_pin), not on one Python wrapper.

A live memoryview, numpy view or DLPack capsule must stop *every* resize - one
through another wrapper of the same handle, one from C - because a resize frees
the memory under the view (and a later allocation's data would show through).
Once the views are gone, resize works again.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tether
from tether._ffi import ffi, lib


@pytest.fixture
def host():
    with tether.HostResource() as h:
        yield h


def c_resize(handle: int, size: int) -> int:
    """tether_buffer_resize called from C (through the cffi lib), as C code of the process would."""
    return lib.tether_buffer_resize(ffi.cast("tether_buffer_t*", handle), size)


def test_views_stop_a_resize_from_another_wrapper_and_from_c(host):
    buf = tether.Buffer(4096, resource=host)
    buf.copy_from_host(b"\x07" * 4096)
    view = buf.memoryview()
    arr = np.asarray(buf)
    other = tether.Buffer.from_handle(buf.handle)
    assert buf.pin_count == 2

    with pytest.raises(tether.PinnedError) as e:
        other.resize(8192)
    assert isinstance(e.value, BufferError) and isinstance(e.value, ValueError)
    assert "pinned" in str(e.value)
    assert c_resize(buf.handle, 8192) == lib.TETHER_ERROR_INVALID_ARGUMENT
    assert "pinned" in ffi.string(lib.tether_last_error_message()).decode()

    # Nothing changed, and the views still see the buffer's memory, not a later allocation's.
    assert buf.size == 4096 and other.size == 4096
    with tether.Buffer(4096, resource=host) as later:
        later.copy_from_host(b"\x55" * 4096)
        assert view[0] == 7 and view[4095] == 7
        assert arr[0] == 7 and arr[-1] == 7

    del view
    gc.collect()
    assert buf.pin_count == 1  # the numpy array still pins
    with pytest.raises(tether.PinnedError):
        buf.resize(16)
    del arr
    gc.collect()
    assert buf.pin_count == 0

    other.resize(8192)  # allowed once every view is gone
    assert buf.size == 8192
    assert c_resize(buf.handle, 100) == lib.TETHER_OK
    assert buf.tobytes() == b"\x07" * 100
    other.close()
    buf.close()


def test_a_dlpack_capsule_pins_until_it_dies(host):
    with tether.Buffer(64, resource=host) as buf:
        capsule = buf.__dlpack__()
        assert buf.pin_count == 1
        assert c_resize(buf.handle, 128) == lib.TETHER_ERROR_INVALID_ARGUMENT
        del capsule  # never consumed: the capsule gives the pin back
        gc.collect()
        assert buf.pin_count == 0
        arr = np.from_dlpack(buf)  # consumed: numpy's array owns the tensor and its pin
        assert buf.pin_count == 1
        with pytest.raises(tether.PinnedError):
            buf.resize(128)
        del arr
        gc.collect()
        assert buf.pin_count == 0
        buf.resize(128)


def test_views_outlive_every_wrapper(host):
    buf = tether.Buffer(32, resource=host)
    buf.copy_from_host(bytes(range(32)))
    view = buf.memoryview()
    handle = buf.handle
    buf.close()
    # The view's pin is a reference of its own: the memory is alive and still pinned.
    pins = ffi.new("size_t*")
    assert lib.tether_buffer_get_pin_count(ffi.cast("tether_buffer_t*", handle), pins) == lib.TETHER_OK
    assert pins[0] == 1
    assert c_resize(handle, 64) == lib.TETHER_ERROR_INVALID_ARGUMENT
    assert bytes(view) == bytes(range(32))
    del view
    gc.collect()  # the last pin was the last reference: the buffer is gone
    assert c_resize(handle, 64) == lib.TETHER_ERROR_INVALID_HANDLE


def test_a_hook_export_pins_while_its_wrapper_is_open(host):
    """Exports with no lifetime of their own (CUDA array interface, hooks setting _exported)
    pin the buffer for as long as the exporting wrapper is open."""
    buf = tether.Buffer(64, resource=host)
    other = tether.Buffer.from_handle(buf.handle)
    buf._exported = True
    buf._exported = True  # once per wrapper
    assert buf._exported and buf.pin_count == 1
    with pytest.raises(tether.PinnedError):
        other.resize(128)
    buf.close()
    assert other.pin_count == 0
    other.resize(128)
    other.close()


def test_memoryview_racing_close_never_leaks_a_cffi_error(host):
    """close() on another thread between memoryview()'s steps (simulated exactly here)."""

    class ClosedMidway(tether.Buffer):
        __slots__ = ()

        def _info(self, h=None):
            info = super()._info(h) if h is not None else super()._info()
            self.close()  # another thread's close() lands here
            return info

    buf = ClosedMidway(16, resource=host)
    buf.copy_from_host(b"abcdefghijklmnop")
    try:
        view = buf.memoryview()
    except tether.InvalidHandleError as e:  # acceptable: "closed"
        assert "closed" in str(e)
    else:
        assert bytes(view) == b"abcdefghijklmnop"  # the view's own pin kept the memory
        del view


def test_memoryview_racing_close_on_threads(host):
    errors = []
    for _ in range(200):
        buf = tether.Buffer(16, resource=host)
        start = threading.Barrier(2)

        def export():
            start.wait()
            try:
                v = buf.memoryview()
                v[0] = 1
            except tether.InvalidHandleError:
                pass
            except BaseException as e:  # noqa: BLE001 - any other error is the bug
                errors.append(e)

        t = threading.Thread(target=export)
        t.start()
        start.wait()
        buf.close()
        t.join()
    gc.collect()
    assert errors == []
