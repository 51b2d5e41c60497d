"""TrackingAdaptor: records, the report, stacks, refused frees, threads."""

from __future__ import annotations

import threading

import pytest

import tether


def test_records_oldest_first() -> None:
    with tether.HostResource() as host, tether.TrackingAdaptor(host) as tr:
        assert tr.kind == tether.ResourceKind.TRACKING and tr.name == "tracking"
        assert tr.outstanding() == []
        a = tr.allocate(100, stream=7)
        b = tr.allocate(200, alignment=1024)
        c = tr.allocate(300)
        tr.deallocate(b, 200, alignment=1024)
        recs = tr.outstanding()
        assert [r.ptr for r in recs] == [a, c]
        assert (recs[0].size, recs[0].stream, recs[0].alignment, recs[0].stack) == (100, 7, 256, None)
        assert recs[0].thread == threading.get_native_id()
        assert recs[0].sequence < recs[1].sequence
        assert tr.get_allocated_bytes() == 400
        tr.deallocate(a, 100, stream=7)
        tr.deallocate(c, 300)
        assert tr.outstanding() == []


def test_report() -> None:
    with tether.HostResource() as host, tether.TrackingAdaptor(upstream_mr=host) as tr:
        assert tr.report().startswith("tether tracking adaptor: 0 outstanding allocations, 0 bytes")
        ptrs = [tr.allocate(4096) for _ in range(200)]  # longer than the first buffer tried
        text = tr.report()
        assert text.startswith("tether tracking adaptor: 200 outstanding allocations, 819200 bytes\n")
        assert text.count("size=4096 alignment=256 stream=0x0 thread=") == 200
        assert f"ptr=0x{ptrs[0]:x} " in text
        assert tr.get_outstanding_allocations_str() == text
        for p in ptrs:
            tr.deallocate(p, 4096)


def test_stacks_when_asked() -> None:
    with tether.HostResource() as host, tether.TrackingAdaptor(host, capture_stacks=True) as tr:
        p = tr.allocate(64)
        (rec,) = tr.outstanding()
        assert rec.stack is not None and rec.stack.startswith("  #0 ")
        assert "  #0 " in tr.report()
        tr.deallocate(p, 64)
    with pytest.raises(TypeError, match="capture_stacks"):
        with tether.HostResource() as host:
            tether.TrackingAdaptor(host, capture_stacks="yes")  # type: ignore[arg-type]


def test_refused_frees_change_nothing() -> None:
    with tether.HostResource() as host, tether.TrackingAdaptor(host) as tr:
        mine = tr.allocate(100)
        direct = host.allocate(100)
        with pytest.raises(ValueError, match="tracking"):
            tr.deallocate(direct, 100)
        with pytest.raises(ValueError):
            tr.deallocate(mine, 99)
        assert [r.ptr for r in tr.outstanding()] == [mine]
        tr.deallocate(mine, 100)
        with pytest.raises(ValueError):
            tr.deallocate(mine, 100)
        host.deallocate(direct, 100)


def test_threads_are_recorded() -> None:
    with tether.HostResource() as host, tether.TrackingAdaptor(host) as tr:
        kept: dict[int, list[int]] = {}

        def work() -> None:
            mine = [tr.allocate(64) for _ in range(10)]
            kept[threading.get_native_id()] = mine

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        recs = tr.outstanding()
        assert len(recs) == 40
        assert {r.thread for r in recs} == set(kept)
        for tid, ptrs in kept.items():
            assert {r.ptr for r in recs if r.thread == tid} == set(ptrs)
            for p in ptrs:
                tr.deallocate(p, 64)
        assert tr.outstanding() == []
