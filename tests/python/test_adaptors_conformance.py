"""What every new adaptor (limiting, tracking, aligned) must do over host and
CUDA upstreams: many sizes written and read back, frees from another thread,
the upstream closed first, foreign frees refused, statistics below balanced."""

from __future__ import annotations

import ctypes
import threading
from typing import Callable

import pytest

import tether

Factory = Callable[[tether.Resource], tether.Resource]

ADAPTORS: dict[str, Factory] = {
    "limiting": lambda up: tether.LimitingAdaptor(up, "1 GiB"),
    "tracking": lambda up: tether.TrackingAdaptor(up),
    "tracking-stacks": lambda up: tether.TrackingAdaptor(up, capture_stacks=True),
    "aligned": lambda up: tether.AlignedAdaptor(up, "64 KiB", threshold="1 KiB"),
    "pool-over-limiting": lambda up: tether.PoolResource(tether.LimitingAdaptor(up, "1 GiB")),
}

SIZES = [1, 7, 64, 255, 256, 1000, 1024, 4096, 65536, 1 << 20]


@pytest.fixture(params=sorted(ADAPTORS))
def adaptor_over_statistics(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    stats = tether.StatisticsAdaptor(tether.HostResource())
    adaptor = ADAPTORS[request.param](stats)
    yield adaptor, stats
    adaptor.close()
    stats.close()


def test_sizes_contents_and_balance(adaptor_over_statistics) -> None:  # type: ignore[no-untyped-def]
    adaptor, stats = adaptor_over_statistics
    ptrs = [(adaptor.allocate(n), n) for n in SIZES]
    for i, (p, n) in enumerate(ptrs):
        ctypes.memset(p, i + 1, n)
    for i, (p, n) in enumerate(ptrs):
        assert ctypes.string_at(p, n) == bytes([i + 1]) * n
    assert adaptor.allocate(0) == 0
    for p, n in ptrs:
        adaptor.deallocate(p, n)
    adaptor.trim()
    assert stats.statistics().current_bytes == 0  # everything went back upstream


def test_free_on_another_thread(adaptor_over_statistics) -> None:  # type: ignore[no-untyped-def]
    adaptor, stats = adaptor_over_statistics
    ptrs: list[int] = []
    t = threading.Thread(target=lambda: ptrs.extend(adaptor.allocate(4096) for _ in range(50)))
    t.start()
    t.join()
    for p in ptrs:
        adaptor.deallocate(p, 4096)
    adaptor.trim()
    assert stats.statistics().current_bytes == 0


def test_concurrent_threads(adaptor_over_statistics) -> None:  # type: ignore[no-untyped-def]
    adaptor, stats = adaptor_over_statistics
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(300):
                n = 1 + (seed * 7919 + i * 104729) % 8192
                p = adaptor.allocate(n)
                ctypes.memset(p, seed, min(n, 64))
                assert ctypes.string_at(p, min(n, 64)) == bytes([seed]) * min(n, 64)
                adaptor.deallocate(p, n)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    adaptor.trim()
    assert stats.statistics().current_bytes == 0


def test_foreign_free_refused(adaptor_over_statistics) -> None:  # type: ignore[no-untyped-def]
    adaptor, stats = adaptor_over_statistics
    direct = stats.allocate(128)
    with pytest.raises(ValueError):
        adaptor.deallocate(direct, 128)
    mine = adaptor.allocate(128)
    with pytest.raises(ValueError):
        stats.deallocate(mine, 128)
    adaptor.deallocate(mine, 128)
    stats.deallocate(direct, 128)


@pytest.mark.parametrize("name", sorted(ADAPTORS))
def test_upstream_closed_first(name: str) -> None:
    host = tether.HostResource()
    adaptor = ADAPTORS[name](host)
    host.close()  # the adaptor keeps it alive
    p = adaptor.allocate(1000)
    ctypes.memset(p, 7, 1000)
    adaptor.deallocate(p, 1000)
    with adaptor.upstream as up:
        assert up.kind in (tether.ResourceKind.HOST, tether.ResourceKind.LIMITING)
    adaptor.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ADAPTORS))
def test_over_cuda_upstreams(name: str) -> None:
    for make in (lambda: tether.CudaResource(0), lambda: tether.AsyncResource(0)):
        with make() as up, ADAPTORS[name](up) as adaptor:
            assert adaptor.device == 0 and adaptor.device_accessible
            ptrs = [(adaptor.allocate(n, stream=0), n) for n in SIZES]
            for p, n in ptrs:
                adaptor.deallocate(p, n, stream=0)
