"""Zero-copy views of tether device memory from CuPy, PyTorch and Numba: they
see the same memory (same address, writes visible both ways) and keep it
alive after the Buffer object is gone; tether accepts their streams."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tether
from gpu_support import MiB

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def streams():
    """A CuPy and a PyTorch stream that outlive every pool of this module."""
    cupy = pytest.importorskip("cupy")
    out = {"cupy": cupy.cuda.Stream(non_blocking=True)}
    try:
        import torch
        if torch.cuda.is_available():
            out["torch"] = torch.cuda.Stream()
    except ImportError:
        pass
    return out


@pytest.fixture
def pool():
    p = tether.PoolResource(tether.CudaResource(0))
    yield p
    up = p.upstream
    p.close()
    up.close()


def filled(pool, n=MiB, byte=7):
    buf = tether.Buffer(n, resource=pool)
    buf.copy_from_host(bytes([byte]) * n)
    return buf


def test_cupy_asarray_is_zero_copy_and_keeps_the_buffer_alive(pool):
    cupy = pytest.importorskip("cupy")
    buf = filled(pool)
    ptr = buf.ptr
    arr = cupy.asarray(buf)  # __cuda_array_interface__
    assert arr.data.ptr == ptr and arr.dtype == cupy.uint8 and arr.size == MiB
    assert int(arr.sum()) == 7 * MiB
    arr[:10] = 1  # CuPy writes, tether reads
    cupy.cuda.Device().synchronize()
    assert buf.copy_to_host(size=12) == bytearray([1] * 10 + [7, 7])
    del buf
    gc.collect()
    assert pool.pool_info().free_bytes < pool.pool_info().pool_size  # still allocated
    assert int(arr[5:].sum()) == 7 * (MiB - 10) + 5
    del arr
    gc.collect()


def test_cupy_from_dlpack(pool):
    cupy = pytest.importorskip("cupy")
    buf = filled(pool, byte=3)
    arr = cupy.from_dlpack(buf)
    assert arr.data.ptr == buf.ptr
    buf.close()  # the DLPack tensor holds its own reference
    gc.collect()
    assert int(arr.sum()) == 3 * MiB
    del arr
    gc.collect()


def test_torch_from_dlpack(pool):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    buf = filled(pool, byte=2)
    t = torch.from_dlpack(buf)
    assert t.data_ptr() == buf.ptr and t.device.type == "cuda" and t.numel() == MiB
    t[:4] = 9
    torch.cuda.synchronize()
    assert buf.copy_to_host(size=5) == bytearray([9, 9, 9, 9, 2])
    del buf
    gc.collect()
    assert int(t.sum()) == 2 * MiB + 4 * 7
    del t
    gc.collect()


def test_numba_as_cuda_array(pool):
    numba_cuda = pytest.importorskip("numba.cuda")
    if not numba_cuda.is_available():
        pytest.skip("Numba sees no CUDA device")
    buf = filled(pool, byte=4)
    arr = numba_cuda.as_cuda_array(buf)
    assert arr.__cuda_array_interface__["data"][0] == buf.ptr
    del buf
    gc.collect()
    host = arr.copy_to_host()
    assert host.shape == (MiB,) and (host == 4).all()
    del arr
    gc.collect()


def test_tether_takes_cupy_and_torch_streams(streams, pool):
    cupy = pytest.importorskip("cupy")
    s = streams["cupy"]
    for stream in filter(None, (s.ptr, s if hasattr(s, "__cuda_stream__") else None)):
        with tether.Buffer(MiB, resource=pool, stream=stream) as buf:
            assert buf.stream == s.ptr
            arr = cupy.asarray(buf)
            with s:
                arr.fill(5)
            s.synchronize()
            assert buf.tobytes() == b"\x05" * MiB
            del arr
    if "torch" not in streams:
        pytest.skip("PyTorch with CUDA is not available")
    torch = pytest.importorskip("torch")
    ts = streams["torch"]
    with tether.Buffer(MiB, resource=pool, stream=ts) as buf:
        assert buf.stream == ts.cuda_stream
        t = torch.from_dlpack(buf)
        t.fill_(6)
        torch.cuda.synchronize()
        assert buf.tobytes() == b"\x06" * MiB
        del t
    gc.collect()


def test_pinned_and_managed_memory_from_both_sides():
    cupy = pytest.importorskip("cupy")
    for cls in (tether.PinnedHostResource, tether.ManagedResource):
        with cls(0) as r, tether.Buffer(4096, resource=r) as buf:
            host = np.asarray(buf)
            host[:] = 1
            dev = cupy.asarray(buf)
            assert dev.data.ptr == buf.ptr
            dev += 1
            cupy.cuda.Device().synchronize()
            assert (host == 2).all()
            del host, dev
    gc.collect()
