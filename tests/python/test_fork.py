"""multiprocessing with the 'fork' start method while threads allocate through tether.

Python's multiprocessing forks by default on Linux, and a program that has
threads working with tether.Buffer at that moment must get usable children:
no deadlock in a tether lock held by a thread that does not exist in the
child, no release waiting for such a thread. The scenario runs in a fresh
interpreter (a hung child must not take pytest with it), which fails if any
child does not exit 0 within its timeout."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent(
    """
    import multiprocessing as mp
    import os
    import sys
    import threading
    import warnings

    import tether

    # Python 3.12+ warns that fork() with threads may deadlock: that is what we test.
    warnings.simplefilter("ignore", DeprecationWarning)

    FORKS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    pool = tether.PoolResource(tether.HostResource(), growth_size="1 MiB")
    host = tether.HostResource()
    stop = threading.Event()
    cuda_seen = tether.cuda_available()  # lets the parent initialise CUDA, if there is one

    def worker(i):
        n = 0
        while not stop.is_set():
            size = 64 + (n * 977 + i * 131) % 8192
            b = tether.Buffer(size, resource=pool if n % 2 else host)
            with b.memoryview() as m:
                m[:8] = b"tether!!"
            with tether.using(pool, device=tether.HOST):
                c = tether.Buffer(256, device=tether.HOST)
                c.close()
            b.close()
            n += 1

    def child(parent_census):
        base = tether.debug.live_objects()
        mine = tether.PoolResource(tether.HostResource())
        bufs = [tether.Buffer(1000 + k, resource=mine) for k in range(32)]
        for b in bufs:
            with b.memoryview() as m:
                m[:4] = b"abcd"
                assert bytes(m[:4]) == b"abcd"
        inherited = tether.Buffer(4096, resource=pool)
        with tether.using(mine, device=tether.HOST):
            tether.get_current_resource(tether.HOST).close()
            tmp = tether.Buffer(128, device=tether.HOST)
            tmp.close()
        for b in bufs:
            b.close()
        inherited.close()
        mine.close()
        assert tether.debug.live_objects() == base, (tether.debug.live_objects(), base)
        if cuda_seen:
            try:
                tether.CudaResource(0)
            except tether.NoDeviceError as e:
                assert "fork" in str(e), str(e)
            else:
                raise AssertionError("CUDA worked in a fork() child")
        os._exit(0)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    ctx = mp.get_context("fork")
    failures = []
    for k in range(FORKS):
        p = ctx.Process(target=child, args=(tether.debug.live_objects(),))
        p.start()
        p.join(timeout=30)
        if p.exitcode is None:
            p.kill()
            p.join()
            failures.append(f"fork {k}: child hung (killed after 30 s)")
            break
        if p.exitcode != 0:
            failures.append(f"fork {k}: child exit code {p.exitcode}")
            break
    stop.set()
    for t in threads:
        t.join()
    pool.close()
    host.close()
    if failures:
        print("\\n".join(failures))
        sys.exit(1)
    print(f"{FORKS} forks ok")
    """
)


def test_multiprocessing_fork_while_threads_allocate(tmp_path):
    script = tmp_path / "fork_scenario.py"
    script.write_text(SCENARIO)
    proc = subprocess.run([sys.executable, str(script), "40"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "40 forks ok" in proc.stdout
