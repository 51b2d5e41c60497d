"""tether.cupy on a GPU: CuPy's allocations land in a tether pool (its statistics
prove it), results are right, and frees go back to the resource they came from
even after the current resource changed.

With CuPy >= 14.1 tether.cupy.allocator() is the C-level hook (tether_py.c's
_tether_py_cupy_malloc/_free under CuPy's CFunctionAllocator); the tests named
test_c_hook_* check it against the real CuPy (skipped where CuPy is older), and
the others hold for whichever path this CuPy gets."""

from __future__ import annotations

import gc
import subprocess

import pytest

import tether
from gpu_support import MiB
from thread_support import run_threads
from tether._ffi import ffi, lib

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
import tether.cupy as tcupy  # noqa: E402


@pytest.fixture
def pools():
    """A device-0 pool and two statistics adaptors over it (one per 'library')."""
    pool = tether.PoolResource(tether.CudaResource(0))
    a, b = tether.StatisticsAdaptor(pool), tether.StatisticsAdaptor(pool)
    yield a, b
    cupy.cuda.Device(0).synchronize()
    gc.collect()
    up = pool.upstream
    for r in (a, b, pool, up):
        r.close()


def _bytes(stats) -> int:
    return stats.statistics().current_bytes


C_PATH = tcupy.c_level_reason() is None
needs_c_path = pytest.mark.skipif(not C_PATH, reason=f"tether.cupy uses its Python hook here: {tcupy.c_level_reason()}")


def _stream_of(mem) -> int:
    """The stream tether ordered the allocation behind CuPy's memory ``mem`` on."""
    if C_PATH:
        size, stream, res = ffi.new("size_t*"), ffi.new("tether_stream_t*"), ffi.new("tether_resource_t**")
        assert lib._tether_py_cupy_lookup(ffi.cast("void*", mem.ptr), size, stream, res)
        lib.tether_resource_release(res[0])
        return int(stream[0])
    return mem._owner.stream


def test_using_allocator_lands_in_the_pool_and_computes(pools):
    a, _ = pools
    n = 1 << 20
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator(a)):
        x = cupy.arange(n, dtype=cupy.int64)
        assert _bytes(a) >= x.nbytes
        assert x.data.mem.device_id == 0
        if C_PATH:
            assert type(x.data.mem).__name__ == "CFunctionAllocatorMemory"
        else:
            assert isinstance(x.data.mem._owner, tether.Buffer)
        total = int(x.sum())  # a reduction: its temporaries come from tether too
        assert a.statistics().total_count >= 2
    assert total == n * (n - 1) // 2
    del x
    gc.collect()
    assert _bytes(a) == 0


def test_resource_none_follows_the_current_resource_and_frees_into_the_origin(pools, restore_device0):
    a, b = pools
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator()):
        with tether.using(a, device=0):
            x = cupy.ones(MiB, dtype=cupy.uint8)
        assert _bytes(a) == MiB
        with tether.using(b, device=0):
            y = cupy.zeros(1000, dtype=cupy.uint8)
            assert int(x.sum()) == MiB
            del x
            gc.collect()
            assert _bytes(a) == 0 and a.statistics().total_count >= 1
        assert _bytes(b) >= 1000
        del y
        gc.collect()
    assert _bytes(b) == 0 and _bytes(a) == 0


def test_allocations_are_ordered_on_cupys_current_stream(pools):
    a, _ = pools
    alloc = tcupy.allocator(a)
    stream = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0), stream:
        m = alloc(4096)
        z = alloc(0)
    assert _stream_of(m.mem) == stream.ptr and m.mem.device_id == 0
    assert z.ptr == 0 and z.mem.size == 0
    stream.synchronize()
    del m, z
    gc.collect()
    assert _bytes(a) == 0


def test_enable_and_disable(pools):
    a, _ = pools
    before = cupy.cuda.get_allocator()
    tcupy.enable(a)
    try:
        x = cupy.full(1000, 3, dtype=cupy.int32)
        assert _bytes(a) == 4000 and int(x.sum()) == 3000
    finally:
        tcupy.disable()
    assert cupy.cuda.get_allocator() == before
    y = cupy.empty(1000, dtype=cupy.int32)  # CuPy's own allocator again
    assert _bytes(a) == 4000
    del x, y
    gc.collect()
    assert _bytes(a) == 0


# ---- the C-level hook ---------------------------------------------------------------

@needs_c_path
def test_c_hook_orders_each_allocation_on_cupys_current_stream(pools):
    a, _ = pools
    s1, s2 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator(a)):
        with s1:
            x = cupy.empty(4096, dtype=cupy.uint8)
        with s2:
            y = cupy.empty(4096, dtype=cupy.uint8)
        z = cupy.empty(4096, dtype=cupy.uint8)  # the current stream outside: CuPy's default
        assert type(x.data.mem).__name__ == "CFunctionAllocatorMemory"
        assert _stream_of(x.data.mem) == s1.ptr and _stream_of(y.data.mem) == s2.ptr
        assert _stream_of(z.data.mem) == cupy.cuda.get_current_stream().ptr
    s1.synchronize()
    s2.synchronize()
    del x, y, z
    gc.collect()
    assert _bytes(a) == 0


@needs_c_path
def test_c_hook_frees_into_the_original_resource_on_its_stream(pools, restore_device0):
    a, b = pools
    s1 = cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator()):
        with tether.using(a, device=0), s1:
            x = cupy.ones(MiB, dtype=cupy.uint8)
        assert _bytes(a) == MiB and _stream_of(x.data.mem) == s1.ptr
        with tether.using(b, device=0):
            assert int(x.sum()) == MiB
            cupy.cuda.Device(0).synchronize()
            del x
            gc.collect()
            assert _bytes(a) == 0 and _bytes(b) == 0


@needs_c_path
def test_c_hook_out_of_memory_raises_the_tether_error():
    limited = tether.PoolResource(tether.CudaResource(0), maximum_size="4 MiB")
    try:
        with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator(limited)):
            x = cupy.empty(MiB, dtype=cupy.uint8)
            with pytest.raises(tether.OutOfMemoryError) as info:
                cupy.empty(64 * MiB, dtype=cupy.uint8)
            assert isinstance(info.value, MemoryError)
            y = cupy.empty(MiB, dtype=cupy.uint8)  # still usable afterwards
            del x, y
        gc.collect()
    finally:
        up = limited.upstream
        limited.close()
        up.close()


@needs_c_path
def test_c_hook_device_mismatch_raises_value_error():
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs (a device-0 resource used while CuPy's current device is 1)")
    res = tether.CudaResource(0)
    try:
        alloc = tcupy.allocator(res)
        with cupy.cuda.Device(1), cupy.cuda.using_allocator(alloc):
            with pytest.raises(ValueError, match="device 0, but CuPy's current device is 1"):
                cupy.empty(1024, dtype=cupy.uint8)
        del alloc
        gc.collect()
    finally:
        res.close()


def test_python_hook_is_chosen_when_cupys_stream_capsule_is_missing(pools, monkeypatch):
    import cupy_backends.cuda.stream as stream_module
    a, _ = pools
    monkeypatch.setattr(stream_module, "__pyx_capi__", {})
    monkeypatch.setattr(tcupy, "_c_support", None)  # look again
    assert "no stream getter" in tcupy.c_level_reason()
    with cupy.cuda.Device(0), cupy.cuda.using_allocator(tcupy.allocator(a)):
        x = cupy.empty(1000, dtype=cupy.uint8)
        assert isinstance(x.data.mem._owner, tether.Buffer)
    del x
    gc.collect()
    assert _bytes(a) == 0


def test_many_threads_allocate_concurrently(pools):
    a, _ = pools
    alloc = tcupy.allocator(a)

    def work(k):
        with cupy.cuda.Device(0), cupy.cuda.using_allocator(alloc), cupy.cuda.Stream(non_blocking=True) as s:
            arrays = []
            for i in range(300):
                arrays.append(cupy.full(256 + (k * 37 + i) % 5000, k, dtype=cupy.uint8))
                if len(arrays) > 20:
                    arrays.pop(0)
                assert _stream_of(arrays[-1].data.mem) == s.ptr
            assert all(int(x[0]) == k for x in arrays)
            s.synchronize()
            del arrays

    run_threads(work, 8)
    gc.collect()
    assert _bytes(a) == 0
    del alloc


@pytest.mark.parametrize("which", ["fixed", "current"])
def test_no_deadlock_when_cuda_waits_for_a_python_host_function(run_python, which):
    # A Python host function on a stream needs the GIL to finish, and a
    # cuMemFree (a CudaResource has no pool) waits for the device, host
    # functions included. The hook holds the GIL only on the quick paths,
    # which make no CUDA call: this free must run with the GIL released, or
    # neither side can go on (before stop 37 the C hook kept the GIL here
    # whenever no tether Python callable was registered). In a subprocess
    # with a timeout, so a deadlock fails the test instead of hanging the run.
    code = f"""
import threading, time
import cupy, tether, tether.cupy as tcupy
cuda = tether.CudaResource(0)
if "{which}" == "current":
    tether.set_current_resource(cuda, 0)
    alloc = tcupy.allocator()
else:
    alloc = tcupy.allocator(cuda)
cupy.cuda.Device(0).use()
cupy.cuda.set_allocator(alloc)
s = cupy.cuda.Stream(non_blocking=True)
started = threading.Event()

def host_function(_):
    started.set()
    time.sleep(0.3)  # lets the main thread run; needs the GIL back to return

for _ in range(3):
    y = cupy.empty(1 << 20, dtype=cupy.uint8)
    s.launch_host_func(host_function, None)
    assert started.wait(30)
    del y  # cuMemFree: waits for the host function
    started.clear()
s.synchronize()
print("ok")
"""
    try:
        out = run_python(code, timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"deadlock: the script did not finish in 120 s\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr
