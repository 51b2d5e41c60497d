"""Interpreter exit with PyTorch, CuPy, Numba and cuda.core imported, every
tether hook installed and their tensors, arrays and buffers alive: status 0
and nothing on stderr, whichever is imported first."""

from __future__ import annotations

import textwrap

import pytest

pytestmark = pytest.mark.gpu

for _lib in ("torch", "cupy", "numba", "cuda.core"):
    pytest.importorskip(_lib, reason=f"{_lib} is not installed")

HOOKS = """
    import tether, tether.torch, tether.cupy, tether.numba, tether.cuda_core
    pool = tether.PoolResource(tether.AsyncResource(0), initial_size="64 MiB")
    tether.set_current_resource(pool, 0)
    tether.torch.enable()                       # the current resource at each allocation
    tether.cupy.enable(tether.StatisticsAdaptor(pool))
    tether.numba.enable(pool)
"""

USE = """
    t = torch.ones(1 << 20, device="cuda")
    t2 = torch.zeros(1000, device="cuda")
    c = cupy.arange(1 << 16)
    n = numba.cuda.device_array(1 << 16)
    mr = tether.cuda_core.MemoryResource(pool)
    dev = cuda.core.Device(0)
    dev.set_current()
    cb = mr.allocate(1 << 20, stream=dev.default_stream)
    tb = tether.cuda_core.to_buffer(tether.Buffer(4096, resource=pool))
    assert float(t.sum().item()) == float(1 << 20) and int(c.sum()) == (1 << 16) * ((1 << 16) - 1) // 2
    torch.cuda.synchronize()
    # everything stays alive: the interpreter tears it down in whatever order it picks
"""

ORDERS = {
    "frameworks_first": "import torch, cupy, numba.cuda, cuda.core\n" + textwrap.dedent(HOOKS),
    "tether_first": textwrap.dedent(HOOKS) + "\nimport cuda.core, numba.cuda, cupy, torch\n",
}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_exit_with_every_hook_installed_and_memory_alive(run_python, order):
    code = ORDERS[order] + textwrap.dedent(USE) + "\nprint('reached the end')\n"
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reached the end" in proc.stdout
    assert proc.stderr == "", proc.stderr
