"""AlignedAdaptor: the alignment rule, arguments, RMM spellings."""

from __future__ import annotations

import pytest

import tether


def test_alignment_from_the_threshold_on() -> None:
    with tether.HostResource() as host, tether.AlignedAdaptor(host, "64 KiB", threshold=4096) as al:
        assert al.kind == tether.ResourceKind.ALIGNED and al.name == "aligned"
        assert (al.alignment, al.threshold) == (65536, 4096)
        bigs = [al.allocate(4096 + i) for i in range(8)]
        assert all(p % 65536 == 0 for p in bigs)
        small = al.allocate(100, alignment=64)
        assert small % 64 == 0
        with pytest.raises(ValueError):
            host.deallocate(bigs[0], 4096, alignment=65536)  # not the host's to take back
        with pytest.raises(ValueError):
            al.deallocate(small, 100, alignment=4096)  # below the threshold: alignments must match
        al.deallocate(small, 100, alignment=64)
        for i, p in enumerate(bigs):
            al.deallocate(p, 4096 + i)


def test_arguments() -> None:
    with tether.HostResource() as host:
        with tether.AlignedAdaptor(upstream_mr=host, alignment=4096, alignment_threshold="1 KiB") as al:
            assert al.threshold == 1024
            with al.upstream as up:
                assert up == host
        with pytest.raises(ValueError, match="alignment 3"):
            tether.AlignedAdaptor(host, 3)
        with pytest.raises(ValueError, match="alignment"):
            tether.AlignedAdaptor(host, 0)
        with pytest.raises(TypeError, match="alignment"):
            tether.AlignedAdaptor(host)
        with pytest.raises(TypeError, match="upstream"):
            tether.AlignedAdaptor(alignment=4096)


def test_over_a_pool() -> None:
    with tether.PoolResource(tether.HostResource()) as pool, tether.AlignedAdaptor(pool, 8192) as al:
        ps = [al.allocate(10) for _ in range(4)]
        assert all(p % 8192 == 0 for p in ps)
        for p in ps:
            al.deallocate(p, 10)
