"""PrefetchAdaptor: refused over memory that is not managed; prefetching on a GPU."""

from __future__ import annotations

import ctypes

import pytest

import tether


def test_refuses_host_memory() -> None:
    with tether.HostResource() as host:
        with pytest.raises(ValueError, match="managed memory"):
            tether.PrefetchAdaptor(host)
        with pytest.raises(TypeError, match="upstream"):
            tether.PrefetchAdaptor()


@pytest.mark.gpu
def test_prefetches_managed_memory() -> None:
    with tether.ManagedResource(0) as managed, tether.PrefetchAdaptor(upstream_mr=managed) as pf:
        assert pf.kind == tether.ResourceKind.PREFETCH and pf.device == 0
        assert pf.device_accessible and pf.host_accessible
        p = pf.allocate("1 MiB")
        # Managed memory is coherent: the host may touch it while the prefetch runs.
        ctypes.memset(p, 0x5A, 1 << 20)
        assert ctypes.string_at(p + (1 << 20) - 4, 4) == b"\x5a" * 4
        pf.deallocate(p, "1 MiB")
        with pytest.raises(ValueError, match="managed"):
            with tether.CudaResource(0) as cuda:
                tether.PrefetchAdaptor(cuda)
