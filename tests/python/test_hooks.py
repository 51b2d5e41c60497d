"""The hooks (tether.cupy, tether.numba, tether.cuda_core, tether.rmm) without their libraries.

* Import behaviour: with the library missing, importing the hook raises an
  ImportError that names the library and the pip package; importing tether
  imports no hook and touches no other library.
* Routing: with faithful stand-ins of the libraries (hook_fakes.py), host
  pools and statistics adaptors prove where every byte goes - from the given
  resource or the one current at allocation time, and back into the resource
  it came from even after the current one changed.

The GPU tests (test_gpu_hooks_*.py) repeat the routing with the real libraries.
"""

from __future__ import annotations

import gc
import importlib
import sys

import pytest

import tether
import hook_fakes

HOOKS = {
    # hook module: (modules to hide, words the message must contain)
    "tether.cupy": (("cupy", "cupy.cuda"), ("CuPy", "pip install cupy-cuda")),
    "tether.numba": (("numba", "numba.cuda"), ("Numba", "pip install numba-cuda")),
    "tether.cuda_core": (("cuda", "cuda.core", "cuda.core.experimental"), ("cuda.core", "pip install cuda-core")),
    "tether.rmm": (("rmm", "rmm.mr"), ("RMM", "pip install rmm-cu")),
}


def _forget(monkeypatch, name: str) -> None:
    """Make the next import of hook ``name`` run the module again (and undo that after the test)."""
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delattr(tether, name.split(".")[1], raising=False)


@pytest.fixture
def hook(monkeypatch):
    """hook(name, fake): import tether.<name> against ``fake``; forgotten again after the test,
    so no later test (a GPU test with the real library) sees the fake-bound module."""
    loaded = []

    def load(name, fake):
        hook_fakes.install(monkeypatch, fake)
        _forget(monkeypatch, name)  # undone after this teardown: a real one imported earlier comes back
        loaded.append(name)
        return importlib.import_module(name)
    yield load
    for name in loaded:
        sys.modules.pop(name, None)
        tether.__dict__.pop(name.split(".")[1], None)


def _bytes(stats) -> int:
    return stats.statistics().current_bytes


# ---- import behaviour -------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_without_its_library_raises_a_clear_import_error(monkeypatch, name):
    hidden, words = HOOKS[name]
    for mod in hidden:
        monkeypatch.setitem(sys.modules, mod, None)  # "import mod" now raises ImportError
    _forget(monkeypatch, name)
    with pytest.raises(ImportError) as info:
        importlib.import_module(name)
    for word in words:
        assert word in str(info.value)
    assert isinstance(info.value, ModuleNotFoundError)  # so pytest.importorskip(name) skips
    assert name not in sys.modules


def test_importing_tether_imports_no_hook_and_no_library(run_python):
    proc = run_python(
        "import sys, tether\n"
        "bad = [m for m in ('tether.cupy', 'tether.numba', 'tether.cuda_core', 'tether.rmm',\n"
        "                   'cupy', 'numba', 'cuda.core', 'rmm') if m in sys.modules]\n"
        "print('loaded:', bad)\n")
    assert proc.returncode == 0, proc.stderr
    assert "loaded: []" in proc.stdout


# ---- CuPy ----------------------------------------------------------------------------

def test_cupy_allocator_uses_the_current_resource_at_allocation_time(hook, host_pool):
    fake = hook_fakes.FakeCupy()
    tcupy = hook("tether.cupy", fake)
    _, a, b = host_pool
    alloc = tcupy.allocator()  # resource=None: looked up per allocation
    assert alloc.resource is None
    with tether.using(a, device=tether.HOST):
        fake.stream = 0x5000
        m1 = alloc(1000)
    with tether.using(b, device=tether.HOST):
        fake.stream = 0x6000
        m2 = alloc(3000)
    assert (_bytes(a), _bytes(b)) == (1000, 3000)
    # CuPy's view of the memory: the tether Buffer owns it, on the stream CuPy reported.
    assert m1.mem.device_id == tether.HOST and m1.mem.size == 1000
    assert m1.mem._owner.stream == 0x5000 and m2.mem._owner.stream == 0x6000
    assert m1.ptr == m1.mem._owner.ptr != 0
    m1.mem._owner.memoryview()[:3] = b"abc"  # host memory: really usable
    # Free while B is current: A's bytes go back to A, B is untouched.
    with tether.using(b, device=tether.HOST):
        del m1
        gc.collect()
        assert (_bytes(a), _bytes(b)) == (0, 3000)
    del m2
    gc.collect()
    assert (_bytes(a), _bytes(b)) == (0, 0)
    assert a.statistics().total_count == 1 and b.statistics().total_count == 1


def test_cupy_allocator_with_a_resource_keeps_its_own_reference(hook, host_pool):
    fake = hook_fakes.FakeCupy()
    tcupy = hook("tether.cupy", fake)
    _, a, b = host_pool
    mine = tether.StatisticsAdaptor(a)
    alloc = tcupy.allocator(mine)
    mine.close()  # the allocator's reference keeps it usable
    with tether.using(b, device=tether.HOST):
        m = alloc(4096)
        z = alloc(0)  # size 0 works: a null pointer
    assert (_bytes(a), _bytes(b)) == (4096, 0)
    assert alloc.resource.statistics().current_bytes == 4096
    assert z.ptr == 0 and z.mem.size == 0
    del m, z
    gc.collect()
    assert _bytes(a) == 0
    with pytest.raises(TypeError):
        tcupy.allocator("pool")
    closed = tether.StatisticsAdaptor(a)
    closed.close()
    with pytest.raises(tether.InvalidHandleError):
        tcupy.allocator(closed)


def test_cupy_allocator_error_is_a_tether_error(hook, host_pool):
    fake = hook_fakes.FakeCupy()
    tcupy = hook("tether.cupy", fake)
    limited = tether.PoolResource(tether.HostResource(), maximum_size="1 MiB")
    alloc = tcupy.allocator(limited)
    with pytest.raises(tether.OutOfMemoryError):
        alloc(1 << 30)
    del alloc
    limited.close()


def test_cupy_enable_and_disable(hook, host_pool):
    fake = hook_fakes.FakeCupy()
    tcupy = hook("tether.cupy", fake)
    _, a, _ = host_pool
    fn = tcupy.enable(a)
    assert fake.state["allocator"] is fn
    fn2 = tcupy.enable()  # again: still remembers CuPy's own pool, not our first allocator
    assert fake.state["allocator"] is fn2
    tcupy.disable()
    assert fake.state["allocator"] == fake.default_pool_malloc
    del fn, fn2


# ---- Numba -----------------------------------------------------------------------------

def test_numba_plugin_routes_allocations_and_frees(hook, host_pool):
    fake = hook_fakes.FakeNumba()
    tnumba = hook("tether.numba", fake)
    _, a, b = host_pool
    assert tnumba._numba_memory_manager is tnumba.TetherMemoryManager
    ctx = hook_fakes.FakeContext(tether.HOST)
    mm = tnumba.TetherMemoryManager(context=ctx)
    mm.initialize()
    assert mm.interface_version == 1
    # Default: the current resource of the context's device, at allocation time.
    with tether.using(a, device=tether.HOST):
        p1 = mm.memalloc(2048)
    assert isinstance(p1.device_pointer, fake.CUdeviceptr) and p1.device_pointer.value != 0
    assert p1.size == 2048 and p1.context.device.id == tether.HOST
    # use_resource(): every allocation from that resource, whatever is current.
    assert tnumba.use_resource(b) is None
    with tether.using(a, device=tether.HOST):
        p2 = mm.memalloc(512)
    assert (_bytes(a), _bytes(b)) == (2048, 512)
    del p1
    gc.collect()
    assert (_bytes(a), _bytes(b)) == (0, 512)
    with pytest.raises(NotImplementedError, match="IPC"):
        mm.get_ipc_handle(p2)
    with mm.defer_cleanup():
        pass
    # reset(): Numba's host state and the outstanding tether allocations go.
    mm.reset()
    assert mm.resets == 1 and _bytes(b) == 0
    del p2
    gc.collect()
    previous = tnumba.use_resource(None)
    assert previous == b
    previous.close()
    assert b.statistics().total_count == 1


def test_numba_enable_sets_the_memory_manager(hook, host_pool):
    fake = hook_fakes.FakeNumba()
    tnumba = hook("tether.numba", fake)
    _, a, _ = host_pool
    tnumba.enable(a)
    assert fake.managers == [tnumba.TetherMemoryManager]
    mm = tnumba.TetherMemoryManager(context=hook_fakes.FakeContext(tether.HOST))
    p = mm.memalloc(100)
    assert _bytes(a) == 100
    del p
    gc.collect()
    assert _bytes(a) == 0
    tnumba.use_resource(None).close()


# ---- cuda.core --------------------------------------------------------------------------

def test_cuda_core_memory_resource(hook, host_pool):
    fake = hook_fakes.FakeCudaCore()
    tcore = hook("tether.cuda_core", fake)
    _, a, _ = host_pool
    mr = tcore.MemoryResource(a)
    assert isinstance(mr, fake.MemoryResource)
    assert (mr.is_device_accessible, mr.is_host_accessible, mr.device_id, mr.is_managed) == \
        (False, True, tether.HOST, False)
    s = fake.Stream(0x7000)
    b1 = mr.allocate(1000, stream=s)
    b2 = mr.allocate(24)  # stream=None: the default stream
    b0 = mr.allocate(0)
    assert isinstance(b1, fake.Buffer) and b1.memory_resource is mr and b1.size == 1000
    assert _bytes(a) == 1024 and mr.outstanding == 2 and b0.handle == 0
    assert mr._buffers[b1.handle].stream == 0x7000
    b1.close()  # cuda.core frees on the recorded stream
    assert _bytes(a) == 24
    b2.close(stream=fake.Stream(0x8000))  # ... or on the one close() names
    b0.close()
    assert _bytes(a) == 0 and mr.outstanding == 0
    with pytest.raises(ValueError, match="not allocated here"):
        mr.deallocate(0x1234, 8, stream=s)
    with mr.resource as r:
        assert r == a
    del mr, b1, b2, b0
    gc.collect()


def test_cuda_core_memory_resource_keeps_the_tether_resource_alive(hook):
    fake = hook_fakes.FakeCudaCore()
    tcore = hook("tether.cuda_core", fake)
    pool = tether.PoolResource(tether.HostResource())
    stats = tether.StatisticsAdaptor(pool)
    mr = tcore.MemoryResource(stats)
    buf = mr.allocate(4096)
    stats.close()
    pool.close()
    del mr  # the cuda.core Buffer still holds the mr, which holds the resource
    gc.collect()
    assert buf.memory_resource.resource.statistics().current_bytes == 4096
    buf.close()
    del buf
    gc.collect()


def test_cuda_core_to_buffer_keeps_the_memory_alive(hook, host_pool):
    fake = hook_fakes.FakeCudaCore()
    tcore = hook("tether.cuda_core", fake)
    _, a, _ = host_pool
    tb = tether.Buffer(256, resource=a)
    tb.memoryview()[:2] = b"hi"
    cb = tcore.to_buffer(tb)
    assert cb.handle == tb.ptr and cb.size == 256 and cb.memory_resource is None
    tb.close()
    gc.collect()
    assert _bytes(a) == 256  # cuda.core's owner reference
    assert cb.owner.tobytes()[:2] == b"hi"
    cb.close()
    gc.collect()
    assert _bytes(a) == 0
    with pytest.raises(TypeError):
        tcore.to_buffer(b"bytes")


# ---- RMM -----------------------------------------------------------------------------

def test_rmm_memory_resource(hook, host_pool):
    fake = hook_fakes.FakeRmm()
    trmm = hook("tether.rmm", fake)
    _, a, b = host_pool
    mine = tether.StatisticsAdaptor(a)
    mr = trmm.memory_resource(mine)
    mine.close()  # the memory resource keeps its own reference
    with tether.using(b, device=tether.HOST):
        p = mr.allocate(1 << 16, fake.Stream(0x9000))
        z = mr.allocate(0)
    assert p != 0 and z == 0
    assert (_bytes(a), _bytes(b)) == (1 << 16, 0)
    mr.deallocate(p, 1 << 16, fake.Stream(0x9000))
    mr.deallocate(z, 0)
    assert _bytes(a) == 0
    with pytest.raises(ValueError, match="not allocated"):
        mr.deallocate(p, 1 << 16)
    with pytest.raises(TypeError):
        trmm.memory_resource(42)
    del mr
    gc.collect()
