"""Interpreter exit with CUDA memory alive exits cleanly (status 0, nothing on
stderr): tether pools installed in the current-resource table, buffers alive
and exported to CuPy, PyTorch and Numba, the frameworks imported before or
after tether, and finalizers running in whatever order the interpreter picks."""

from __future__ import annotations

import textwrap

import pytest

pytestmark = pytest.mark.gpu

SETUP = """
    tether_pool = tether.PoolResource(tether.CudaResource(0), initial_size="8 MiB")
    async_pool = tether.PoolResource(tether.AsyncResource(0, initial_pool_size="8 MiB"))
    tether.set_current_resource(tether_pool, 0)
    bufs = [tether.Buffer(n) for n in (1, 1000, 1 << 20)]
    more = [tether.Buffer(n, resource=async_pool) for n in (10, 1 << 16)]
    pinned = tether.Buffer(4096, resource=tether.PinnedHostResource(0))
    managed = tether.Buffer(4096, resource=tether.ManagedResource(0))
    raw = async_pool.allocate(4096)  # never given back
    class Cycle:
        pass
    c = Cycle()
    c.me, c.buf = c, tether.Buffer(64, resource=async_pool)
    del c
"""

USES = {
    "cupy": """
        cp_view = cupy.asarray(bufs[2])
        cp_dl = cupy.from_dlpack(more[1])
        cp_own = cupy.zeros(1000)
    """,
    "torch": """
        t_view = torch.from_dlpack(bufs[2])
        t_own = torch.zeros(1000, device="cuda")
    """,
    "numba": """
        nb_view = numba.cuda.as_cuda_array(more[0])
    """,
}

IMPORTS = {"cupy": "import cupy", "torch": "import torch", "numba": "import numba.cuda"}

ORDERS = [
    ("tether",),
    ("tether", "cupy"),
    ("cupy", "tether"),
    ("tether", "torch"),
    ("torch", "tether"),
    ("tether", "numba"),
    ("numba", "tether"),
    ("torch", "cupy", "numba", "tether"),
    ("tether", "numba", "cupy", "torch"),
]


def script(order) -> str:
    lines = ["import tether" if name == "tether" else IMPORTS[name] for name in order]
    body = "\n".join(lines) + textwrap.dedent(SETUP)
    for name in order:
        if name != "tether":
            body += textwrap.dedent(USES[name])
    return body


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_exit_with_live_cuda_memory(run_python, order):
    for name in order:
        if name != "tether":
            pytest.importorskip(IMPORTS[name].split()[1])
    proc = run_python(script(order), env={"PYTHONWARNINGS": "ignore"}, timeout=180)
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr}"
    assert proc.stderr == "", proc.stderr


@pytest.mark.parametrize("ending", ["sys.exit(0)", "os._exit(0)", "raise SystemExit"])
def test_exit_paths(run_python, ending):
    code = "import os, sys, tether\n" + textwrap.dedent(SETUP) + ending + "\n"
    proc = run_python(code, env={"PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_no_cuda_device_visible_is_no_device_error(run_python):
    code = textwrap.dedent("""
        import tether
        assert not tether.cuda_available()
        try:
            tether.CudaResource(0)
        except tether.NoDeviceError as e:
            assert "CUDA driver has no devices" in str(e), str(e)
        else:
            raise AssertionError("CudaResource without a visible device")
        with tether.Buffer(100, device=tether.HOST) as b:  # host memory still works
            b.copy_from_host(b"x" * 100)
    """)
    proc = run_python(code, env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr
