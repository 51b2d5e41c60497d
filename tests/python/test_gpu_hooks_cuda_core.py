"""tether.cuda_core on a GPU: cuda.core Buffers from a tether pool, copies
between them and tether Buffers (to_buffer), frees back into the origin."""

from __future__ import annotations

import gc

import pytest

import tether
from gpu_support import MiB

pytestmark = pytest.mark.gpu

pytest.importorskip("cuda.core", reason="cuda.core is not installed")
import tether.cuda_core as tcore  # noqa: E402

try:
    from cuda.core import Device
except ImportError:  # older cuda.core
    from cuda.core.experimental import Device


@pytest.fixture
def setup():
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    pool = tether.PoolResource(tether.CudaResource(0))
    a, b = tether.StatisticsAdaptor(pool), tether.StatisticsAdaptor(pool)
    yield stream, pool, a, b
    stream.sync()
    gc.collect()
    up = pool.upstream
    for r in (a, b, pool, up):
        r.close()
    stream.close()


def test_allocate_copy_and_free(setup, restore_device0):
    stream, pool, a, b = setup
    mr = tcore.MemoryResource(a)
    assert mr.is_device_accessible and not mr.is_host_accessible and mr.device_id == 0
    pattern = bytes(range(256)) * (MiB // 256)
    src = tether.Buffer(MiB, resource=pool)
    src.copy_from_host(pattern)
    dst = tether.Buffer(MiB, resource=pool)
    with tether.using(b, device=0):  # the current resource plays no part
        buf = mr.allocate(MiB, stream=stream)
    assert a.statistics().current_bytes == MiB and b.statistics().total_count == 0
    assert buf.size == MiB and buf.memory_resource is mr
    buf.copy_from(tcore.to_buffer(src), stream=stream)
    tcore.to_buffer(dst).copy_from(buf, stream=stream)
    stream.sync()
    assert dst.tobytes() == pattern
    buf.close()
    assert a.statistics().current_bytes == 0 and mr.outstanding == 0
    del buf, src, dst, mr
    gc.collect()


def test_buffers_outlive_the_memory_resource_object(setup):
    stream, _, a, _ = setup
    mr = tcore.MemoryResource(a)
    buf = mr.allocate(4096, stream=stream)
    del mr
    gc.collect()
    assert a.statistics().current_bytes == 4096
    del buf
    gc.collect()
    stream.sync()
    assert a.statistics().current_bytes == 0
