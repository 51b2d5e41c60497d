"""Stream-ordered reuse with kernels in flight.

On stream A a long-running kernel runs first, then a kernel that writes a
pattern into a tether buffer; the buffer is freed on A while both are still
running. A buffer of the same size is then allocated on stream B and written
with another pattern. Either B got different memory, or it got A's block and
B's work waits for A's: B is still busy while A spins, and once everything is
done the memory holds B's pattern (had B reused the block early, A's late
write would have overwritten it).

The streams outlive the resources here (module-scoped); the last tests let
streams die first, as garbage-collected stream objects do."""

from __future__ import annotations

import gc
import textwrap

import pytest

import tether
from gpu_support import MiB, cupy_or_skip, kernels, streams  # noqa: F401 - kernels, streams: fixtures

pytestmark = pytest.mark.gpu

N = 3 * MiB // 2
SPIN_SECONDS = 0.25


def bounded_pool(upstream):
    # Room for one block only: B can only be given A's block.
    return tether.PoolResource(upstream, initial_size="2 MiB", maximum_size="2 MiB")


CASES = {
    "pool_cuda": (lambda: tether.PoolResource(tether.CudaResource(0)), False),
    "pool_cuda_bounded": (lambda: bounded_pool(tether.CudaResource(0)), True),
    "pool_async": (lambda: tether.PoolResource(tether.AsyncResource(0)), False),
    "pool_async_bounded": (lambda: bounded_pool(tether.AsyncResource(0)), True),
    "async": (lambda: tether.AsyncResource(0), False),
    "async_default_pool": (lambda: tether.AsyncResource(0, use_default_pool=True), False),
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    make, must_reuse = CASES[request.param]
    r = make()
    yield r, must_reuse
    up = r.upstream
    r.close()
    if up is not None:
        up.close()


def test_reuse_on_another_stream_waits_for_the_kernel(kernels, streams, case):
    mr, must_reuse = case
    a, b = streams
    size_before = mr.pool_info().pool_size if isinstance(mr, tether.PoolResource) else None

    first = tether.Buffer(N, resource=mr, stream=a.ptr)
    p = first.ptr
    kernels.spin(a, SPIN_SECONDS)
    kernels.fill(a, p, N, 0xAB)
    first.close()  # freed on A, A's kernels still pending

    second = tether.Buffer(N, resource=mr, stream=b.ptr)
    q = second.ptr
    kernels.fill(b, q, N, 0xCD)
    if must_reuse:
        assert q == p, "a pool with room for one block must hand out A's block"
        assert mr.pool_info().pool_size == size_before, "the bounded pool did not grow"
    if q == p:
        assert not b.done, "B reused A's block without waiting for A's kernels"
    a.synchronize()
    b.synchronize()
    assert second.tobytes() == b"\xcd" * N, "A's late write clobbered B's memory"
    second.close()


def test_same_stream_reuse_is_ordered(kernels, streams, case):
    mr, _ = case
    a = streams[0]
    first = tether.Buffer(N, resource=mr, stream=a.ptr)
    kernels.spin(a, SPIN_SECONDS / 5)
    kernels.fill(a, first.ptr, N, 0x11)
    first.close()
    second = tether.Buffer(N, resource=mr, stream=a.ptr)  # must not wait on the host
    assert not a.done
    kernels.fill(a, second.ptr, N, 0x22)
    a.synchronize()
    assert second.tobytes() == b"\x22" * N
    second.close()


def test_moving_a_buffer_to_another_stream(kernels, streams):
    mr = tether.PoolResource(tether.CudaResource(0), initial_size="2 MiB", maximum_size="2 MiB")
    a, b = streams
    buf = tether.Buffer(N, resource=mr, stream=a.ptr)
    p = buf.ptr
    kernels.spin(a, SPIN_SECONDS)
    kernels.fill(a, p, N, 0x33)
    # The caller orders B after A (the contract of set_stream), then frees on B.
    b.wait_event(a.record())
    buf.set_stream(b.ptr)
    assert buf.stream == b.ptr
    buf.close()
    again = tether.Buffer(N, resource=mr, stream=b.ptr)
    assert again.ptr == p
    kernels.fill(b, again.ptr, N, 0x44)
    b.synchronize()
    assert again.tobytes() == b"\x44" * N
    again.close()
    up = mr.upstream
    mr.close()
    up.close()
    gc.collect()


LIFETIME = """
    import cupy
    import tether
    from gpu_support import Kernels
    rt = cupy.cuda.runtime
    k = Kernels()
    mr = {make}
    # Streams made and destroyed explicitly: what a garbage-collected stream object does.
    # b exists before a dies, so it cannot be handed a's recycled handle value.
    a = rt.streamCreateWithFlags(1)
    b = rt.streamCreateWithFlags(1)
    buf = tether.Buffer({n}, resource=mr, stream=a)
    k.spin(cupy.cuda.ExternalStream(a), 0.05)
    k.fill(cupy.cuda.ExternalStream(a), buf.ptr, {n}, 0xAB)
    buf.close()          # freed on a ...
    rt.streamDestroy(a)  # ... and a is gone
    again = tether.Buffer({n}, resource=mr, stream=b)
    k.fill(cupy.cuda.ExternalStream(b), again.ptr, {n}, 0xCD)
    rt.streamSynchronize(b)
    assert again.tobytes() == b"\\xcd" * {n}
    again.close()
    mr.trim()
    mr.close()           # the resource outlives both streams
    rt.streamDestroy(b)
    print("ok")
"""


@pytest.mark.parametrize("make", [
    "tether.PoolResource(tether.CudaResource(0), initial_size='2 MiB', maximum_size='2 MiB')",
    "tether.PoolResource(tether.AsyncResource(0))",
    "tether.AsyncResource(0)",
], ids=["pool_cuda_bounded", "pool_async", "async"])
def test_streams_may_die_before_the_memory_they_freed_is_reused(run_python, make):
    """In a subprocess: a resource must never touch a destroyed stream's handle."""
    cupy_or_skip()
    proc = run_python(textwrap.dedent(LIFETIME.format(make=make, n=N)), env={"PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (
        f"exit status {proc.returncode} (a negative status is the signal that killed it)\n{proc.stderr}")
