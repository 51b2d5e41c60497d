"""tether.torch without a GPU: the module imports without PyTorch, its functions
say clearly what is missing, and the C entry points PyTorch calls keep each
allocation's origin (driven here on host memory, device=tether.HOST)."""

from __future__ import annotations

import importlib.util

import pytest

import tether
import tether.torch
from tether._ffi import ffi, lib

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def test_importing_the_hook_module_changes_nothing(run_python):
    proc = run_python(
        "import sys, tether, tether.torch\n"
        "assert 'torch' not in sys.modules, 'tether.torch imported PyTorch'\n"
        "s = tether.torch.stats()\n"
        "assert s.outstanding_count == 0 and s.allocations == 0, s\n"
        "print('ok')\n")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


@pytest.mark.skipif(HAVE_TORCH, reason="PyTorch is installed: the missing-PyTorch error cannot be seen")
@pytest.mark.parametrize("fn", ["allocator", "enable", "mem_pool"])
def test_without_pytorch_each_function_names_what_to_install(fn):
    with pytest.raises(ImportError, match="pip install torch"):
        getattr(tether.torch, fn)()


def test_a_resource_argument_must_be_a_tether_resource():
    with pytest.raises(TypeError, match="tether resource"):
        tether.torch.allocator("pool")


def test_origins_survive_a_table_swap_from_python():
    a = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    b = tether.StatisticsAdaptor(tether.HostResource())
    before = tether.torch.stats()
    with tether.using(a, device=tether.HOST):
        p = lib.tether_torch_allocate(4096, lib.TETHER_DEVICE_HOST, ffi.NULL)
        assert p != ffi.NULL
        ffi.memmove(p, b"x" * 4096, 4096)
    assert a.statistics().current_bytes == 4096
    with tether.using(b, device=tether.HOST):
        lib.tether_torch_deallocate(p, 4096, lib.TETHER_DEVICE_HOST, ffi.NULL)
    assert a.statistics().current_bytes == 0
    assert b.statistics().total_count == 0
    after = tether.torch.stats()
    assert after.allocations == before.allocations + 1
    assert after.outstanding_count == before.outstanding_count
    a.close()
    b.close()


def test_binding_a_resource_keeps_it_for_the_process(run_python):
    # Bound resources live for the rest of the process, so this runs in its own interpreter.
    proc = run_python(
        "import tether, tether.torch\n"
        "from tether._ffi import ffi, lib\n"
        "pool = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource(), maximum_size='1 MiB'))\n"
        "name = tether.torch._function_name(pool, lib.TETHER_TORCH_NULL_ON_FAILURE)\n"
        "assert name.startswith('tether_torch_allocate_'), name\n"
        "assert tether.torch._function_name(pool, lib.TETHER_TORCH_NULL_ON_FAILURE) == name\n"
        "fn = getattr(lib, name)\n"
        "pool.close()\n"
        "p = fn(1000, lib.TETHER_DEVICE_HOST, ffi.NULL)\n"
        "assert p != ffi.NULL\n"
        "assert fn(2 << 20, lib.TETHER_DEVICE_HOST, ffi.NULL) == ffi.NULL  # out of memory: NULL\n"
        "assert tether.torch.stats().failures == 1\n"
        "lib.tether_torch_deallocate(p, 1000, lib.TETHER_DEVICE_HOST, ffi.NULL)\n"
        "assert tether.torch.stats().outstanding_count == 0\n"
        "print('ok')\n")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr
