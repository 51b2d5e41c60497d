"""Buffer.record_stream on a GPU: memory read or written on a side stream, with
that use recorded, is not handed to the next allocation - on the buffer's own
stream or any other - until the side stream's kernels are done; and every
stream-ordered resource keeps the rule (pool, async, arena, fixed-size and
binning over them, adaptors). The control without record_stream shows that
the test can see the race it guards against."""

from __future__ import annotations

import pytest

import tether
from gpu_support import MiB, cupy_or_skip, kernels, streams  # noqa: F401 - kernels, streams: fixtures

pytestmark = pytest.mark.gpu

N = MiB
SPIN_SECONDS = 0.2


CASES = {
    "pool_cuda": lambda: tether.PoolResource(tether.CudaResource(0)),
    "pool_async": lambda: tether.PoolResource(tether.AsyncResource(0)),
    "async": lambda: tether.AsyncResource(0),
    "arena_cuda": lambda: tether.ArenaResource(tether.CudaResource(0)),
    "fixed_size_cuda": lambda: tether.FixedSizeResource(tether.CudaResource(0), block_size=N),
    "binning_pool": lambda: tether.BinningResource(tether.PoolResource(tether.CudaResource(0)), bins=[N]),
    "statistics_pool": lambda: tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0))),
}


@pytest.fixture(params=sorted(CASES))
def mr(request):
    r = CASES[request.param]()
    yield r
    r.close()


def side_stream_writes_late(kernels, a, side, mr, record: bool):
    """Allocate on A, write 0xAB on the side stream behind a spin, free on A
    (recording the side stream or not), allocate again on A and write 0xCD.
    Returns (reused the same address, what the second buffer holds)."""
    first = tether.Buffer(N, resource=mr, stream=a.ptr)
    p = first.ptr
    kernels.spin(side, SPIN_SECONDS)
    kernels.fill(side, p, N, 0xAB)  # the side stream's use, pending
    if record:
        first.record_stream(side)
    first.close()
    second = tether.Buffer(N, resource=mr, stream=a.ptr)
    kernels.fill(a, second.ptr, N, 0xCD)
    side.synchronize()
    a.synchronize()
    data = second.tobytes()
    reused = second.ptr == p
    second.close()
    return reused, data


def test_the_next_allocation_never_gets_memory_a_recorded_stream_still_uses(kernels, streams, mr):
    a, side = streams
    reused, data = side_stream_writes_late(kernels, a, side, mr, record=True)
    assert data == b"\xcd" * N, "the side stream's late write clobbered the new owner's memory"
    assert not reused, "the block was handed out while the side stream still wrote to it"


def test_without_record_stream_the_race_is_visible(kernels, streams):
    # The control: a pool reuses A's block on A at once (stream order), so the
    # side stream's late write lands in the new buffer. If this ever stops
    # being visible, the test above proves nothing.
    a, side = streams
    mr = tether.PoolResource(tether.CudaResource(0))
    reused, data = side_stream_writes_late(kernels, a, side, mr, record=False)
    mr.close()
    assert reused
    assert data != b"\xcd" * N


def test_once_the_side_stream_is_done_the_memory_is_reused_without_waiting(kernels, streams):
    a, side = streams
    mr = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0)))
    first = tether.Buffer(N, resource=mr, stream=a.ptr)
    p = first.ptr
    # The spin keeps the side stream busy past close(): without it the 1 MiB fill
    # can finish first and the free is (rightly) not deferred at all.
    kernels.spin(side, SPIN_SECONDS)
    kernels.fill(side, p, N, 0x11)
    first.record_stream(side)
    first.close()
    assert mr.statistics().current_bytes == N  # waiting for the side stream: still allocated
    side.synchronize()
    again = tether.Buffer(N, resource=mr, stream=a.ptr)
    assert again.ptr == p
    assert mr.statistics().current_bytes == N
    again.close()
    assert mr.statistics().current_bytes == 0


def test_a_bounded_pool_waits_for_the_side_stream_instead_of_failing(kernels, streams):
    a, side = streams
    mr = tether.PoolResource(tether.CudaResource(0), initial_size=2 * N, maximum_size=2 * N)
    first = tether.Buffer(2 * N, resource=mr, stream=a.ptr)
    p = first.ptr
    kernels.spin(side, SPIN_SECONDS)
    kernels.fill(side, p, 2 * N, 0xAB)
    first.record_stream(side)
    first.close()
    second = tether.Buffer(2 * N, resource=mr, stream=a.ptr)  # only p exists: waits (out-of-memory retry)
    assert second.ptr == p
    assert side.done, "the block was handed out before the side stream finished"
    kernels.fill(a, second.ptr, 2 * N, 0xCD)
    a.synchronize()
    assert second.tobytes() == b"\xcd" * (2 * N)
    second.close()
    mr.close()


def test_trim_waits_for_recorded_streams_and_gives_the_memory_back(kernels, streams):
    a, side = streams
    pool = tether.PoolResource(tether.CudaResource(0))
    first = tether.Buffer(8 * N, resource=pool, stream=a.ptr)
    kernels.spin(side, SPIN_SECONDS)
    kernels.fill(side, first.ptr, 8 * N, 0xAB)
    first.record_stream(side)
    first.close()
    pool.trim()
    assert side.done
    assert pool.pool_info().pool_size == 0
    pool.close()


def test_many_streams_and_resize(kernels, streams):
    cupy = cupy_or_skip()
    a = streams[0]
    sides = [cupy.cuda.Stream(non_blocking=True) for _ in range(6)]
    mr = tether.PoolResource(tether.CudaResource(0))
    buf = tether.Buffer(N, resource=mr, stream=a.ptr)
    for s in sides:
        kernels.spin(s, SPIN_SECONDS / 4)
        kernels.fill(s, buf.ptr, N, 0xAB)
        buf.record_stream(s)
        buf.record_stream(s)
    buf.record_stream(a)
    buf.record_stream(None)
    old = buf.ptr
    buf.resize(2 * N)  # the old memory waits for every side stream
    nxt = tether.Buffer(N, resource=mr, stream=a.ptr)
    assert nxt.ptr != old
    kernels.fill(a, nxt.ptr, N, 0xCD)
    for s in sides:
        s.synchronize()
    a.synchronize()
    assert nxt.tobytes() == b"\xcd" * N
    nxt.close()
    buf.close()
    mr.close()
