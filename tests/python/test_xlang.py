"""Cross-language proof: a C library built against the package's headers and
libtether shares one current-resource table, one census and one set of
handles with Python; memory moves across the language boundary in both
directions and statistics adaptors count both sides."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

import tether

NATIVE = Path(__file__).resolve().parent / "native" / "xlang.c"
U = ctypes.c_size_t  # uintptr_t (tether needs a 64-bit address space)


@pytest.fixture(scope="module")
def xlang(build_native):
    lib = ctypes.CDLL(str(build_native(NATIVE)))
    sigs = {
        "xlang_abi_version": (ctypes.c_uint32, []),
        "xlang_live_objects": (ctypes.c_size_t, []),
        "xlang_install_host_stats_pool": (ctypes.c_int, [ctypes.POINTER(U)]),
        "xlang_current_host": (U, []),
        "xlang_set_current_host": (ctypes.c_int, [U]),
        "xlang_buffer_from_current": (U, [ctypes.c_size_t, ctypes.c_int]),
        "xlang_keep_buffer": (ctypes.c_int, [U]),
        "xlang_kept_sum": (ctypes.c_longlong, []),
        "xlang_drop_kept": (ctypes.c_int, []),
        "xlang_allocate_current": (U, [ctypes.c_size_t]),
        "xlang_deallocate_current": (ctypes.c_int, [U, ctypes.c_size_t]),
        "xlang_current_bytes": (ctypes.c_uint64, [U]),
        "xlang_retain_release_resource": (ctypes.c_int, [U]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


@pytest.fixture
def restore_host_slot():
    """Put the host slot back as it was (the test changes it from C as well)."""
    before = tether.get_current_resource(tether.HOST)
    yield
    tether.set_current_resource(before, tether.HOST).close()
    before.close()


def test_same_library_and_census(xlang):
    assert xlang.xlang_abi_version() == tether.abi_version()
    baseline = tether.debug.live_objects()
    assert xlang.xlang_live_objects() == baseline
    with tether.HostResource():
        assert xlang.xlang_live_objects() == baseline + 1  # C counts what Python made


def test_python_sees_what_c_set(xlang, restore_host_slot):
    handle = U(0)
    assert xlang.xlang_install_host_stats_pool(ctypes.byref(handle)) == 0
    current = tether.get_current_resource(tether.HOST)
    assert isinstance(current, tether.StatisticsAdaptor)  # wrapped by kind
    assert current.handle == handle.value == xlang.xlang_current_host()
    pool = current.upstream
    assert isinstance(pool, tether.PoolResource)
    assert isinstance(pool.upstream, tether.HostResource)
    # Python allocates from the resource C installed; C reads the same counters.
    with tether.Buffer(1000, device=tether.HOST) as buf:
        assert buf.resource == current
        assert current.statistics().current_bytes == 1000
        assert xlang.xlang_current_bytes(current.handle) == 1000
    assert xlang.xlang_current_bytes(current.handle) == 0
    pool.close()
    current.close()


def test_c_sees_what_python_set(xlang, restore_host_slot):
    stats = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    tether.set_current_resource(stats, tether.HOST).close()
    assert xlang.xlang_current_host() == stats.handle
    # C allocates through the table's resource: Python's adaptor counts it.
    h = xlang.xlang_buffer_from_current(300, 7)
    assert h != 0
    assert stats.statistics().current_bytes == 300
    # ... and Python frees the C-made buffer.
    buf = tether.Buffer.from_handle(h, owned=True)
    assert buf.size == 300
    assert np.asarray(buf).sum() == 300 * 7
    buf.close()
    assert stats.statistics().current_bytes == 0
    assert stats.statistics().total_count == 1
    stats.close()  # the table still holds it
    assert xlang.xlang_current_host() != 0


def test_buffer_made_in_python_freed_by_c(xlang, restore_host_slot):
    stats = tether.StatisticsAdaptor(tether.HostResource())
    with tether.using(stats, tether.HOST):
        buf = tether.Buffer(64, device=tether.HOST)
        np.asarray(buf)[:] = 2
        assert xlang.xlang_keep_buffer(buf.handle) == 0
        buf.close()  # Python is done; C still holds the buffer
        assert stats.statistics().current_bytes == 64
        assert xlang.xlang_kept_sum() == 128
        assert xlang.xlang_drop_kept() == 0
        assert stats.statistics().current_bytes == 0
    stats.close()


def test_raw_memory_crosses_both_ways(xlang, restore_host_slot):
    stats = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    with tether.using(stats, tether.HOST):
        ptr = xlang.xlang_allocate_current(512)  # C allocates ...
        assert ptr != 0
        assert stats.statistics().current_bytes == 512
        stats.deallocate(ptr, 512)  # ... Python frees
        p2 = stats.allocate(256)  # Python allocates ...
        assert xlang.xlang_current_bytes(stats.handle) == 256
        assert xlang.xlang_deallocate_current(p2, 256) == 0  # ... C frees
        s = stats.statistics()
        assert (s.current_bytes, s.total_count, s.peak_bytes) == (0, 2, 512)
    stats.close()


def test_stale_handle_from_python_is_an_error_in_c(xlang):
    r = tether.HostResource()
    h = r.handle
    assert xlang.xlang_retain_release_resource(h) == 0
    r.close()
    assert xlang.xlang_retain_release_resource(h) == tether.InvalidHandleError.code
