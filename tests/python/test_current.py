"""The current-resource table: get/set/using/lock on the host slot."""

from __future__ import annotations

import pytest

import tether


@pytest.fixture
def pool():
    p = tether.PoolResource(tether.HostResource())
    yield p
    p.close()


def test_set_returns_previous_and_get_sees_it(pool):
    default = tether.get_current_resource(tether.HOST)
    assert isinstance(default, tether.HostResource)
    previous = tether.set_current_resource(pool, tether.HOST)
    assert previous == default
    current = tether.get_current_resource(tether.HOST)
    assert current == pool and type(current) is tether.PoolResource and current is not pool
    back = tether.set_current_resource(previous, tether.HOST)
    assert back == pool
    for r in (back, current, previous, default):
        r.close()


def test_the_table_keeps_the_resource_alive(pool):
    stats = tether.StatisticsAdaptor(pool)
    handle = stats.handle
    previous = tether.set_current_resource(stats, tether.HOST)
    stats.close()
    with tether.Buffer(10, device=tether.HOST) as buf:
        assert buf.resource.handle == handle
        current = tether.get_current_resource(tether.HOST)
        assert current.statistics().current_bytes == 10
        current.close()
    tether.set_current_resource(previous, tether.HOST).close()
    previous.close()


def test_using_restores_even_on_error(pool):
    before = tether.get_current_resource(tether.HOST)
    with pytest.raises(KeyError):
        with tether.using(pool, device=tether.HOST) as r:
            assert r is pool
            inner = tether.get_current_resource(tether.HOST)
            assert inner == pool
            inner.close()
            raise KeyError("boom")
    after = tether.get_current_resource(tether.HOST)
    assert after == before and after.handle == before.handle
    after.close()
    before.close()


def test_using_nests(pool):
    outer_before = tether.get_current_resource(tether.HOST)
    with tether.HostResource() as other:
        with tether.using(pool, tether.HOST):
            with tether.using(other, tether.HOST):
                with tether.get_current_resource(tether.HOST) as cur:
                    assert cur.handle == other.handle
            with tether.get_current_resource(tether.HOST) as cur:
                assert cur.handle == pool.handle
    with tether.get_current_resource(tether.HOST) as cur:
        assert cur.handle == outer_before.handle
    outer_before.close()


def test_device_memory_is_refused_in_the_host_slot_and_bad_devices():
    with pytest.raises(TypeError):
        tether.set_current_resource("pool", tether.HOST)
    with pytest.raises(tether.InvalidArgumentError):
        tether.get_current_resource(device=-7)
    with pytest.raises(tether.InvalidArgumentError):
        tether.get_current_resource(device=100000)


def test_unset_slot_gives_none_and_reset(run_python):
    proc = run_python(
        "import tether\n"
        "pool = tether.PoolResource(tether.HostResource())\n"
        "assert tether.set_current_resource(pool, tether.HOST) is None  # slot was unset\n"
        "prev = tether.set_current_resource(None, tether.HOST)  # back to the default\n"
        "assert prev == pool\n"
        "d = tether.get_current_resource(tether.HOST)\n"
        "assert type(d) is tether.HostResource and d != pool\n"
        "print('ok')\n")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


def test_lock(run_python):
    proc = run_python(
        "import tether\n"
        "pool = tether.PoolResource(tether.HostResource())\n"
        "tether.set_current_resource(pool, tether.HOST)\n"
        "assert not tether.is_current_resource_locked(tether.HOST)\n"
        "tether.lock_current_resource(tether.HOST)\n"
        "assert tether.is_current_resource_locked(tether.HOST)\n"
        "try:\n"
        "    tether.set_current_resource(tether.HostResource(), tether.HOST)\n"
        "except tether.LockedError as e:\n"
        "    assert e.code == tether.LockedError.code and isinstance(e, RuntimeError)\n"
        "else:\n"
        "    raise SystemExit('not locked')\n"
        "try:\n"
        "    with tether.using(tether.HostResource(), tether.HOST):\n"
        "        pass\n"
        "except tether.LockedError:\n"
        "    pass\n"
        "assert tether.get_current_resource(tether.HOST) == pool\n"
        "print('ok')\n")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
