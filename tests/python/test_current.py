"""The current-resource table: get/set/set-if-unset/push/pop/using/lock on the host slot."""

from __future__ import annotations

import asyncio
import threading
import time

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


def _current_handle(device=tether.HOST):
    with tether.get_current_resource(device) as cur:
        return cur.handle


def test_using_is_per_thread_and_blocks_may_overlap():
    """A enters, B enters, A leaves, B leaves: each thread sees only its own
    resource (also for allocations), and the process slot never changes."""
    before = _current_handle()
    a_entered, b_entered, a_left = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}
    errors: list[BaseException] = []

    def run(name, res, enter_after, entered, leave_after, left):
        try:
            if enter_after is not None:
                assert enter_after.wait(30)
            with tether.using(res, tether.HOST):
                entered.set()
                if leave_after is not None:
                    assert leave_after.wait(30)
                seen[name] = _current_handle()
                with tether.Buffer(64, device=tether.HOST) as buf:
                    with buf.resource as r:
                        seen[name + "_buffer"] = r.handle
            if left is not None:
                left.set()
            seen[name + "_after"] = _current_handle()
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            for ev in (a_entered, b_entered, a_left):
                ev.set()

    with tether.HostResource() as ra, tether.StatisticsAdaptor(tether.HostResource()) as rb:
        ta = threading.Thread(target=run, args=("a", ra, None, a_entered, b_entered, a_left))
        tb = threading.Thread(target=run, args=("b", rb, a_entered, b_entered, a_left, None))
        ta.start()
        tb.start()
        assert a_entered.wait(30)
        assert _current_handle() == before  # the main thread never sees an override
        ta.join(60)
        tb.join(60)
        assert not errors, errors
        assert seen["a"] == ra.handle and seen["a_buffer"] == ra.handle
        assert seen["b"] == rb.handle and seen["b_buffer"] == rb.handle
        assert seen["a_after"] == before and seen["b_after"] == before
        assert _current_handle() == before


def test_using_refuses_none_and_locked_slots_are_checked_on_entry():
    with pytest.raises(TypeError, match="resource"):
        with tether.using(None, tether.HOST):
            pass
    with pytest.raises(TypeError, match="resource"):
        tether.push_current_resource(None, tether.HOST)
    with pytest.raises(TypeError, match="resource"):
        tether.set_current_resource_if_unset(None)


def test_set_inside_using_changes_the_process_slot_only(pool):
    before = tether.get_current_resource(tether.HOST)
    with tether.HostResource() as app:
        with tether.using(pool):  # host memory: the host slot
            previous = tether.set_current_resource(app, tether.HOST)
            assert previous == before
            assert _current_handle() == pool.handle  # still this block's override
            other = []
            t = threading.Thread(target=lambda: other.append(_current_handle()))
            t.start()
            t.join()
            assert other == [app.handle]
        assert _current_handle() == app.handle
        tether.set_current_resource(previous, tether.HOST).close()
    previous.close()
    before.close()


def test_push_and_pop(pool):
    before = _current_handle()
    tether.push_current_resource(pool)  # device=None: the slot of the memory (host)
    tether.push_current_resource(pool, tether.HOST)
    assert _current_handle() == pool.handle
    tether.pop_current_resource(tether.HOST)
    assert _current_handle() == pool.handle
    tether.pop_current_resource(tether.HOST)
    assert _current_handle() == before
    with pytest.raises(tether.InvalidArgumentError, match="nothing was pushed for the host slot on this thread"):
        tether.pop_current_resource(tether.HOST)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        tether.pop_current_resource(tether.HOST)


def test_pushed_resource_is_kept_alive_by_the_stack():
    res = tether.HostResource()
    handle = res.handle
    tether.push_current_resource(res, tether.HOST)
    res.close()  # only the thread's stack holds it now
    with tether.get_current_resource(tether.HOST) as cur:
        assert cur.handle == handle
    tether.pop_current_resource(tether.HOST)
    assert _current_handle() != handle


def test_misnested_exit_raises_and_keeps_the_stack_balanced():
    before = _current_handle()
    with tether.HostResource() as a, tether.HostResource() as b:
        outer, inner = tether.using(a, tether.HOST), tether.using(b, tether.HOST)
        outer.__enter__()
        inner.__enter__()
        with pytest.raises(RuntimeError, match="must nest per thread"):
            outer.__exit__(None, None, None)  # leaves first although it entered first
        with pytest.raises(RuntimeError, match="must nest per thread"):
            inner.__exit__(None, None, None)
    assert _current_handle() == before
    with pytest.raises(ValueError):  # both overrides were popped
        tether.pop_current_resource(tether.HOST)


def test_asyncio_tasks_interleaving_on_one_thread_raise():
    """using() is per thread, not per task: interleaved blocks are detected."""
    before = _current_handle()

    async def main(a, b):
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def first():  # enters first, leaves while the second task is inside
            try:
                with tether.using(a, tether.HOST):
                    a_in.set()
                    await b_in.wait()
            finally:
                a_out.set()

        async def second():
            await a_in.wait()
            with tether.using(b, tether.HOST):
                b_in.set()
                await a_out.wait()

        return await asyncio.gather(first(), second(), return_exceptions=True)

    with tether.HostResource() as a, tether.HostResource() as b:
        results = asyncio.run(main(a, b))
    assert all(isinstance(r, RuntimeError) for r in results), results
    assert _current_handle() == before


def test_set_current_resource_if_unset(pool):
    was = tether.set_current_resource(None, tether.HOST)  # make the slot unset
    default = tether.get_current_resource(tether.HOST)  # its default now exists: not "set"
    with tether.HostResource() as lib2, tether.HostResource() as app:
        assert tether.set_current_resource_if_unset(pool) is True  # device=None: the host slot
        assert _current_handle() == pool.handle
        assert default.handle != pool.handle
        assert tether.set_current_resource_if_unset(lib2, tether.HOST) is False  # set by the first library
        back = tether.set_current_resource(app, tether.HOST)
        assert back == pool
        back.close()
        assert tether.set_current_resource_if_unset(lib2) is False  # the application's choice wins
        assert _current_handle() == app.handle
        tether.set_current_resource(None, tether.HOST).close()  # unset again
        assert tether.set_current_resource_if_unset(lib2) is True
        assert _current_handle() == lib2.handle
        with tether.using(pool):  # set_if_unset changes the process slot, not this thread's override
            assert tether.set_current_resource_if_unset(app) is False
            assert _current_handle() == pool.handle
        tether.set_current_resource(None, tether.HOST).close()
    default.close()
    if was is not None:
        was.close()
    tether.get_current_resource(tether.HOST).close()  # a fresh default, as the census expects


def test_set_if_unset_in_a_fresh_process_and_lock(run_python):
    proc = run_python(
        "import tether\n"
        "lib = tether.PoolResource(tether.HostResource())\n"
        "assert tether.set_current_resource_if_unset(lib) is True  # nothing was set\n"
        "assert tether.get_current_resource(tether.HOST) == lib\n"
        "assert tether.set_current_resource(None, tether.HOST) == lib\n"
        "tether.lock_current_resource(tether.HOST)  # an unset slot: locks its default\n"
        "assert tether.set_current_resource_if_unset(lib) is False\n"
        "d = tether.get_current_resource(tether.HOST)\n"
        "assert type(d) is tether.HostResource and d.handle != lib.handle\n"
        "try:\n"
        "    tether.push_current_resource(lib)\n"
        "except tether.LockedError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('push onto a locked slot')\n"
        "print('ok')\n")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


def test_override_pushed_before_a_lock_can_be_popped(run_python):
    proc = run_python(
        "import tether\n"
        "mine = tether.HostResource()\n"
        "with tether.using(mine):\n"
        "    tether.lock_current_resource(tether.HOST)\n"
        "    assert tether.get_current_resource(tether.HOST).handle == mine.handle\n"
        "assert tether.get_current_resource(tether.HOST).handle != mine.handle\n"
        "print('ok')\n")
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


def test_a_thread_that_exits_inside_using_releases_its_override():
    res = tether.HostResource()
    handle = res.handle
    before = tether.debug.live_objects()

    def leave_pushed():
        tether.push_current_resource(res, tether.HOST)  # never popped

    t = threading.Thread(target=leave_pushed)
    t.start()
    t.join()
    res.close()
    # join() returns once the Python thread is done, a moment before the OS
    # thread runs its thread_local destructors: wait for those.
    deadline = time.monotonic() + 30
    while tether.debug.live_objects() != before - 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tether.debug.live_objects() == before - 1  # the exited thread's stack let go
    assert _current_handle() != handle
