"""StatisticsAdaptor's counter stack and the tether.statistics profiler."""

from __future__ import annotations

import pytest

import tether
import tether.statistics as ts


def test_push_pop_fold_like_rmm() -> None:
    with tether.StatisticsAdaptor(tether.HostResource()) as st:
        a = st.allocate(1000)
        before = st.push_counters()
        assert before.current_bytes == 1000
        assert st.statistics().current_bytes == 0
        b = st.allocate(300)
        c = st.allocate(200)
        st.deallocate(c, 200)
        popped = st.pop_counters()
        assert (popped.current_bytes, popped.peak_bytes, popped.total_bytes) == (300, 500, 500)
        assert (popped.current_count, popped.peak_count, popped.total_count) == (1, 2, 2)
        s = st.statistics()
        assert (s.current_bytes, s.peak_bytes, s.total_bytes) == (1300, 1500, 1500)
        with pytest.raises(ValueError, match="no counter set"):
            st.pop_counters()
        st.deallocate(a, 1000)
        st.deallocate(b, 300)


def test_freeing_older_memory_inside_a_set() -> None:
    with tether.StatisticsAdaptor(tether.HostResource()) as st:
        a = st.allocate(1000)
        st.push_counters()
        st.deallocate(a, 1000)
        assert st.statistics().current_bytes == 0  # -1000, reported as 0
        st.pop_counters()
        assert st.statistics().current_bytes == 0  # folded exactly


def test_profiler_decorator_and_context_manager() -> None:
    records = ts.ProfilerRecords()
    with tether.StatisticsAdaptor(tether.HostResource()) as st:

        @ts.profiler(records=records, adaptor=st)
        def work(n: int) -> int:
            ptrs = [st.allocate(1024) for _ in range(n)]
            for p in ptrs:
                st.deallocate(p, 1024)
            return n

        assert work(3) == 3
        assert work(5) == 5
        with ts.profiler(name="block", records=records, adaptor=st):
            p = st.allocate("1 MiB")
            st.deallocate(p, "1 MiB")
            work(1)  # counted in its own record and in the block's
        recs = records.records
        (fname,) = [k for k in recs if k.endswith("(test_profiler_decorator_and_context_manager.<locals>.work)")]
        assert fname.startswith(__file__.rsplit(".", 1)[0])
        w = recs[fname]
        assert (w.num_calls, w.memory_total, w.memory_peak, w.count_total) == (3, 9 * 1024, 5 * 1024, 9)
        blk = recs["block"]
        assert (blk.num_calls, blk.memory_total, blk.memory_peak, blk.count_total) == (1, (1 << 20) + 1024,
                                                                                       1 << 20, 2)
        text = records.report()
        assert text.splitlines()[0] == "Memory profile (tether.statistics)"
        assert text.index(" block") < text.index(fname)  # ordered by memory_peak
        assert "1,048,576" in text
        assert str(records) == text
        assert st.statistics().total_bytes == 9 * 1024 + (1 << 20)  # all folded into the first set
        with pytest.raises(ValueError, match="ordered_by"):
            records.report("bytes")  # type: ignore[arg-type]


def test_profiler_records_on_exceptions_and_needs_a_name_as_context() -> None:
    records = ts.ProfilerRecords()
    with tether.StatisticsAdaptor(tether.HostResource()) as st:
        @ts.profiler(name="fails", records=records, adaptor=st)
        def fails() -> None:
            p = st.allocate(64)
            st.deallocate(p, 64)
            raise KeyError("boom")

        with pytest.raises(KeyError):
            fails()
        assert records.records["fails"].memory_total == 64
        with pytest.raises(ValueError, match="name"):
            with ts.profiler(adaptor=st):
                pass
        with pytest.raises(TypeError, match="StatisticsAdaptor"):
            ts.profiler(adaptor=tether.HostResource())  # type: ignore[arg-type]


def test_current_resource_functions_on_the_host_slot() -> None:
    assert ts.get_statistics(tether.HOST) is None  # the default host resource is no adaptor
    assert ts.push_statistics(tether.HOST) is None
    with ts.statistics(tether.HOST) as st:  # wraps the current host resource for the block
        with tether.Buffer("64 KiB", device=tether.HOST) as buf:
            assert buf.size == 65536
            s = ts.get_statistics(tether.HOST)
            assert s is not None and s.current_bytes == 65536
        with ts.statistics(tether.HOST) as inner:  # now pushes a set on the same adaptor
            assert inner == st
            tether.Buffer("1 KiB", device=tether.HOST).close()
            s = ts.get_statistics(tether.HOST)
            assert s is not None and s.total_bytes == 1024
        s = ts.get_statistics(tether.HOST)
        assert s is not None and s.total_bytes == 65536 + 1024
    assert ts.get_statistics(tether.HOST) is None  # restored
    with tether.get_current_resource(tether.HOST) as cur:
        assert cur.kind == tether.ResourceKind.HOST
    records = ts.ProfilerRecords()
    with ts.profiler(name="nothing", records=records, device=tether.HOST):  # statistics off: a no-op
        tether.Buffer(16, device=tether.HOST).close()
    assert records.records == {}
    assert "No records" in records.report()


def test_enable_statistics_is_idempotent() -> None:
    with tether.get_current_resource(tether.HOST) as before:
        try:
            a = ts.enable_statistics(tether.HOST)
            b = ts.enable_statistics(tether.HOST)
            assert a == b and isinstance(a, tether.StatisticsAdaptor)
            with a.upstream as up:
                assert up == before
            b.close()
            with tether.Buffer(100, device=tether.HOST):
                s = ts.get_statistics(tether.HOST)
                assert s is not None and s.current_bytes == 100
            a.close()
        finally:
            replaced = tether.set_current_resource(before, tether.HOST)
            if replaced is not None:
                replaced.close()


def test_push_pop_racing_threads_count_every_call_once() -> None:
    # Threads allocate and free 64 B (cffi releases the GIL around each call,
    # so they really overlap in C) while this thread pushes and pops: every
    # popped set holds whole calls (bytes = 64 x count) and the first set ends
    # with every allocation counted, nothing left current.
    import threading

    threads, pairs, size = 4, 3000, 64
    with tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource())) as st:
        start = threading.Barrier(threads + 1)

        def work() -> None:
            start.wait()
            for _ in range(pairs):
                st.deallocate(st.allocate(size), size)

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers:
            w.start()
        start.wait()
        popped: list[tether.Statistics] = []
        while any(w.is_alive() for w in workers) or not popped:
            st.push_counters()
            popped.append(st.pop_counters())
        for w in workers:
            w.join()
        for s in popped:
            assert s.total_bytes == size * s.total_count
            assert s.current_bytes == size * s.current_count
            assert s.current_count <= threads
        final = st.statistics()
        assert final.total_count == threads * pairs
        assert final.total_bytes == threads * pairs * size
        assert (final.current_count, final.current_bytes) == (0, 0)
        assert 1 <= final.peak_count <= threads
