"""tether.numba on a GPU. Numba picks its memory manager when it creates a
context, so each test runs in a fresh interpreter (the run_python fixture)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

PRELUDE = """
import gc
import numpy as np
if not hasattr(np, "row_stack"):  # numba-cuda's kernel compiler still overloads np.row_stack,
    np.row_stack = np.vstack      # which NumPy 2.5 removed; without this no kernel compiles
import tether
from numba import cuda
pool = tether.PoolResource(tether.CudaResource(0))
a, b = tether.StatisticsAdaptor(pool), tether.StatisticsAdaptor(pool)
def nbytes(s):
    return s.statistics().current_bytes
"""


def _run(run_python, code, env=None):
    proc = run_python(PRELUDE + code, env=env)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


def test_environment_variable_plugin_routes_allocations(run_python):
    _run(run_python, """
import tether.numba
assert isinstance(cuda.current_context().memory_manager, tether.numba.TetherMemoryManager)

@cuda.jit
def twice(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * i

with tether.using(a, device=0):
    d = cuda.device_array(1000, dtype=np.int64)
assert nbytes(a) == 8000, a.statistics()
with tether.using(b, device=0):          # swap the current resource before the free
    twice[4, 256](d)
    assert (d.copy_to_host() == 2 * np.arange(1000)).all()
    del d
    gc.collect()
    assert nbytes(a) == 0
assert b.statistics().total_count == 0   # B never saw A's memory

tether.numba.use_resource(b)             # one resource for every Numba allocation
d = cuda.to_device(np.arange(10, dtype=np.int64))
assert nbytes(b) == 80 and nbytes(a) == 0
del d
gc.collect()
assert nbytes(b) == 0
tether.numba.use_resource(None).close()

free, total = cuda.current_context().get_memory_info()
assert 0 < free <= total
print("OK")
""", env={"NUMBA_CUDA_MEMORY_MANAGER": "tether.numba"})


def test_enable_before_first_use(run_python):
    _run(run_python, """
import tether.numba
tether.numba.enable(a)
d = cuda.device_array((100, 10), dtype=np.float32)
assert nbytes(a) == 4000
d[:] = 1.5
assert float(d.copy_to_host().sum()) == 1500.0
del d
gc.collect()
assert nbytes(a) == 0
tether.numba.use_resource(None).close()
print("OK")
""")


def test_enable_after_numba_made_a_context_refuses(run_python):
    _run(run_python, """
cuda.current_context()
import tether.numba
try:
    tether.numba.enable()
except RuntimeError as e:
    assert "before Numba's first CUDA use" in str(e)
    print("OK")
""")
