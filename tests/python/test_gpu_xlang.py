"""Python and C share device 0's current-resource slot and device buffers: a
C library built at test time against the package's headers sets the slot and
Python sees it, Python sets it and C allocates from it, and device buffers
made on one side are read and freed on the other."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

import tether
from gpu_support import MiB

pytestmark = pytest.mark.gpu

NATIVE = Path(__file__).resolve().parent / "native_gpu" / "gpu_xlang.c"
U = ctypes.c_size_t  # uintptr_t


@pytest.fixture(scope="module")
def gpu_xlang(build_native):
    lib = ctypes.CDLL(str(build_native(NATIVE)))
    sigs = {
        "gpu_xlang_current_device0": (U, []),
        "gpu_xlang_current_kind": (ctypes.c_int, []),
        "gpu_xlang_install_pool": (ctypes.c_int, []),
        "gpu_xlang_make_buffer": (U, [ctypes.c_size_t, ctypes.c_uint]),
        "gpu_xlang_sum": (ctypes.c_longlong, [U]),
        "gpu_xlang_keep": (ctypes.c_int, [U]),
        "gpu_xlang_kept_sum": (ctypes.c_longlong, []),
        "gpu_xlang_drop": (ctypes.c_int, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def pattern_sum(n, seed):
    return sum((i * 7 + seed) & 0xFF for i in range(n))


def test_c_sees_what_python_set(gpu_xlang, restore_device0):
    pool = tether.PoolResource(tether.AsyncResource(0))
    tether.set_current_resource(pool, 0).close()
    assert gpu_xlang.gpu_xlang_current_device0() == pool.handle
    assert gpu_xlang.gpu_xlang_current_kind() == tether.ResourceKind.POOL
    h = gpu_xlang.gpu_xlang_make_buffer(MiB, 3)  # C allocates device memory from Python's pool
    assert h != 0
    buf = tether.Buffer.from_handle(h, owned=True)
    assert buf.resource == pool and buf.device == 0 and not buf.host_accessible
    assert pool.pool_info().free_bytes <= pool.pool_info().pool_size - MiB
    data = buf.tobytes()
    assert sum(data) == pattern_sum(MiB, 3)
    buf.close()  # Python frees the C-made buffer into the pool
    up = pool.upstream
    pool.close()
    up.close()


def test_python_sees_what_c_set(gpu_xlang, restore_device0):
    assert gpu_xlang.gpu_xlang_install_pool() == 0
    current = tether.get_current_resource(0)
    assert isinstance(current, tether.PoolResource)
    assert current.handle == gpu_xlang.gpu_xlang_current_device0()
    up = current.upstream
    assert isinstance(up, tether.CudaResource) and up.device == 0
    with tether.Buffer(1000) as buf:  # device=None: device 0 here
        assert buf.resource == current
        buf.copy_from_host(bytes(range(200)) * 5)
        assert gpu_xlang.gpu_xlang_sum(buf.handle) == sum(range(200)) * 5
    up.close()
    current.close()


def test_python_buffer_outlives_python_in_c(gpu_xlang):
    r = tether.CudaResource(0)
    buf = tether.Buffer(4096, resource=r)
    buf.copy_from_host(b"\x02" * 4096)
    assert gpu_xlang.gpu_xlang_keep(buf.handle) == 0
    buf.close()
    r.close()  # only C's reference keeps the memory (and the resource) alive
    assert gpu_xlang.gpu_xlang_kept_sum() == 2 * 4096
    assert gpu_xlang.gpu_xlang_drop() == 0
