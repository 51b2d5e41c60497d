"""tether.cupy's C-level hook without CuPy or a GPU (tether_py.c: _tether_py_cupy_*).

Two ways in:
* directly: the C malloc/free called the way CuPy calls them - with the GIL held
  and PyErr_Occurred() checked after malloc (CuPy >= 14.1's ``_call_malloc(...)
  except *``; ctypes' PYFUNCTYPE does the same) - with a host resource, device
  tether.HOST and a fake stream getter (a ctypes callback);
* through tether.cupy.allocator() against hook_fakes.FakeCupyC, a stand-in for
  CuPy's CFunctionAllocator and its stream C API capsule; and the choice of the
  Python hook where the fake lacks what the C path needs.

The GPU tests (test_gpu_hooks_cupy.py) repeat the stream, routing and error
checks with the real CuPy.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import sys

import pytest

import tether
import hook_fakes
from thread_support import run_threads
from tether._ffi import ffi, lib


def _address(name: str) -> int:
    return int(ffi.cast("intptr_t", ffi.addressof(lib, name)))


MALLOC = hook_fakes.FakeCupyC.MALLOC(_address("_tether_py_cupy_malloc"))
FREE = hook_fakes.FakeCupyC.FREE(_address("_tether_py_cupy_free"))
GET_STREAM = hook_fakes.FakeCupyC.GET_STREAM
GET_CURRENT_STREAM = ctypes.PYFUNCTYPE(ctypes.c_ssize_t)


def _counters() -> tuple[int, int, int]:
    out = ffi.new("uint64_t[3]")
    lib._tether_py_cupy_counters(out, out + 1, out + 2)
    return out[0], out[1], out[2]


def _record(ptr: int) -> tuple[int, int, tether.Resource] | None:
    """(size, stream, resource) the C map holds for ptr, or None."""
    size, stream, res = ffi.new("size_t*"), ffi.new("tether_stream_t*"), ffi.new("tether_resource_t**")
    if not lib._tether_py_cupy_lookup(ffi.cast("void*", ptr), size, stream, res):
        return None
    from tether._resources import wrap_borrowed
    r = wrap_borrowed(res[0])
    lib.tether_resource_release(res[0])
    return size[0], stream[0], r


class Hook:
    """A C hook as tether.cupy makes one; delete() it (its owner's death) when done."""

    def __init__(self, resource: tether.Resource | None, device_only: int = -1, stream: int = 0x5000,
                 takes_device: bool = True) -> None:
        self.stream = stream
        self.asked: list[int] = []
        if takes_device:
            self._getter = GET_STREAM(lambda dev: (self.asked.append(dev), self.stream)[1])
        else:
            self._getter = GET_CURRENT_STREAM(lambda: self.stream)
        getter = ffi.cast("void*", ctypes.cast(self._getter, ctypes.c_void_p).value)
        h = ffi.NULL if resource is None else resource._h
        self.hook = lib._tether_py_cupy_hook_new(h, device_only, getter, int(takes_device))
        assert self.hook != ffi.NULL
        self.param = int(ffi.cast("intptr_t", self.hook))

    def malloc(self, size: int, device: int = tether.HOST) -> int:
        return MALLOC(self.param, size, device) or 0

    def free(self, ptr: int, device: int = tether.HOST) -> None:
        FREE(self.param, ptr, device)

    def delete(self) -> None:
        lib._tether_py_cupy_hook_delete(self.hook)


def _bytes(stats) -> int:
    return stats.statistics().current_bytes


# ---- the C functions, called directly ----------------------------------------------------

def test_malloc_records_resource_size_and_stream_and_free_gives_it_back(host_pool):
    _, a, b = host_pool
    hook = Hook(a, stream=0x5000)
    live0 = _counters()[0]
    p = hook.malloc(1000)
    assert p != 0 and _bytes(a) == 1000 and hook.asked == [tether.HOST]
    size, stream, res = _record(p)
    assert (size, stream) == (1000, 0x5000)
    res.close()
    ctypes.memset(p, 0xAB, 1000)  # host memory: really usable
    assert _counters()[0] == live0 + 1
    hook.stream = 0x6000  # the stream current at free time does not matter
    with tether.using(b, device=tether.HOST):
        hook.free(p)
    assert _bytes(a) == 0 and _bytes(b) == 0 and _record(p) is None
    assert _counters()[0] == live0
    hook.delete()


def test_size_zero_is_a_null_pointer_without_an_allocation(host_pool):
    _, a, _ = host_pool
    hook = Hook(a)
    assert hook.malloc(0) == 0
    assert a.statistics().total_count == 0
    hook.delete()


def test_resource_none_uses_the_current_resource_and_frees_into_the_origin(host_pool):
    _, a, b = host_pool
    hook = Hook(None, stream=0x7000)
    with tether.using(a, device=tether.HOST):
        p = hook.malloc(3000)
    with tether.using(b, device=tether.HOST):
        q = hook.malloc(500)
        assert (_bytes(a), _bytes(b)) == (3000, 500)
        hook.free(p)  # B is current: A's bytes still go back to A
        assert (_bytes(a), _bytes(b)) == (0, 500)
    hook.delete()  # allocations still out keep their resource
    hook.free(q)
    assert (_bytes(a), _bytes(b)) == (0, 0)


def test_getter_without_device_argument(host_pool):
    _, a, _ = host_pool
    hook = Hook(a, stream=0x1234, takes_device=False)
    p = hook.malloc(256)
    size, stream, res = _record(p)
    res.close()
    assert stream == 0x1234
    hook.free(p)
    hook.delete()


def test_null_unknown_and_double_frees_are_counted_no_ops(host_pool):
    _, a, _ = host_pool
    hook = Hook(a)
    p = hook.malloc(4096)
    ignored = _counters()[1]
    hook.free(0)
    hook.free(p + 8)       # inside an allocation, not its start
    hook.free(0xDEAD0000)  # never allocated
    hook.free(hook.param)  # the hook's own address: not an allocation
    assert _counters()[1] == ignored + 4 and _bytes(a) == 4096
    hook.free(p)
    hook.free(p)           # a second free
    assert _counters()[1] == ignored + 5 and _bytes(a) == 0
    FREE(0, 0xBEEF, 7)     # any param, any device
    assert _counters()[1] == ignored + 6
    hook.delete()


def test_free_after_the_hook_is_gone_frees_into_the_resource(host_pool):
    _, a, _ = host_pool
    mine = tether.StatisticsAdaptor(a)
    hook = Hook(mine)
    mine.close()  # the hook holds its own reference
    p = hook.malloc(2048)
    hook.delete()
    with pytest.raises(ValueError, match="not a live tether CuPy allocator"):
        hook.malloc(16)
    assert _bytes(a) == 2048
    FREE(0, p, tether.HOST)  # the record, not the param, says where it goes
    assert _bytes(a) == 0


def test_out_of_memory_raises_the_tether_error():
    limited = tether.PoolResource(tether.HostResource(), maximum_size="1 MiB")
    hook = Hook(limited)
    live = _counters()[0]
    with pytest.raises(tether.OutOfMemoryError, match="maximum_size") as info:
        hook.malloc(1 << 30)
    assert isinstance(info.value, MemoryError)
    assert _counters()[0] == live
    hook.delete()
    limited.close()


def test_device_only_resource_refuses_another_device(host_pool):
    _, a, _ = host_pool
    hook = Hook(a, device_only=0)  # as for a pure device resource of device 0
    with pytest.raises(ValueError, match="device 0, but CuPy's current device is 1"):
        hook.malloc(64, device=1)
    assert a.statistics().total_count == 0
    hook.delete()


def test_current_resource_errors_raise(host_pool):
    hook = Hook(None)
    with pytest.raises(tether.InvalidArgumentError):
        hook.malloc(64, device=-7)  # no such slot
    hook.delete()


def test_unknown_param_raises_value_error():
    with pytest.raises(ValueError, match="not a live tether CuPy allocator"):
        MALLOC(0, 64, tether.HOST)
    with pytest.raises(ValueError, match="not a live tether CuPy allocator"):
        MALLOC(0x1000, 64, tether.HOST)
    lib._tether_py_cupy_hook_delete(ffi.NULL)
    lib._tether_py_cupy_hook_delete(ffi.cast("void*", 0x1000))  # unknown: a no-op


def test_hook_new_checks_its_arguments(host_pool):
    _, a, _ = host_pool
    assert lib._tether_py_cupy_hook_new(a._h, -2, ffi.NULL, 0) == ffi.NULL
    assert lib._tether_py_last_status() == lib.TETHER_ERROR_INVALID_ARGUMENT
    assert lib._tether_py_cupy_hook_new(a._h, -1, ffi.NULL, 2) == ffi.NULL
    assert lib._tether_py_last_status() == lib.TETHER_ERROR_INVALID_ARGUMENT
    closed = tether.StatisticsAdaptor(a)
    h = closed._h
    closed.close()
    assert lib._tether_py_cupy_hook_new(h, -1, ffi.NULL, 0) == ffi.NULL
    assert lib._tether_py_last_status() == lib.TETHER_ERROR_INVALID_HANDLE


def test_no_stream_getter_orders_on_stream_zero(host_pool):
    _, a, _ = host_pool
    hook = lib._tether_py_cupy_hook_new(a._h, -1, ffi.NULL, 0)
    param = int(ffi.cast("intptr_t", hook))
    p = MALLOC(param, 100, tether.HOST)
    size, stream, res = _record(p)
    res.close()
    assert stream == 0
    FREE(param, p, tether.HOST)
    lib._tether_py_cupy_hook_delete(hook)


def test_many_threads_allocate_and_free_concurrently(host_pool):
    _, a, _ = host_pool
    hook = Hook(a)
    live = _counters()[0]

    def work(seed: int) -> None:
        held = []
        for i in range(400):
            held.append(hook.malloc(64 + (seed * 31 + i) % 4000))
            if len(held) > 16:
                hook.free(held.pop(i % len(held)))
        ptrs = set(held)
        assert len(ptrs) == len(held) and 0 not in ptrs
        for p in held:
            hook.free(p)

    run_threads(work, 8)
    assert _bytes(a) == 0 and _counters()[0] == live
    assert a.statistics().total_count == 8 * 400
    hook.delete()


def test_map_grows_and_shrinks_with_many_live_allocations(host_pool):
    _, a, _ = host_pool
    hook = Hook(a)
    ptrs = [hook.malloc(16) for _ in range(5000)]  # several table growths
    assert len(set(ptrs)) == 5000 and _bytes(a) == 5000 * 16
    for p in ptrs[::2]:  # free every other one: backward-shift deletion keeps the rest findable
        hook.free(p)
    for p in ptrs[1::2]:
        size, _, res = _record(p)
        res.close()
        assert size == 16
    for p in ptrs[1::2]:
        hook.free(p)
    assert _bytes(a) == 0
    hook.delete()


# ---- through tether.cupy, against a fake CuPy ---------------------------------------------

@pytest.fixture
def load(monkeypatch):
    """load(fake): import tether.cupy against ``fake``; forgotten again after the test."""
    def _load(fake):
        hook_fakes.install(monkeypatch, fake)
        monkeypatch.delitem(sys.modules, "tether.cupy", raising=False)
        monkeypatch.delattr(tether, "cupy", raising=False)
        return importlib.import_module("tether.cupy")
    yield _load
    sys.modules.pop("tether.cupy", None)
    tether.__dict__.pop("cupy", None)


def test_allocator_takes_the_c_path_and_orders_on_cupys_stream(load, host_pool):
    fake = hook_fakes.FakeCupyC()
    tcupy = load(fake)
    _, a, b = host_pool
    assert tcupy.c_level_reason() is None
    alloc = tcupy.allocator(a)
    assert alloc.resource is not None and alloc._tether_allocator
    fake.stream = 0x5000
    m = alloc(1000)
    z = alloc(0)
    assert z.ptr == 0
    assert type(m.mem).__name__ == "CFunctionAllocatorMemory" and _bytes(a) == 1000
    size, stream, res = _record(m.ptr)
    assert (size, stream) == (1000, 0x5000) and fake.streams_asked == [tether.HOST]
    res.close()
    fake.stream = 0x6000
    with tether.using(b, device=tether.HOST):
        del m, z
        gc.collect()
    assert _bytes(a) == 0
    del alloc
    gc.collect()


def test_cupy_malloc_is_the_bare_c_path_the_benchmark_times(load, host_pool):
    # bench_hooks.py's "direct" row installs alloc._cupy_malloc: CuPy's CFunctionAllocator.malloc
    # over the same hook, so it allocates from the same resource on the same stream.
    fake = hook_fakes.FakeCupyC()
    tcupy = load(fake)
    _, a, _ = host_pool
    alloc = tcupy.allocator(a)
    fake.stream = 0x7000
    m = alloc._cupy_malloc(512)
    assert type(m.mem).__name__ == "CFunctionAllocatorMemory" and _bytes(a) == 512
    size, stream, res = _record(m.ptr)
    assert (size, stream) == (512, 0x7000)
    res.close()
    del m
    gc.collect()
    assert _bytes(a) == 0
    del alloc
    gc.collect()


def test_c_allocator_with_resource_none_follows_the_current_resource(load, host_pool):
    fake = hook_fakes.FakeCupyC()
    tcupy = load(fake)
    _, a, b = host_pool
    alloc = tcupy.allocator()
    assert alloc.resource is None
    with tether.using(a, device=tether.HOST):
        m1 = alloc(1000)
    with tether.using(b, device=tether.HOST):
        m2 = alloc(3000)
        assert (_bytes(a), _bytes(b)) == (1000, 3000)
        del m1
        gc.collect()
        assert (_bytes(a), _bytes(b)) == (0, 3000)
    del alloc  # the allocator may die before its memory
    gc.collect()
    del m2
    gc.collect()
    assert (_bytes(a), _bytes(b)) == (0, 0)


@pytest.mark.parametrize("unchecked", [False, True], ids=["checked", "unchecked-like-cupy-14.2-wheel"])
def test_c_allocator_errors(load, unchecked):
    fake = hook_fakes.FakeCupyC(unchecked=unchecked)
    tcupy = load(fake)
    limited = tether.PoolResource(tether.HostResource(), maximum_size="1 MiB")
    alloc = tcupy.allocator(limited)
    with pytest.raises(tether.OutOfMemoryError) as info:
        alloc(1 << 30)
    assert info.value.__cause__ is None  # tether's own error, not CPython's SystemError around it
    with pytest.raises(TypeError):
        tcupy.allocator("pool")
    closed = tether.StatisticsAdaptor(limited)
    closed.close()
    with pytest.raises(tether.InvalidHandleError):
        tcupy.allocator(closed)
    del alloc
    gc.collect()
    limited.close()


def test_c_allocator_enable_and_disable(load, host_pool):
    fake = hook_fakes.FakeCupyC()
    tcupy = load(fake)
    _, a, _ = host_pool
    fn = tcupy.enable(a)
    assert fake.state["allocator"] is fn
    fn2 = tcupy.enable()
    assert fake.state["allocator"] is fn2
    tcupy.disable()
    assert fake.state["allocator"] == fake.default_pool_malloc
    del fn, fn2
    gc.collect()


@pytest.mark.parametrize("case", ["old_cupy", "no_memory_module", "no_capsule", "wrong_signature",
                                  "cpdef_signature"])
def test_python_hook_where_the_c_path_is_not_safe(load, host_pool, case):
    getter = hook_fakes.FakeCupyC.GET_STREAM(lambda dev: 0)
    if case == "old_cupy":
        fake = hook_fakes.FakeCupyC(version="14.0.1")  # malloc errors unchecked there
    elif case == "no_memory_module":
        fake = hook_fakes.FakeCupy()
    elif case == "no_capsule":
        fake = hook_fakes.FakeCupyC(capsules={})
    elif case == "wrong_signature":
        fake = hook_fakes.FakeCupyC(capsules={"get_stream_ptr": (b"intptr_t (long)", getter)})
    else:  # a cpdef function's C entry takes a hidden skip_dispatch flag: not what we call
        fake = hook_fakes.FakeCupyC(capsules={"get_stream_ptr": (b"intptr_t (int, int __pyx_skip_dispatch)",
                                                                 getter)})
    tcupy = load(fake)
    reason = tcupy.c_level_reason()
    assert reason is not None
    _, a, _ = host_pool
    alloc = tcupy.allocator(a)
    m = alloc(512)
    assert isinstance(m.mem._owner, tether.Buffer)  # the Python hook's Buffer
    del m, alloc
    gc.collect()
    assert _bytes(a) == 0


def test_get_current_stream_ptr_capsule_is_accepted(load, host_pool):
    getter = ctypes.PYFUNCTYPE(ctypes.c_ssize_t)(lambda: 0x4242)
    fake = hook_fakes.FakeCupyC(capsules={"get_current_stream_ptr": (b"intptr_t (void)", getter)})
    tcupy = load(fake)
    assert tcupy.c_level_reason() is None
    _, a, _ = host_pool
    alloc = tcupy.allocator(a)
    m = alloc(100)
    size, stream, res = _record(m.ptr)
    res.close()
    assert stream == 0x4242
    del m, alloc
    gc.collect()


# ---- the GIL: kept on the quick paths only (more in test_gil.py) -----------------------------

def test_hook_over_a_python_upstream_from_many_threads():
    # The pool's growth calls back into Python on whichever thread grows it: the
    # hook lets the GIL go around every call its quick paths refuse.
    host = tether.HostResource()
    calls = []

    def allocate(n, a, s):
        calls.append(n)
        return host.allocate(n, a)

    up = tether.CallbackResource(allocate, lambda p, n, a, s: host.deallocate(p, n, a))
    pool = tether.PoolResource(up, initial_size=0, growth_size="64 KiB")
    stats = tether.StatisticsAdaptor(pool)
    hook = Hook(stats)

    def work(seed: int) -> None:
        held = [hook.malloc(512 + (seed * 131 + i) % 30000) for i in range(200)]
        assert 0 not in held and len(set(held)) == len(held)
        for p in held:
            hook.free(p)

    run_threads(work, 8)
    assert calls, "the pool never grew through the Python upstream"
    assert _bytes(stats) == 0 and stats.statistics().total_count == 8 * 200
    hook.delete()
    for r in (stats, pool, up, host):
        r.close()


def test_callgrind_workload_runs_and_checks_its_arguments(capsys):
    # benchmarks/python/cupy_hook_callgrind.py: the workload behind the hook's instruction counts
    from script_support import REPO, load_script
    script = load_script(REPO / "benchmarks" / "python" / "cupy_hook_callgrind.py", "cupy_hook_callgrind")
    before = _counters()
    assert script.main(["50", "512"]) == 0
    assert "50 malloc+free pairs of 512 B" in capsys.readouterr().out
    assert _counters()[0] == before[0]  # every allocation it made was freed
    for argv in (["0"], ["10", "0"], ["1", "2", "3"]):
        with pytest.raises(SystemExit):
            script.main(argv)
