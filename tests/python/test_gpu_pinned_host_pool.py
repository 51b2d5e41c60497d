"""A pinned host pool, pool(pinned_host()) (issue #23 section 2: the composition RMM users
build as pool_memory_resource(pinned_host_memory_resource); docs/resources/pool.rst says why
it is a spec, not a kind of its own): device memory copied into its blocks by the driver
reads back on the host, and the device reads and writes the blocks (cuMemcpy into device
memory and back, no kernel). GPU only: skipped with the reason without a device."""

from __future__ import annotations

import ctypes

import pytest

import tether

pytestmark = pytest.mark.gpu

SPEC = "pool(pinned_host(device=0), initial_size=4MiB, maximum_size=64MiB)"


class _Cuda:
    """The few driver calls the test needs, in device 0's primary context (tether's)."""

    def __init__(self) -> None:
        cu = ctypes.CDLL("libcuda.so.1")
        self.cu = cu
        cu.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        cu.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        cu.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        cu.cuMemcpy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
        cu.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        self.ok(cu.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self.ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.ctx = ctypes.c_void_p()
        self.ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")

    @staticmethod
    def ok(result: int, what: str) -> None:
        assert result == 0, f"{what} failed with CUresult {result}"

    def run(self, what: str, call) -> None:
        self.ok(self.cu.cuCtxPushCurrent_v2(self.ctx), "cuCtxPushCurrent")
        try:
            self.ok(call(), what)
            self.ok(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")
        finally:
            self.cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


@pytest.fixture(scope="module")
def cuda():
    if not tether.cuda_available():
        pytest.skip("no CUDA device")
    return _Cuda()


@pytest.fixture
def pinned_pool():
    with tether.from_spec(SPEC) as pool:
        yield pool


def test_a_pinned_host_pool_is_a_pool_over_pinned_host_memory(pinned_pool):
    assert pinned_pool.name == "pool" and pinned_pool.kind == tether.ResourceKind.POOL
    up = pinned_pool.upstream
    try:
        assert up.name == "pinned_host" and up.kind == tether.ResourceKind.PINNED_HOST
    finally:
        up.close()
    assert pinned_pool.host_accessible and pinned_pool.device_accessible
    with tether.from_spec(pinned_pool.spec) as again:
        assert again.spec == pinned_pool.spec


def test_device_memory_copied_into_the_pool_reads_back_on_the_host(cuda, pinned_pool):
    n = 1 << 20
    data = bytes((i * 131 + 7) & 0xFF for i in range(n))
    with tether.CudaResource(0) as device_mr:
        d = device_mr.allocate(n)
        h = pinned_pool.allocate(n)
        try:
            cuda.run("cuMemcpyHtoD", lambda: cuda.cu.cuMemcpyHtoD_v2(d, data, n))
            ctypes.memset(h, 0, n)
            cuda.run("cuMemcpyDtoH", lambda: cuda.cu.cuMemcpyDtoH_v2(h, d, n))  # device -> pinned pool block
            assert ctypes.string_at(h, n) == data  # read on the host, no staging
        finally:
            pinned_pool.deallocate(h, n)
            device_mr.deallocate(d, n)


def test_the_device_reads_and_writes_the_pool_blocks(cuda, pinned_pool):
    # Kernel-free: the device copies from the block into device memory and back into a second
    # block (cuMemcpy with unified addressing); a device-side memset writes a block directly.
    n = 256 * 1024 + 123
    data = bytes((i * 17 + 3) & 0xFF for i in range(n))
    with tether.CudaResource(0) as device_mr:
        d = device_mr.allocate(n)
        a = pinned_pool.allocate(n)
        b = pinned_pool.allocate(n)
        try:
            ctypes.memmove(a, data, n)
            ctypes.memset(b, 0, n)
            cuda.run("cuMemcpy block -> device", lambda: cuda.cu.cuMemcpy(d, a, n))
            cuda.run("cuMemcpy device -> block", lambda: cuda.cu.cuMemcpy(b, d, n))
            assert ctypes.string_at(b, n) == data
            cuda.run("cuMemsetD8 on a block", lambda: cuda.cu.cuMemsetD8_v2(b, 0x5A, n))
            assert ctypes.string_at(b, n) == b"\x5a" * n
        finally:
            pinned_pool.deallocate(b, n)
            pinned_pool.deallocate(a, n)
            device_mr.deallocate(d, n)


def test_a_tether_buffer_in_the_pool_round_trips(pinned_pool):
    n = 3 * (1 << 20) + 5
    data = bytes(range(256)) * (n // 256) + bytes(n % 256)
    with tether.Buffer(n, resource=pinned_pool) as buf:
        buf.copy_from_host(data)
        assert buf.host_accessible
        assert bytes(buf.copy_to_host()) == data
