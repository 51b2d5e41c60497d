"""The user-callback types from Python: a resource written in Python
(CallbackResource) pooled, installed as current and called from foreign
threads; LoggingAdaptor; FailureCallbackAdaptor spilling; exceptions in
callbacks; the interpreter exiting while C threads still call Python."""

from __future__ import annotations

import ctypes
import gc
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import tether
from tether import _callbacks
from thread_support import run_threads

NATIVE = Path(__file__).parent / "native" / "cthreads.c"


class NumpyHeap:
    """A memory resource in pure Python: numpy arrays, aligned by offsetting."""

    def __init__(self, budget: int = 1 << 40) -> None:
        self.arrays: dict[int, np.ndarray] = {}
        self.lock = threading.Lock()
        self.budget = budget
        self.used = 0
        self.calls = 0

    def allocate(self, size: int, alignment: int, stream: int) -> int:
        with self.lock:
            self.calls += 1
            if self.used + size > self.budget:
                raise MemoryError(f"NumpyHeap: {size} bytes do not fit")
            a = np.empty(size + alignment, dtype=np.uint8)
            p = (a.ctypes.data + alignment - 1) // alignment * alignment
            self.arrays[p] = a
            self.used += size
            return p

    def deallocate(self, ptr: int, size: int, alignment: int, stream: int) -> None:
        with self.lock:
            del self.arrays[ptr]
            self.used -= size

    def resource(self) -> tether.CallbackResource:
        return tether.CallbackResource(self.allocate, self.deallocate)


@pytest.fixture
def cthreads(build_native):
    lib = ctypes.CDLL(str(build_native(NATIVE)))
    lib.cthreads_hammer.restype = ctypes.c_int
    lib.cthreads_hammer.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    return lib


def handle(resource: tether.Resource) -> int:
    return int(tether._ffi.ffi.cast("uintptr_t", resource._h))


@pytest.fixture
def unraisable(monkeypatch):
    """The exceptions reported through sys.unraisablehook during the test."""
    seen: list = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    return seen


# ---- CallbackResource -----------------------------------------------------------

def test_python_resource_pooled_and_freed(unraisable):
    heap = NumpyHeap()
    before = _callbacks.live_callbacks()
    with heap.resource() as r:
        assert r.kind == tether.ResourceKind.CALLBACK and r.name == "callback"
        assert r.device == tether.HOST and r.host_accessible and not r.device_accessible
        p = r.allocate(100, alignment=512)
        assert p % 512 == 0 and len(heap.arrays) == 1
        ctypes.memset(p, 7, 100)
        r.deallocate(p, 100, alignment=512)
        assert heap.arrays == {}
        with tether.PoolResource(r, initial_size="1 MiB") as pool:
            bufs = [tether.Buffer(n, resource=pool) for n in (1, 1000, 100_000)]
            for b in bufs:
                np.asarray(b)[:] = 3
            assert len(heap.arrays) == 1  # one chunk serves them all
            for b in bufs:
                b.close()
    # The pool and the resource are gone: every chunk was given back, and
    # destroy forgot the callables exactly once.
    gc.collect()
    assert heap.arrays == {}
    assert _callbacks.live_callbacks() == before
    assert unraisable == []


def test_frees_are_checked_before_python_sees_them():
    heap = NumpyHeap()
    with heap.resource() as r:
        p = r.allocate(64)
        with pytest.raises(tether.InvalidArgumentError, match="not allocated by this resource"):
            r.deallocate(p + 8, 64)
        with pytest.raises(tether.InvalidArgumentError, match="size"):
            r.deallocate(p, 65)
        assert len(heap.arrays) == 1
        r.deallocate(p, 64)
        with pytest.raises(tether.InvalidArgumentError, match="already freed"):
            r.deallocate(p, 64)


def test_installed_as_current_and_used_from_c_threads(cthreads):
    heap = NumpyHeap()
    with heap.resource() as r, tether.PoolResource(r) as pool:
        with tether.using(pool, tether.HOST):
            b = tether.Buffer(4096, device=tether.HOST)
            assert b.resource == pool
            b.close()
        previous = tether.set_current_resource(pool, tether.HOST)
        try:
            with tether.get_current_resource(tether.HOST) as cur:
                assert cur == pool
            # Foreign threads calling the Python callbacks directly and through the pool.
            assert cthreads.cthreads_hammer(handle(r), 8, 300) == 0
            assert cthreads.cthreads_hammer(handle(pool), 8, 2000) == 0
        finally:
            tether.set_current_resource(previous, tether.HOST)
            if previous is not None:
                previous.close()
        assert heap.calls >= 8 * 300
        assert len(heap.arrays) >= 1  # the pool's chunks
    assert heap.arrays == {}


def test_python_threads():
    heap = NumpyHeap()
    with heap.resource() as r:
        def work(_: int) -> None:
            for i in range(300):
                p = r.allocate(i + 1)
                r.deallocate(p, i + 1)
        run_threads(work, 8)
    assert heap.arrays == {}


def test_memory_error_is_out_of_memory_and_not_reported(unraisable):
    heap = NumpyHeap(budget=1000)
    with heap.resource() as r:
        with pytest.raises(tether.OutOfMemoryError, match="do not fit"):
            r.allocate(2000)
        # A pool over it recovers: a smaller request still works.
        with tether.PoolResource(r, growth_size=512) as pool:
            with pytest.raises(tether.OutOfMemoryError):
                pool.allocate(4000)
            p = pool.allocate(100)
            pool.deallocate(p, 100)
    assert unraisable == []


def test_exception_in_allocate_is_a_status_reported_and_nothing_lost(unraisable):
    heap = NumpyHeap()

    def broken(size: int, alignment: int, stream: int) -> int:
        if size == 13:
            raise RuntimeError("thirteen is unlucky")
        if size == 14:
            return "not an address"  # type: ignore[return-value]
        if size == 15:
            raise ValueError("fifteen is invalid")
        return heap.allocate(size, alignment, stream)

    with tether.CallbackResource(broken, heap.deallocate) as r:
        with pytest.raises(tether.TetherError, match="RuntimeError: thirteen is unlucky") as info:
            r.allocate(13)
        assert info.value.code == tether._ffi.lib.TETHER_ERROR_INTERNAL
        with pytest.raises(tether.TetherError, match="must return an int address"):
            r.allocate(14)
        with pytest.raises(tether.InvalidArgumentError, match="fifteen is invalid"):
            r.allocate(15)
        assert [type(u.exc_value) for u in unraisable] == [RuntimeError, TypeError, ValueError]
        p = r.allocate(16)  # still usable
        r.deallocate(p, 16)
    assert heap.arrays == {}


def test_exception_in_deallocate_keeps_the_allocation(unraisable):
    heap = NumpyHeap()
    refuse = [True]

    def deallocate(ptr: int, size: int, alignment: int, stream: int) -> None:
        if refuse[0]:
            raise OSError("device busy")
        heap.deallocate(ptr, size, alignment, stream)

    with tether.CallbackResource(heap.allocate, deallocate) as r:
        p = r.allocate(64)
        with pytest.raises(tether.TetherError, match="OSError: device busy"):
            r.deallocate(p, 64)
        assert len(unraisable) == 1 and len(heap.arrays) == 1
        refuse[0] = False
        r.deallocate(p, 64)  # still recorded as live: the retry frees it
    assert heap.arrays == {}


def test_arguments():
    heap = NumpyHeap()
    with pytest.raises(TypeError, match="allocate must be callable"):
        tether.CallbackResource(None, heap.deallocate)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="deallocate must be callable"):
        tether.CallbackResource(heap.allocate, 3)  # type: ignore[arg-type]
    before = _callbacks.live_callbacks()
    with pytest.raises(tether.InvalidArgumentError, match="device"):
        tether.CallbackResource(heap.allocate, heap.deallocate, device=-7)
    assert _callbacks.live_callbacks() == before  # a failed creation keeps nothing
    with tether.CallbackResource(heap.allocate, heap.deallocate, device_accessible=True,
                                 host_accessible=False, device=0) as r:
        assert (r.device, r.device_accessible, r.host_accessible) == (0, True, False)


# ---- LoggingAdaptor -------------------------------------------------------------------

def test_logging_to_a_file(tmp_path):
    path = tmp_path / "log.csv"
    with tether.HostResource() as host, tether.LoggingAdaptor(host, path) as log:
        assert log.kind == tether.ResourceKind.LOGGING and log.upstream == host
        p = log.allocate(100, stream=5)
        with pytest.raises(tether.OutOfMemoryError):
            log.allocate(1 << 62)
        log.flush()
        lines = path.read_text().splitlines()
        assert lines[0] == tether.LOG_HEADER == "time_ns,thread,action,pointer,size,stream,status"
        time_ns, thread, action, ptr, size, stream, status = lines[1].split(",")
        assert (action, int(ptr, 16), size, stream, status) == ("allocate", p, "100", "5", "TETHER_OK")
        assert int(time_ns) >= 0 and int(thread) > 0
        assert lines[2].split(",")[2:] == ["allocate", "0x0", str(1 << 62), "0", "TETHER_ERROR_OUT_OF_MEMORY"]
        log.deallocate(p, 100, stream=5)
    gc.collect()
    last = path.read_text().splitlines()[-1].split(",")  # flushed when the adaptor went away
    assert last[2:] == ["free", hex(p), "100", "5", "TETHER_OK"]


def test_logging_to_a_callable_with_rmm_spellings(unraisable):
    lines: list[str] = []
    with tether.HostResource() as host, tether.LoggingAdaptor(upstream_mr=host, callback=lines.append) as log:
        p = log.allocate(10)
        log.deallocate(p, 10)
        log.flush()  # nothing buffered: a no-op
    assert lines[0] == tether.LOG_HEADER
    assert [line.split(",")[2] for line in lines[1:]] == ["allocate", "free"]

    def broken(line: str) -> None:
        raise RuntimeError("log sink broke")

    with tether.HostResource() as host, tether.LoggingAdaptor(host, callback=broken) as log:
        p = log.allocate(10)  # logging failed; the allocation did not
        log.deallocate(p, 10)
    assert unraisable and all(isinstance(u.exc_value, RuntimeError) for u in unraisable)


def test_logging_arguments(tmp_path):
    with tether.HostResource() as host:
        with pytest.raises(TypeError, match="path or a callback"):
            tether.LoggingAdaptor(host)
        with pytest.raises(TypeError, match="needs an upstream"):
            tether.LoggingAdaptor(path=tmp_path / "x.csv")
        with pytest.raises(tether.InvalidArgumentError, match="no-such-dir"):
            tether.LoggingAdaptor(host, tmp_path / "no-such-dir" / "x.csv")
        with pytest.raises(TypeError, match="not both"):
            tether.LoggingAdaptor(host, path=tmp_path / "a", log_file_name=tmp_path / "b")
        with tether.LoggingAdaptor(host, log_file_name=str(tmp_path / "alias.csv")) as log:
            log.flush()
        assert (tmp_path / "alias.csv").read_text() == tether.LOG_HEADER + "\n"
        with pytest.raises(tether.NotSupportedError):
            tether._ffi.lib.tether_logging_adaptor_flush(host._h) == 0 or tether._errors.check(
                tether._ffi.lib.tether_logging_adaptor_flush(host._h))


# ---- FailureCallbackAdaptor ------------------------------------------------------

def test_spilling():
    MiB = 1 << 20
    held: list[int] = []
    asked: list[int] = []
    with tether.PoolResource(tether.HostResource(), maximum_size="4 MiB") as pool:
        adaptor: tether.FailureCallbackAdaptor

        def spill(size: int) -> bool:
            asked.append(size)
            if not held:
                return False
            for p in held:
                adaptor.deallocate(p, MiB)
            held.clear()
            return True

        with tether.FailureCallbackAdaptor(pool, spill) as adaptor:
            assert adaptor.kind == tether.ResourceKind.FAILURE_CALLBACK and adaptor.upstream == pool
            held.extend(adaptor.allocate(MiB) for _ in range(3))
            big = adaptor.allocate("3 MiB")  # out of memory, spills, retries, succeeds
            assert asked == [3 * MiB] and held == []
            with pytest.raises(tether.OutOfMemoryError):
                adaptor.allocate("3 MiB")  # nothing left to spill
            assert asked == [3 * MiB, 3 * MiB]
            adaptor.deallocate(big, "3 MiB")


def test_failure_callback_that_raises_is_reported_and_does_not_retry(unraisable):
    calls: list[int] = []

    def broken(size: int) -> bool:
        calls.append(size)
        raise RuntimeError("spill failed")

    with tether.HostResource() as host, tether.FailureCallbackAdaptor(upstream_mr=host, callback=broken) as a:
        with pytest.raises(tether.OutOfMemoryError):
            a.allocate(1 << 62)
        assert calls == [1 << 62]
        assert [str(u.exc_value) for u in unraisable] == ["spill failed"]
        p = a.allocate(64)
        a.deallocate(p, 64)
    with pytest.raises(TypeError, match="callback must be callable"):
        tether.FailureCallbackAdaptor(tether.HostResource(), None)


# ---- shutdown --------------------------------------------------------------------------

def test_exit_while_c_and_python_threads_call_python(run_python, build_native):
    lib = build_native(NATIVE)
    proc = run_python(textwrap.dedent(f"""
        import ctypes, threading, time
        import numpy as np
        import tether
        arrays = {{}}
        lock = threading.Lock()
        def allocate(size, alignment, stream):
            a = np.empty(size + alignment, dtype=np.uint8)
            p = (a.ctypes.data + alignment - 1) // alignment * alignment
            with lock:
                arrays[p] = a
            return p
        def deallocate(ptr, size, alignment, stream):
            with lock:
                del arrays[ptr]
        r = tether.CallbackResource(allocate, deallocate)
        pool = tether.PoolResource(r)
        log = tether.LoggingAdaptor(pool, callback=lambda line: None)
        native = ctypes.CDLL({str(lib)!r})
        native.cthreads_start_forever.argtypes = [ctypes.c_size_t, ctypes.c_int]
        h = lambda res: int(tether._ffi.ffi.cast("uintptr_t", res._h))
        assert native.cthreads_start_forever(h(r), 3) == 0
        assert native.cthreads_start_forever(h(log), 3) == 0
        def spin():
            while True:
                try:
                    p = r.allocate(64)
                    r.deallocate(p, 64)
                except tether.TetherError:
                    pass
        for _ in range(2):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.3)
    """))
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr


# ---- CUDA upstreams (skipped without a device) ------------------------------------------

@pytest.mark.gpu
def test_gpu_python_resource_forwarding_device_memory_pooled_and_adapted():
    with tether.CudaResource(0) as device:
        live: dict[int, int] = {}

        def allocate(size: int, alignment: int, stream: int) -> int:
            p = device.allocate(size, alignment, stream)
            live[p] = size
            return p

        def deallocate(ptr: int, size: int, alignment: int, stream: int) -> None:
            device.deallocate(ptr, size, alignment, stream)
            del live[ptr]

        lines: list[str] = []
        with tether.CallbackResource(allocate, deallocate, device_accessible=True, host_accessible=False,
                                     device=0) as mine, \
                tether.PoolResource(mine) as pool, \
                tether.LoggingAdaptor(pool, callback=lines.append) as log, \
                tether.FailureCallbackAdaptor(log, lambda size: False) as mr:
            assert (mr.device, mr.device_accessible, mr.host_accessible) == (0, True, False)
            bufs = [tether.Buffer(n, resource=mr) for n in (1, 4096, 1 << 20)]
            with pytest.raises(tether.OutOfMemoryError):
                mr.allocate(1 << 50)
            for b in bufs:
                b.close()
            assert [line.split(",")[-1] for line in lines[1:]].count("TETHER_ERROR_OUT_OF_MEMORY") == 1
        assert live == {}
