"""Helpers for the GPU tests (tests/python/test_gpu_*.py): CuPy kernels that
hold a stream back and write patterns, and resource factories.

tether compiles nothing for the GPU, so kernels come from CuPy (NVRTC).
"""

from __future__ import annotations

import pytest

import tether

MiB = 1 << 20

SPIN_AND_FILL = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

extern "C" __global__ void fill(unsigned char* p, unsigned long long n, unsigned char v) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = v;
}
"""


class Kernels:
    """spin(stream, seconds): a one-thread kernel busy for that long; fill(stream, ptr, n, byte)."""

    def __init__(self):
        import cupy
        import numpy
        self._np = numpy
        module = cupy.RawModule(code=SPIN_AND_FILL)
        self._spin = module.get_function("spin")
        self._fill = module.get_function("fill")

    def spin(self, stream, seconds: float) -> None:
        self._spin((1,), (1,), (self._np.uint64(int(seconds * 1e9)),), stream=stream)

    def fill(self, stream, ptr: int, n: int, byte: int) -> None:
        self._fill((256,), (256,), (self._np.uint64(ptr), self._np.uint64(n), self._np.uint8(byte)), stream=stream)


def cupy_or_skip():
    return pytest.importorskip("cupy", reason="CuPy is not installed")


# Fixtures of the stream-order tests (test_gpu_stream_order.py, test_gpu_record_stream.py),
# imported by name into those modules.
@pytest.fixture(scope="module")
def kernels():
    cupy_or_skip()
    return Kernels()


@pytest.fixture(scope="module")
def streams():
    """Two non-blocking CuPy streams, A and B (or the side stream)."""
    cupy = cupy_or_skip()
    return cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)


def resource_factories() -> dict:
    """name -> zero-argument constructor of every CUDA configuration of the conformance
    suite (conformance_factories.FACTORIES: the one list): CUDA resources, pools and adaptors over them.
    A configuration this GPU or driver cannot build (NotSupportedError) skips its test, saying why."""
    from conformance_factories import FACTORIES, make_or_skip
    return {name: (lambda f=f: make_or_skip(f)) for name, f in FACTORIES.items() if f.gpu}
