"""LimitingAdaptor: the limit, its queries, RMM spellings, threads, refused frees."""

from __future__ import annotations

import pytest

import tether
from thread_support import run_threads


def test_limit_holds_and_refusal_changes_nothing() -> None:
    with tether.HostResource() as host, tether.LimitingAdaptor(host, "4 KiB") as lim:
        assert lim.kind == tether.ResourceKind.LIMITING and lim.name == "limiting"
        assert lim.limit == 4096 and lim.used_bytes == 0
        a = lim.allocate(3000)
        with pytest.raises(tether.OutOfMemoryError, match="limit of 4096"):
            lim.allocate(1097)
        assert lim.used_bytes == 3000
        b = lim.allocate(1096)
        assert lim.get_allocated_bytes() == 4096 and lim.get_allocation_limit() == 4096
        lim.deallocate(a, 3000)
        lim.deallocate(b, 1096)
        assert lim.used_bytes == 0


def test_rmm_spellings_and_upstream() -> None:
    with tether.HostResource() as host:
        with tether.LimitingAdaptor(upstream_mr=host, allocation_limit=1 << 20) as lim:
            assert lim.limit == 1 << 20
            with lim.upstream as up:
                assert up == host
        with pytest.raises(TypeError, match="limit"):
            tether.LimitingAdaptor(host)
        with pytest.raises(TypeError, match="upstream"):
            tether.LimitingAdaptor(limit=10)
        with pytest.raises(TypeError, match="not both"):
            tether.LimitingAdaptor(host, 1, allocation_limit=2)
        with pytest.raises(ValueError, match="limit"):
            tether.LimitingAdaptor(host, "-1 KiB")


def test_refuses_foreign_frees() -> None:
    with tether.HostResource() as host, tether.LimitingAdaptor(host, 1 << 20) as lim:
        mine = lim.allocate(100)
        direct = host.allocate(100)
        with pytest.raises(ValueError):
            lim.deallocate(direct, 100)
        with pytest.raises(ValueError):
            host.deallocate(mine, 100)
        assert lim.used_bytes == 100
        lim.deallocate(mine, 100)
        host.deallocate(direct, 100)


def test_exact_under_threads() -> None:
    block, slots = 1024, 4
    with tether.HostResource() as host, tether.StatisticsAdaptor(host) as stats, \
            tether.LimitingAdaptor(stats, block * slots) as lim:

        def work(_: int) -> None:
            for _ in range(2000):
                try:
                    p = lim.allocate(block)
                except tether.OutOfMemoryError:
                    continue
                lim.deallocate(p, block)

        run_threads(work, 8)
        assert stats.statistics().peak_bytes <= block * slots
        assert lim.used_bytes == 0


def test_buffers_through_the_adaptor() -> None:
    with tether.HostResource() as host, tether.LimitingAdaptor(host, "1 MiB") as lim:
        with tether.Buffer("512 KiB", resource=lim) as buf:
            assert lim.used_bytes == 512 * 1024
            with pytest.raises(tether.OutOfMemoryError):
                tether.Buffer("600 KiB", resource=lim)
            assert buf.size == 512 * 1024
        assert lim.used_bytes == 0
