"""Buffer.record_stream without a GPU: host memory has no streams to wait for
(the free is immediate), the stream argument is checked like every stream
argument, and a closed buffer raises. The waiting itself: test_gpu_record_stream.py."""

from __future__ import annotations

import pytest

import tether


class CudaStreamLike:
    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_host_memory_is_freed_at_once_whatever_was_recorded():
    stats = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    buf = tether.Buffer(4096, resource=stats)
    p = buf.ptr
    for s in (None, 0, 1, 7, 7, CudaStreamLike(12)):
        buf.record_stream(s)
    buf.close()
    assert stats.statistics().current_bytes == 0
    again = tether.Buffer(4096, resource=stats)
    assert again.ptr == p
    again.close()


def test_record_then_resize_keeps_the_contents():
    buf = tether.Buffer(16, device=tether.HOST)
    buf.copy_from_host(b"0123456789abcdef")
    buf.record_stream(3)
    buf.resize(32)
    assert buf.tobytes()[:16] == b"0123456789abcdef"
    buf.close()


@pytest.mark.parametrize("bad", [-1, 2**64, "stream", 1.5])
def test_a_bad_stream_is_refused_naming_it(bad):
    buf = tether.Buffer(16, device=tether.HOST)
    with pytest.raises((TypeError, ValueError), match="stream"):
        buf.record_stream(bad)
    buf.close()


def test_a_closed_buffer_raises():
    buf = tether.Buffer(16, device=tether.HOST)
    buf.close()
    with pytest.raises(tether.InvalidHandleError):
        buf.record_stream(1)
