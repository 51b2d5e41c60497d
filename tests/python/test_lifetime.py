"""Ownership: objects can be released in any order, closed objects raise,
stale handles are errors and never crashes. Every test here also runs under
the census fixture (conftest.py): no tether object may outlive it."""

from __future__ import annotations

import gc
import itertools

import numpy as np
import pytest

import tether
from tether._ffi import ffi, lib


def live():
    gc.collect()
    return tether.debug.live_objects()


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_release_in_every_order(order, census):
    host = tether.HostResource()
    pool = tether.PoolResource(host, initial_size="1 MiB")
    stats = tether.StatisticsAdaptor(pool)
    buf = tether.Buffer(4096, resource=stats)
    objs = [host, pool, stats, buf]
    assert live() == census + 4
    for i in order:
        objs[i].close()
    assert live() == census


def test_upstream_before_adaptor_and_resource_before_buffer():
    host = tether.HostResource()
    stats = tether.StatisticsAdaptor(tether.PoolResource(host))
    host.close()  # upstream first: the pool keeps it
    buf = tether.Buffer(100, resource=stats)
    stats_again = buf.resource
    stats.close()  # resource before its buffer: the buffer keeps it
    np.asarray(buf)[:] = 1
    assert stats_again.statistics().current_bytes == 100
    buf.close()
    assert stats_again.statistics().current_bytes == 0
    stats_again.close()


def test_garbage_collector_releases_in_its_own_order(census):
    # Drop every Python reference at once: finalizers run in whatever order.
    stats = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    bufs = [tether.Buffer(n, resource=stats) for n in (1, 100, 10000)]
    cycle = [stats, bufs]
    cycle.append(cycle)
    del stats, bufs, cycle
    assert live() == census


def test_table_slot_replaced_while_a_buffer_of_the_old_resource_lives(census):
    old = tether.StatisticsAdaptor(tether.HostResource())
    previous = tether.set_current_resource(old, tether.HOST)
    buf = tether.Buffer(256, device=tether.HOST)  # from `old`, via the table
    new = tether.PoolResource(tether.HostResource())
    replaced = tether.set_current_resource(new, tether.HOST)
    assert replaced == old
    replaced.close()
    old.close()  # now only the buffer keeps `old`
    stats = buf.resource
    assert stats.statistics().current_bytes == 256
    buf.close()  # frees into `old`, not into `new`
    assert stats.statistics().current_bytes == 0
    assert new.pool_info().pool_size == 0  # `new` never saw it
    stats.close()
    tether.set_current_resource(previous, tether.HOST).close()
    previous.close()
    new.close()
    assert live() == census


def test_double_close_is_a_no_op():
    r = tether.HostResource()
    b = tether.Buffer(10, resource=r)
    for _ in range(3):
        b.close()
        r.close()
    assert r.closed and b.closed


def test_entering_a_closed_object_raises():
    r = tether.HostResource()
    r.close()
    with pytest.raises(tether.InvalidHandleError):
        with r:
            pass


def test_with_closes():
    with tether.HostResource() as r, tether.Buffer(8, resource=r) as b:
        assert not r.closed and not b.closed
    assert r.closed and b.closed


def test_closed_objects_raise_invalid_handle():
    r = tether.PoolResource(tether.HostResource())
    b = tether.Buffer(16, resource=r)
    r.close()
    b.close()
    for call in (lambda: r.allocate(1), lambda: r.deallocate(0, 0), lambda: r.pool_info(), lambda: r.kind,
                 lambda: r.name, lambda: r.upstream, lambda: r.handle, lambda: r.trim(),
                 lambda: tether.Buffer(1, resource=r), lambda: tether.StatisticsAdaptor(r),
                 lambda: tether.set_current_resource(r, tether.HOST),
                 lambda: b.size, lambda: b.ptr, lambda: b.resource, lambda: b.tobytes(),
                 lambda: b.copy_from_host(b"x"), lambda: b.resize(2), lambda: b.__dlpack__(),
                 lambda: np.asarray(b), lambda: b.memoryview()):
        with pytest.raises(tether.InvalidHandleError, match="closed"):
            call()
    assert "closed" in repr(r) and "closed" in repr(b)


def test_stale_raw_handle_is_invalid_handle_not_a_crash():
    r = tether.HostResource()
    raw = ffi.cast("tether_resource_t*", r.handle)  # a copy of the pointer, owning nothing
    r.close()
    assert lib.tether_resource_retain(raw) == lib.TETHER_ERROR_INVALID_HANDLE
    assert lib.tether_resource_release(raw) == lib.TETHER_ERROR_INVALID_HANDLE
    out = ffi.new("void**")
    assert lib.tether_resource_allocate(raw, 10, 0, 0, out) == lib.TETHER_ERROR_INVALID_HANDLE
    assert "released" in ffi.string(lib.tether_last_error_message()).decode()
    assert ffi.string(lib.tether_resource_get_name(raw)) == b""
    with pytest.raises(tether.InvalidHandleError):
        tether.Resource.from_handle(int(ffi.cast("uintptr_t", raw)))
    with pytest.raises(tether.InvalidHandleError):
        r.allocate(10)


def test_stale_buffer_handle():
    b = tether.Buffer(10, resource=tether.HostResource())
    h = b.handle
    b.close()
    raw = ffi.cast("tether_buffer_t*", h)
    assert lib.tether_buffer_retain(raw) == lib.TETHER_ERROR_INVALID_HANDLE
    size = ffi.new("size_t*")
    assert lib.tether_buffer_get_size(raw, size) == lib.TETHER_ERROR_INVALID_HANDLE
    for owned in (False, True):
        with pytest.raises(tether.InvalidHandleError):
            tether.Buffer.from_handle(h, owned=owned)


@pytest.mark.parametrize("forged", [0, 1, 0xDEADBEEF, 0x7FFFFFFF00000001, 2**64 - 1])
def test_forged_handles(forged):
    with pytest.raises(tether.InvalidHandleError):
        tether.Resource.from_handle(forged)
    with pytest.raises(tether.InvalidHandleError):
        tether.Buffer.from_handle(forged)


def test_a_buffer_handle_is_not_a_resource_handle():
    with tether.HostResource() as r, tether.Buffer(8, resource=r) as b:
        with pytest.raises(tether.InvalidHandleError):
            tether.Resource.from_handle(b.handle)
        with pytest.raises(tether.InvalidHandleError):
            tether.Buffer.from_handle(r.handle)


def test_close_while_other_wrappers_live():
    with tether.HostResource() as r:
        w = tether.Resource.from_handle(r.handle)
        r.close()
        assert w.allocate(0) == 0  # w holds its own reference
        w.close()


@pytest.mark.no_census
def test_orphans_are_kept_and_counted():
    before = (tether.debug.orphaned_resources(), tether.debug.orphaned_bytes())
    pool = tether.PoolResource(tether.HostResource())
    ptr = pool.allocate(1000)  # raw allocation, never given back
    assert ptr
    pool.close()
    assert tether.debug.orphaned_resources() == before[0] + 1
    assert tether.debug.orphaned_bytes() == before[1] + 1000
