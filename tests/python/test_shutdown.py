"""Interpreter shutdown with live tether objects exits cleanly: status 0 and
nothing on stderr, whatever order the finalizers run in."""

from __future__ import annotations

import textwrap

import pytest

SCRIPTS = {
    "globals: pools, buffers and a set table slot": """
        import tether
        host = tether.HostResource()
        pool = tether.PoolResource(host, initial_size="4 MiB")
        stats = tether.StatisticsAdaptor(pool)
        tether.set_current_resource(stats, tether.HOST)
        bufs = [tether.Buffer(n, device=tether.HOST) for n in (1, 1000, 100000)]
        raw = pool.allocate(4096)  # never given back
    """,
    "reference cycles": """
        import tether
        class Node:
            pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        a.pool = tether.PoolResource(tether.HostResource())
        b.buf = tether.Buffer(64, resource=a.pool)
        a.self = a
        tether.set_current_resource(a.pool, tether.HOST)
        del a, b
    """,
    "user __del__ that closes at shutdown": """
        import tether
        class Owner:
            def __init__(self):
                self.res = tether.StatisticsAdaptor(tether.HostResource())
                self.buf = tether.Buffer(10, resource=self.res)
            def __del__(self):
                self.buf.close()
                self.res.close()
        keep = Owner()
        keep.me = keep  # in a cycle, collected late
        other = Owner()
    """,
    "live exports: numpy views, DLPack capsules, memoryviews": """
        import numpy as np
        import tether
        pool = tether.PoolResource(tether.HostResource())
        buf = tether.Buffer(128, resource=pool)
        view = np.asarray(buf)
        dl = np.from_dlpack(buf)
        capsule = buf.__dlpack__()
        capsule_v = buf.__dlpack__(max_version=(1, 0))
        mv = buf.memoryview()
        buf.close()
        pool.close()
    """,
    "daemon threads still allocating": """
        import threading, time
        import tether
        pool = tether.PoolResource(tether.HostResource())
        tether.set_current_resource(pool, tether.HOST)
        def spin():
            while True:
                b = tether.Buffer(256, device=tether.HOST)
                with tether.get_current_resource(tether.HOST) as r:
                    p = r.allocate(64)
                    r.deallocate(p, 64)
                b.close()
        for _ in range(4):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.2)
    """,
    "atexit handler and sys.exit inside using()": """
        import atexit, sys
        import tether
        pool = tether.PoolResource(tether.HostResource())
        @atexit.register
        def late():
            b = tether.Buffer(32, device=tether.HOST)
            tether.set_current_resource(tether.HostResource(), tether.HOST)
        with tether.using(pool, tether.HOST):
            buf = tether.Buffer(16, device=tether.HOST)
            sys.exit(0)
    """,
    "overrides still pushed at exit, on the main thread and in daemon threads": """
        import threading, time
        import tether
        pool = tether.PoolResource(tether.HostResource())
        tether.push_current_resource(pool, tether.HOST)  # never popped: released at exit
        kept = tether.Buffer(64, device=tether.HOST)
        def spin():
            mine = tether.PoolResource(tether.HostResource())
            with tether.using(mine, tether.HOST):
                while True:
                    tether.Buffer(128, device=tether.HOST).close()
        for _ in range(3):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.2)
        pool.close()
    """,
    "module attribute of an imported module": """
        import sys, types
        import tether
        mod = types.ModuleType("holder")
        mod.pool = tether.PoolResource(tether.HostResource())
        mod.buf = tether.Buffer(8, resource=mod.pool)
        mod.stats = tether.StatisticsAdaptor(mod.pool)
        sys.modules["holder"] = mod
        tether.set_current_resource(mod.stats, tether.HOST)
    """,
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_clean_exit(run_python, name):
    proc = run_python(textwrap.dedent(SCRIPTS[name]))
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
