"""tether.cupy on a GPU: CuPy's allocations land in a tether pool (its statistics
prove it), results are right, and frees go back to the resource they came from
even after the current resource changed."""

from __future__ import annotations

import gc

import pytest

import tether
from gpu_support import MiB

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
import tether.cupy as tcupy  # noqa: E402


@pytest.fixture
def pools():
    """A device-0 pool and two statistics adaptors over it (one per 'library')."""
    pool = tether.PoolResource(tether.CudaResource(0))
    a, b = tether.StatisticsAdaptor(pool), tether.StatisticsAdaptor(pool)
    yield a, b
    cupy.cuda.Device(0).synchronize()
    gc.collect()
    up = pool.upstream
    for r in (a, b, pool, up):
        r.close()


def _bytes(stats) -> int:
    return stats.statistics().current_bytes


def test_using_allocator_lands_in_the_pool_and_computes(pools):
    a, _ = pools
    n = 1 << 20
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator(a)):
        x = cupy.arange(n, dtype=cupy.int64)
        assert _bytes(a) >= x.nbytes
        assert x.data.mem.device_id == 0 and isinstance(x.data.mem._owner, tether.Buffer)
        total = int(x.sum())  # a reduction: its temporaries come from tether too
        assert a.statistics().total_count >= 2
    assert total == n * (n - 1) // 2
    del x
    gc.collect()
    assert _bytes(a) == 0


def test_resource_none_follows_the_current_resource_and_frees_into_the_origin(pools, restore_device0):
    a, b = pools
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator()):
        with tether.using(a, device=0):
            x = cupy.ones(MiB, dtype=cupy.uint8)
        assert _bytes(a) == MiB
        with tether.using(b, device=0):
            y = cupy.zeros(1000, dtype=cupy.uint8)
            assert int(x.sum()) == MiB
            del x
            gc.collect()
            assert _bytes(a) == 0 and a.statistics().total_count >= 1
        assert _bytes(b) >= 1000
        del y
        gc.collect()
    assert _bytes(b) == 0 and _bytes(a) == 0


def test_allocations_are_ordered_on_cupys_current_stream(pools):
    a, _ = pools
    alloc = tcupy.allocator(a)
    stream = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0), stream:
        m = alloc(4096)
        z = alloc(0)
    assert m.mem._owner.stream == stream.ptr and m.mem.device_id == 0
    assert z.ptr == 0 and z.mem.size == 0
    stream.synchronize()
    del m, z
    gc.collect()
    assert _bytes(a) == 0


def test_enable_and_disable(pools):
    a, _ = pools
    before = cupy.cuda.get_allocator()
    tcupy.enable(a)
    try:
        x = cupy.full(1000, 3, dtype=cupy.int32)
        assert _bytes(a) == 4000 and int(x.sum()) == 3000
    finally:
        tcupy.disable()
    assert cupy.cuda.get_allocator() == before
    y = cupy.empty(1000, dtype=cupy.int32)  # CuPy's own allocator again
    assert _bytes(a) == 4000
    del x, y
    gc.collect()
    assert _bytes(a) == 0
