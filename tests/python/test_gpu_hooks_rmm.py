"""tether.rmm on a GPU: rmm.DeviceBuffer through rmm.mr.set_current_device_resource
lands in a tether pool and frees back into the resource it came from."""

from __future__ import annotations

import gc

import pytest

import tether

pytestmark = pytest.mark.gpu

rmm = pytest.importorskip("rmm", reason="RMM is not installed")
import tether.rmm as trmm  # noqa: E402


@pytest.fixture
def pools():
    pool = tether.PoolResource(tether.CudaResource(0))
    a, b = tether.StatisticsAdaptor(pool), tether.StatisticsAdaptor(pool)
    previous = rmm.mr.get_current_device_resource()
    yield a, b
    rmm.mr.set_current_device_resource(previous)
    gc.collect()
    up = pool.upstream
    for r in (a, b, pool, up):
        r.close()


def test_device_buffer_lands_in_the_pool(pools):
    a, _ = pools
    rmm.mr.set_current_device_resource(trmm.memory_resource(a))
    data = bytes(range(256)) * 64
    db = rmm.DeviceBuffer.to_device(data)
    assert a.statistics().current_bytes == len(data)
    assert db.tobytes() == data
    del db
    gc.collect()
    assert a.statistics().current_bytes == 0


def test_resource_none_frees_into_the_origin(pools, restore_device0):
    a, b = pools
    rmm.mr.set_current_device_resource(trmm.memory_resource())
    with tether.using(a, device=0):
        db = rmm.DeviceBuffer(size=10000)
    assert a.statistics().current_bytes == 10000
    with tether.using(b, device=0):
        del db
        gc.collect()
    assert a.statistics().current_bytes == 0 and b.statistics().total_count == 0
