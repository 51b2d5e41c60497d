"""8 threads hammer the same table slot, the same pool and the same objects.

cffi releases the GIL around every tether call, so these calls really run
concurrently inside libtether. Afterwards every count must add up and the
census must be back to its baseline."""

from __future__ import annotations

import random

import numpy as np

import tether
from thread_support import THREADS, run_threads

ITERATIONS = 1500


def test_get_set_allocate_free_on_shared_slot_and_pool():
    stats = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource(), growth_size="256 KiB"))
    candidates = [stats, tether.StatisticsAdaptor(stats), tether.PoolResource(stats)]
    original = tether.get_current_resource(tether.HOST)
    counts = [0] * THREADS

    def work(i):
        rng = random.Random(i)
        kept = []
        for k in range(ITERATIONS):
            op = rng.randrange(5)
            if op == 0:
                prev = tether.set_current_resource(rng.choice(candidates), tether.HOST)
                if prev is not None:
                    prev.close()
            elif op == 1:
                with tether.get_current_resource(tether.HOST) as cur:
                    n = rng.randrange(1, 5000)
                    p = cur.allocate(n)
                    cur.deallocate(p, n)
            elif op == 2:
                buf = tether.Buffer(rng.randrange(0, 3000), device=tether.HOST)
                np.asarray(buf)[:] = i
                kept.append(buf)
            elif op == 3:
                n = rng.randrange(1, 3000)
                buf = tether.Buffer(n, resource=stats)
                counts[i] += 1
                buf.copy_from_host(bytes([i]) * n)
                assert buf.tobytes() == bytes([i]) * n
                buf.close()
            elif kept:
                kept.pop(rng.randrange(len(kept))).close()
        for buf in kept:
            buf.close()

    run_threads(work)
    tether.set_current_resource(original, tether.HOST).close()
    candidates[2].trim()  # the pool over `stats` holds chunks of it; give them back
    s = stats.statistics()
    assert s.current_bytes == 0 and s.current_count == 0
    assert s.total_count >= sum(counts)
    for r in [original, *reversed(candidates)]:
        r.close()


def test_close_races_release_exactly_once():
    for _ in range(200):
        r = tether.HostResource()
        keeper = tether.Resource.from_handle(r.handle)  # a second reference to the same handle
        run_threads(lambda i: r.close())
        assert r.closed
        assert keeper.allocate(0) == 0  # still alive: close() released one reference, not several
        keeper.close()


def test_buffers_closed_from_other_threads_than_created():
    pool = tether.PoolResource(tether.HostResource())
    bufs = [tether.Buffer(100, resource=pool) for _ in range(THREADS * 200)]

    def work(i):
        for b in bufs[i::THREADS]:
            b.close()

    run_threads(work)
    assert pool.pool_info().free_bytes == pool.pool_info().pool_size
    pool.close()


def test_run_threads_reraises_a_failing_thread_and_joins_the_rest():
    done = []

    def work(i):
        if i == 3:
            raise KeyError("thread 3")
        done.append(i)

    try:
        run_threads(work, 6)
    except KeyError as e:
        assert e.args == ("thread 3",)
    else:
        raise AssertionError("run_threads swallowed the failure")
    assert sorted(done) == [0, 1, 2, 4, 5]
