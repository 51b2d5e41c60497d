"""The CUDA resources from Python on a real device: what they are, buffers in
their memory (copies in and out as bytes, numpy arrays and other buffer-protocol
objects), pools over them, out-of-memory, the async pool's options, and the
current-resource slot of a device."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tether
from gpu_support import MiB, resource_factories

pytestmark = pytest.mark.gpu

FACTORIES = resource_factories()


@pytest.fixture(params=sorted(FACTORIES))
def resource(request):
    r = FACTORIES[request.param]()
    yield r
    # Close the whole chain (pools hold their upstream; close our wrappers of it too).
    up = r.upstream
    r.close()
    if up is not None:
        up.close()


def test_driver_queries():
    assert tether.cuda_available()
    assert tether.cuda_device_count() >= 1
    assert tether.cuda_driver_version() >= 12000
    name = tether.cuda_device_name(0)
    assert isinstance(name, str) and name.strip() == name and len(name) > 0
    assert tether.cuda_device_name(tether.CURRENT_DEVICE) == name


@pytest.mark.parametrize("name, cls, kind, device, dev_ok, host_ok", [
    ("cuda", tether.CudaResource, tether.ResourceKind.CUDA, 0, True, False),
    ("async", tether.AsyncResource, tether.ResourceKind.ASYNC, 0, True, False),
    ("managed", tether.ManagedResource, tether.ResourceKind.MANAGED, 0, True, True),
    ("pinned_host", tether.PinnedHostResource, tether.ResourceKind.PINNED_HOST, tether.HOST, True, True),
])
def test_properties(name, cls, kind, device, dev_ok, host_ok):
    with cls() as r:  # device=None: the current device (0 here)
        assert (r.name, r.kind, r.device) == (name, kind, device)
        assert (r.device_accessible, r.host_accessible) == (dev_ok, host_ok)
        assert r.upstream is None


def test_round_trips(resource):
    n = 3 * MiB + 5
    data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
    with tether.Buffer(n, resource=resource) as buf:
        assert buf.size == n
        assert buf.device_accessible
        buf.copy_from_host(data)                       # numpy in
        assert np.array_equal(np.frombuffer(buf.copy_to_host(), np.uint8), data)  # bytearray out
        out = np.zeros(n, np.uint8)
        assert buf.copy_to_host(out) is out            # numpy out
        assert np.array_equal(out, data)
        buf.copy_from_host(b"tether", offset=100)      # bytes in, at an offset
        assert buf.copy_to_host(offset=100, size=6) == bytearray(b"tether")
        mv = memoryview(bytearray(4096))               # buffer protocol out
        buf.copy_to_host(mv, offset=4096)
        assert bytes(mv) == data[4096:8192].tobytes()
        assert buf.tobytes()[:100] == data[:100].tobytes()
        with tether.Buffer(n, resource=resource) as other:  # buffer -> buffer
            other.copy_from(buf)  # ordered on other's stream, as is the read below
            assert other.tobytes() == buf.tobytes()
        buf.resize(MiB)                                # resize keeps the prefix
        assert buf.size == MiB
        assert buf.tobytes() == data[:MiB].tobytes()[:100] + b"tether" + data[106:MiB].tobytes()
        with pytest.raises(tether.InvalidArgumentError):
            buf.copy_to_host(offset=MiB - 1, size=2)


@pytest.fixture(scope="module")
def cupy_stream():
    # Module-scoped: it outlives the resources the tests use it with (a pool
    # keeps the streams its blocks were freed on; see test_gpu_stream_order).
    cupy = pytest.importorskip("cupy")
    return cupy.cuda.Stream(non_blocking=True)


def test_raw_allocate_with_streams(resource, cupy_stream):
    cupy = pytest.importorskip("cupy")
    s = cupy_stream
    ptrs = [resource.allocate(n, stream=s.ptr) for n in (1, 1000, MiB)]
    assert all(p % 256 == 0 for p in ptrs)
    cupy.cuda.runtime.memsetAsync(ptrs[2], 3, MiB, s.ptr)
    s.synchronize()
    out = np.zeros(MiB, np.uint8)
    cupy.cuda.runtime.memcpy(out.ctypes.data, ptrs[2], MiB, cupy.cuda.runtime.memcpyDefault)
    assert (out == 3).all()
    for p, n in zip(ptrs, (1, 1000, MiB)):
        resource.deallocate(p, n, stream=s.ptr)
    with pytest.raises(tether.InvalidArgumentError):
        resource.deallocate(ptrs[0], 1, stream=s.ptr)  # twice


def test_host_accessible_memory_is_visible_to_numpy():
    for cls in (tether.PinnedHostResource, tether.ManagedResource):
        with cls(0) as r, tether.Buffer(4096, resource=r) as buf:
            view = np.asarray(buf)
            view[:] = 9
            assert buf.tobytes() == b"\x09" * 4096
            del view


@pytest.mark.parametrize("make", [
    lambda: tether.CudaResource(0),
    lambda: tether.AsyncResource(0),
    lambda: tether.AsyncResource(0, use_default_pool=True),
    lambda: tether.PoolResource(tether.CudaResource(0)),
    lambda: tether.PoolResource(tether.AsyncResource(0)),
], ids=["cuda", "async", "async_default_pool", "pool_cuda", "pool_async"])
def test_out_of_memory_is_an_exception_and_harmless(make):
    r = make()
    with pytest.raises(tether.OutOfMemoryError) as info:
        tether.Buffer("2 TiB", resource=r)
    assert isinstance(info.value, MemoryError)
    assert "CUDA_ERROR_OUT_OF_MEMORY" in str(info.value)
    with pytest.raises(tether.OutOfMemoryError):
        r.allocate("2 TiB")
    with tether.Buffer(MiB, resource=r) as buf:  # still works
        buf.copy_from_host(b"\x01" * MiB)
        assert buf.tobytes() == b"\x01" * MiB
    up = r.upstream
    r.close()
    if up is not None:
        up.close()


def test_async_pool_options():
    with tether.AsyncResource(0, initial_pool_size="16 MiB", release_threshold="64 MiB",
                              maximum_pool_size="64 MiB") as r:
        a = tether.Buffer("40 MiB", resource=r)
        with pytest.raises(tether.OutOfMemoryError, match="maximum_pool_size"):
            tether.Buffer("40 MiB", resource=r)
        a.close()
        tether.Buffer("40 MiB", resource=r).close()
        r.trim()
    with pytest.raises(ValueError):
        tether.AsyncResource(0, ipc_handle_type="carrier pigeon")
    with pytest.raises(tether.InvalidArgumentError):
        tether.AsyncResource(0, initial_pool_size="2 MiB", maximum_pool_size="1 MiB")
    try:
        ipc = tether.AsyncResource(0, ipc_handle_type="posix_fd")
    except tether.NotSupportedError:
        pass
    else:
        with ipc, tether.Buffer(MiB, resource=ipc) as buf:
            buf.copy_from_host(b"\x05" * MiB)
            assert buf.tobytes() == b"\x05" * MiB


def test_async_view_shares_a_pool_another_library_owns():
    # CuPy's view of the device's default pool and tether's view of it by handle hand out
    # memory of one pool: what one frees the other may get; tether never destroys the pool.
    cupy = pytest.importorskip("cupy")
    handle = cupy.cuda.runtime.deviceGetDefaultMemPool(0)
    with tether.AsyncViewResource(handle, device=0) as view, tether.AsyncResource(0, use_default_pool=True) as dflt:
        assert view.kind == tether.ResourceKind.ASYNC_VIEW and view.name == "async_view"
        assert view == dflt  # one pool: frees may cross
        with tether.Buffer(MiB, resource=view) as buf:
            buf.copy_from_host(b"\x07" * MiB)
            assert buf.tobytes() == b"\x07" * MiB
        with pytest.raises(tether.NotSupportedError, match="handle"):
            view.spec
        view.trim()  # trims the pool (to 0 bytes); the pool itself lives on
    with tether.AsyncViewResource(device=0) as current:  # the device's current pool
        assert current.spec == "async_view(device=0)"
        with tether.from_spec(current.spec) as again:
            assert again == current
    with tether.Buffer(MiB, resource=tether.AsyncViewResource(handle, device=0)) as buf:  # pool still alive
        assert buf.size == MiB


def test_equality():
    a, b = tether.CudaResource(0), tether.CudaResource(0)
    c, d = tether.AsyncResource(0), tether.AsyncResource(0)
    e, f = tether.AsyncResource(0, use_default_pool=True), tether.AsyncResource(0, use_default_pool=True)
    assert a == b and hash(a) == hash(b)
    assert c != d and c == c
    assert e == f and e != c
    assert a != c
    for r in (a, b, c, d, e, f):
        r.close()


def test_bad_devices():
    n = tether.cuda_device_count()
    with pytest.raises(tether.InvalidArgumentError, match="invalid CUDA device"):
        tether.CudaResource(n)
    with pytest.raises(tether.InvalidArgumentError):
        tether.AsyncResource(n)
    with pytest.raises(tether.InvalidArgumentError, match="device"):
        tether.cuda_device_name(n)


def test_device_slot(restore_device0):
    default = tether.get_current_resource(0)
    assert isinstance(default, tether.CudaResource)
    default.close()
    pool = tether.PoolResource(tether.CudaResource(0), initial_size="8 MiB")
    previous = tether.set_current_resource(pool, 0)
    if previous is not None:
        previous.close()
    with tether.Buffer(MiB) as buf:  # device=None: the current device's slot
        assert buf.resource == pool
        assert buf.device == 0
        assert pool.pool_info().free_bytes <= 7 * MiB
    with tether.Buffer(100, device=0) as buf:
        assert buf.resource == pool
    pinned = tether.PinnedHostResource(0)
    tether.set_current_resource(pinned, 0).close()  # host memory suits a device slot
    with tether.Buffer(64) as buf:
        assert buf.host_accessible and buf.device == tether.HOST
    host_before = tether.set_current_resource(pinned, tether.HOST)  # and the host slot
    tether.set_current_resource(host_before, tether.HOST).close()   # put it back as it was
    if host_before is not None:
        host_before.close()
    with pytest.raises(tether.InvalidArgumentError):
        tether.set_current_resource(tether.CudaResource(0), tether.HOST)
    gc.collect()
    up = pool.upstream
    for r in (pool, up, pinned):
        r.close()


def test_percentages_of_device_memory_as_specs_take_them():
    # Python sizes take "80%" as specs do: a share of the device's total memory (of the upstream's
    # device for an adaptor or pool), rounded down.
    cupy = pytest.importorskip("cupy")
    total = cupy.cuda.Device(0).mem_info[1]  # cudaMemGetInfo's total, which tether's percentages use
    assert tether.parse_size("50%", "size", 0) == total // 2
    with tether.PoolResource(tether.CudaResource(0), initial_size="1%", maximum_size="2%") as pool:
        assert pool.pool_info().pool_size >= total // 100
        assert pool.spec == tether.from_spec("pool(cuda(0), initial_size=1%, maximum_size=2%)").spec
        with tether.LimitingAdaptor(pool, "1%") as lim:
            assert lim.limit == total // 100
    with tether.AsyncResource(0, initial_pool_size="1%") as r:
        tether.Buffer("1 MiB", resource=r).close()
