"""The calls that keep the GIL (python/ffibuild.py): Buffer create/release and
raw allocate/deallocate run libtether's quick path with the GIL held, and
release it for anything else. They must give the same results and errors as
before, and never deadlock against a thread that needs the GIL: each scenario
runs in a subprocess with a timeout, so a deadlock fails the test instead of
hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import tether
from tether._ffi import lib

TIMEOUT = 120


def run_script(body: str) -> None:
    code = textwrap.dedent(body)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"deadlock: the script did not finish in {TIMEOUT} s\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("ok"), out.stdout + out.stderr


def test_the_hot_calls_are_the_gil_keeping_helpers():
    from tether import _buffer, _resources
    assert _buffer._create is lib._tether_py_gil_buffer_create
    assert _buffer._release is lib._tether_py_gil_buffer_release
    assert _resources._allocate is lib._tether_py_gil_allocate
    assert _resources._deallocate is lib._tether_py_gil_deallocate


def test_results_and_errors_as_before():
    host = tether.HostResource()
    pool = tether.PoolResource(host, initial_size="1 MiB", maximum_size="1 MiB")
    for _ in range(3):  # served by the quick path from the second round on
        b = tether.Buffer(256, resource=pool)
        assert b.size == 256 and b.ptr != 0
        b.copy_from_host(b"x" * 256)
        assert b.copy_to_host() == b"x" * 256
        b.close()
        p = pool.allocate(1000)
        assert p != 0 and pool.pool_info().free_bytes == (1 << 20) - 1024
        pool.deallocate(p, 1000)
    # Errors reach Python as before, after quick calls succeeded on this thread.
    p = pool.allocate(256)
    with pytest.raises(tether.InvalidArgumentError, match="size"):
        pool.deallocate(p, 512)
    pool.deallocate(p, 256)
    with pytest.raises(tether.InvalidArgumentError):
        pool.deallocate(p, 256)  # twice
    with pytest.raises(tether.OutOfMemoryError, match="maximum_size"):
        tether.Buffer("2 MiB", resource=pool)
    with pytest.raises(tether.OutOfMemoryError):
        pool.allocate("2 MiB")
    assert pool.allocate(0) == 0
    b = tether.Buffer(0, resource=pool)
    assert b.size == 0
    b.close()
    # A buffer that holds the pool's last reference: its release destroys the pool (off the GIL).
    b = tether.Buffer(256, resource=pool)
    pool.close()
    b.close()
    host.close()


def test_release_while_another_thread_borrows_the_buffer_does_not_deadlock():
    # The resizer is inside tether_buffer_resize (a borrow of the handle):
    # the pool grows through a Python upstream on that thread, which needs the
    # GIL back after its sleep. Meanwhile this thread drops the buffer's last
    # reference. Destroying the buffer must wait for the borrow - with the
    # GIL released, or the resizer can never finish.
    run_script("""
        import threading, time, tether
        host = tether.HostResource()
        armed = threading.Event()
        inside = threading.Event()

        def up_alloc(n, a, s):
            if armed.is_set():
                inside.set()
                time.sleep(0.3)  # lets the main thread run; needs the GIL back to go on
            return host.allocate(n, a)

        up = tether.CallbackResource(up_alloc, lambda p, n, a, s: host.deallocate(p, n, a))
        pool = tether.PoolResource(up, initial_size=0, growth_size="64 KiB")
        for round in range(3):
            buf = tether.Buffer(256, resource=pool)
            buf.close()
            buf = tether.Buffer(256, resource=pool)  # from the quick cache
            armed.set()
            t = threading.Thread(target=lambda: buf.resize(f"{8 + round} MiB"))
            t.start()
            assert inside.wait(30)
            buf.close()  # the last reference, while the resizer borrows it
            t.join(60)
            assert not t.is_alive()
            armed.clear()
            inside.clear()
            pool.trim()  # all free again: the next round grows again
        assert pool.pool_info().free_bytes == pool.pool_info().pool_size
        pool.close(); up.close(); host.close()
        print("ok")
    """)


def test_quick_calls_while_another_thread_grows_the_pool_through_python():
    # Another thread grows the pool (its Python upstream runs there and needs
    # the GIL), while this thread allocates and frees through the quick path,
    # which holds the GIL: neither may wait for the other.
    run_script("""
        import threading, time, tether
        host = tether.HostResource()
        stop = threading.Event()
        grown = []

        def up_alloc(n, a, s):
            grown.append(n)
            time.sleep(0.001)
            return host.allocate(n, a)

        up = tether.CallbackResource(up_alloc, lambda p, n, a, s: host.deallocate(p, n, a))
        pool = tether.PoolResource(up, initial_size=0, growth_size="64 KiB")

        def grower():
            held = []
            while not stop.is_set():
                held.append(tether.Buffer(200_000 + 4096 * len(held), resource=pool))
                if len(held) == 20:
                    held.clear()
                    pool.trim()

        t = threading.Thread(target=grower)
        t.start()
        deadline = time.monotonic() + 3
        n = 0
        while time.monotonic() < deadline:
            for _ in range(200):
                tether.Buffer(256, resource=pool).close()
                p = pool.allocate(256)
                pool.deallocate(p, 256)
                n += 1
        stop.set()
        t.join(60)
        assert not t.is_alive() and grown and n > 1000
        print("ok")
    """)


def test_cupy_hook_releases_the_gil_for_a_release_that_waits_for_another_thread():
    # The upstream's functions are Python that tether never registered (a
    # C-level resource another binding made: here cffi callbacks through the
    # raw C API), so tether cannot tell they need the GIL. Another thread is
    # inside the pool (a borrow of its handle), growing it through that
    # upstream, which needs the GIL back after its sleep. Meanwhile CuPy's
    # free (the C hook, called with the GIL held as CuPy does) drops the
    # pool's last reference: destroying the pool waits for the borrow, so it
    # must run with the GIL released. (Before stop 37 the hook kept the GIL
    # whenever no registered Python callable existed, and this deadlocked.)
    run_script("""
        import ctypes, threading, time, tether
        from tether._ffi import ffi, lib
        host = tether.HostResource()
        armed = threading.Event()
        inside = threading.Event()

        @ffi.callback("tether_status_t(void*, size_t, size_t, tether_stream_t, void**)")
        def up_alloc(ctx, n, a, s, out):
            if armed.is_set():
                inside.set()
                time.sleep(0.3)  # lets the main thread run; needs the GIL back to go on
            out[0] = ffi.cast("void*", host.allocate(n, a))
            return 0

        @ffi.callback("tether_status_t(void*, void*, size_t, size_t, tether_stream_t)")
        def up_free(ctx, p, n, a, s):
            host.deallocate(int(ffi.cast("uintptr_t", p)), n, a)
            return 0

        vt = ffi.new("tether_callback_vtable_t*")
        assert lib.tether_callback_vtable_init(vt, ffi.sizeof("tether_callback_vtable_t")) == 0
        vt.allocate, vt.deallocate = up_alloc, up_free
        out = ffi.new("tether_resource_t**")
        assert lib.tether_callback_resource_create(vt, ffi.NULL, ffi.NULL, out) == 0
        up = tether.Resource.from_handle(int(ffi.cast("uintptr_t", out[0])), owned=True)
        # CuPy's calls into the C hook (CFunctionAllocator): the GIL held throughout.
        MALLOC = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)(
            int(ffi.cast("intptr_t", ffi.addressof(lib, "_tether_py_cupy_malloc"))))
        FREE = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(
            int(ffi.cast("intptr_t", ffi.addressof(lib, "_tether_py_cupy_free"))))
        for round in range(3):
            pool = tether.PoolResource(up, initial_size=0, growth_size="64 KiB")
            hook = lib._tether_py_cupy_hook_new(pool._h, -1, ffi.NULL, 0)
            param = int(ffi.cast("intptr_t", hook))
            p = MALLOC(param, 256, tether.HOST)
            assert p
            lib._tether_py_cupy_hook_delete(hook)  # the allocator object died: p's entry keeps the hook
            armed.set()
            held = []
            t = threading.Thread(target=lambda: held.append(pool.allocate(f"{1 + round} MiB")))
            t.start()
            assert inside.wait(30)
            pool.close()  # the hook's reference (kept for p) is now the pool's last
            FREE(param, p, tether.HOST)
            t.join(60)
            assert not t.is_alive() and held  # (its memory went with the pool: orphaned, not freed)
            armed.clear()
            inside.clear()
        print("ok")
    """)
