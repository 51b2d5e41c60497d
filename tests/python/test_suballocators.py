"""ArenaResource, BinningResource and FixedSizeResource from Python: arguments
(sizes as ints and strings, RMM spellings), info tuples, checked frees,
retained upstreams/bins/fallbacks, threads, and the same over CUDA upstreams
(marked gpu)."""

from __future__ import annotations

import ctypes

import pytest

import tether
from thread_support import run_threads

MiB = 1 << 20


def stats_host() -> tether.StatisticsAdaptor:
    return tether.StatisticsAdaptor(tether.HostResource())


# ---- arena ---------------------------------------------------------------------

def test_arena_arguments_and_info():
    up = stats_host()
    arena = tether.ArenaResource(up, arena_size="8 MiB")
    assert arena.kind == tether.ResourceKind.ARENA
    assert arena.name == "arena"
    assert isinstance(arena, tether.UpstreamAdaptor)
    assert arena.upstream == up
    assert up.statistics().current_bytes == 8 * MiB
    info = arena.arena_info()
    assert isinstance(info, tether.ArenaInfo)
    assert info.arena_size == 8 * MiB and info.superblock_size == MiB and info.global_free_bytes == 8 * MiB
    big = arena.allocate("3 MiB")
    small = arena.allocate(1000)
    info = arena.arena_info()
    assert info.large_bytes == 3 * MiB and info.arena_superblocks == 1
    with pytest.raises(tether.OutOfMemoryError):
        arena.allocate("5 MiB")
    arena.deallocate(big, "3 MiB")
    arena.deallocate(small, 1000)


def test_arena_rmm_spelling_and_bad_arguments():
    arena = tether.ArenaResource(upstream_mr=tether.HostResource(), superblock_size="64 KiB")
    assert arena.arena_info().superblock_size == 64 * 1024
    with pytest.raises(TypeError, match="upstream"):
        tether.ArenaResource()
    with pytest.raises(ValueError, match="superblock_size"):
        tether.ArenaResource(tether.HostResource(), superblock_size="3 MiB")
    with pytest.raises(ValueError, match="arena_size"):
        tether.ArenaResource(tether.HostResource(), arena_size="lots")


def test_arena_checked_frees_change_nothing():
    arena = tether.ArenaResource(tether.HostResource(), arena_size="4 MiB")
    p = arena.allocate(1000)
    ctypes.memset(p, 7, 1000)
    with pytest.raises(tether.InvalidArgumentError, match="1000"):
        arena.deallocate(p, 999)
    with pytest.raises(ValueError, match="not allocated by this arena"):
        arena.deallocate(p + 256, 10)
    assert ctypes.string_at(p, 1000) == b"\x07" * 1000
    arena.deallocate(p, 1000)
    with pytest.raises(ValueError):
        arena.deallocate(p, 1000)


def test_arena_keeps_its_upstream_and_trims():
    up = stats_host()
    arena = tether.ArenaResource(up)
    with tether.Buffer("100 KiB", resource=arena) as buf:
        assert buf.size == 100 * 1024
    assert up.statistics().current_bytes > 0
    arena.trim()
    assert up.statistics().current_bytes == 0


def test_arena_threads_allocate_and_free_across_each_other():
    arena = tether.ArenaResource(tether.HostResource())
    handoff: list[list[tuple[int, int]]] = [[] for _ in range(8)]

    def work(t: int) -> None:
        for i in range(200):
            n = 1 + (i * 7919 + t * 104729) % 40000
            p = arena.allocate(n)
            ctypes.memset(p, t, n)
            if i % 4 == 0:
                handoff[t].append((p, n))
            else:
                assert ctypes.string_at(p, 1)[0] == t
                arena.deallocate(p, n)

    run_threads(work, 8)
    for t in range(8):  # freed by this thread, not the one that allocated
        for p, n in handoff[t]:
            assert ctypes.string_at(p, 1)[0] == t
            arena.deallocate(p, n)
    assert arena.arena_info().large_bytes == 0


# ---- binning -------------------------------------------------------------------

def test_binning_has_no_bins_until_given():
    up = stats_host()
    b = tether.BinningResource(up)
    assert b.bin_sizes == []
    assert b.binning_info() == tether.BinningInfo(0, 0, 0)
    p = b.allocate(100)
    assert up.statistics().current_bytes == 100  # the fallback is the upstream
    b.deallocate(p, 100)


def test_binning_range_list_and_rmm_keywords():
    assert tether.BinningResource(tether.HostResource(), (8, 10)).bin_sizes == [256, 512, 1024]
    assert tether.BinningResource(upstream_mr=tether.HostResource(), min_size_exponent=9,
                                  max_size_exponent=10).bin_sizes == [512, 1024]
    pool = tether.PoolResource(tether.HostResource())
    b = tether.BinningResource(tether.HostResource(), ["4 KiB", 256, ("64 KiB", pool)],
                               blocks_to_preallocate=2)
    assert b.bin_sizes == [256, 4096, 65536]
    assert b.binning_info() == tether.BinningInfo(3, 256, 65536)
    with pytest.raises(TypeError):
        tether.BinningResource(tether.HostResource(), (8, 10), min_size_exponent=8, max_size_exponent=9)
    with pytest.raises(ValueError, match="exponent"):
        tether.BinningResource(tether.HostResource(), (12, 10))
    with pytest.raises(TypeError, match="bins"):
        tether.BinningResource(tether.HostResource(), "4 KiB")


def test_binning_routes_to_bins_and_fallback_and_keeps_them_alive():
    fallback = stats_host()
    bin_resource = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    b = tether.BinningResource(tether.HostResource(), fallback=fallback)
    b.add_bin("1 KiB")
    b.add_bin("64 KiB", bin_resource)
    with pytest.raises(ValueError, match="already exists"):
        b.add_bin(1024)
    with pytest.raises(ValueError):
        b.add_bin(0)
    small = b.allocate(500)
    mid = b.allocate(5000)
    big = b.allocate(100000)
    assert bin_resource.statistics().current_bytes == 5000
    assert fallback.statistics().current_bytes == 100000
    with pytest.raises(ValueError):  # the bin's callers may not free the binning resource's memory
        bin_resource.deallocate(mid, 5000)
    # Close our wrappers: the binning resource keeps the resources themselves alive.
    bin_resource.close()
    fallback.close()
    b.deallocate(mid, 5000)
    b.deallocate(big, 100000)
    b.deallocate(small, 500)
    again = b.allocate(100000)
    b.deallocate(again, 100000)


def test_binning_add_bin_on_other_resources_is_not_supported():
    b = tether.BinningResource(tether.HostResource())
    with pytest.raises(TypeError, match="resource"):
        b.add_bin(256, "not a resource")  # type: ignore[arg-type]


# ---- fixed-size ----------------------------------------------------------------

def test_fixed_size_defaults_and_info():
    up = stats_host()
    f = tether.FixedSizeResource(up, block_size="4 KiB", blocks_to_preallocate=4)
    assert f.kind == tether.ResourceKind.FIXED_SIZE and f.name == "fixed_size"
    assert f.block_size == 4096
    assert up.statistics().current_bytes == 16 * 1024
    ptrs = [f.allocate(4096) for _ in range(5)]
    info = f.fixed_size_info()
    assert isinstance(info, tether.FixedSizeInfo)
    assert (info.total_blocks, info.free_blocks, info.chunk_count) == (8, 3, 2)
    for p in ptrs:
        f.deallocate(p, 4096)
    f.trim()
    assert up.statistics().current_bytes == 0


def test_fixed_size_default_block_is_one_mib():
    f = tether.FixedSizeResource(tether.HostResource(), blocks_to_preallocate=1)
    assert f.block_size == MiB


def test_fixed_size_rejects_larger_requests_naming_the_size():
    f = tether.FixedSizeResource(tether.HostResource(), "1 KiB", 2)
    with pytest.raises(tether.OutOfMemoryError, match="1025"):
        f.allocate(1025)
    with pytest.raises(ValueError, match="alignment"):
        f.allocate(64, alignment=2048)
    with pytest.raises(TypeError, match="blocks_to_preallocate"):
        tether.FixedSizeResource(tether.HostResource(), "1 KiB", "2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="blocks_to_preallocate"):
        tether.FixedSizeResource(tether.HostResource(), "1 KiB", -1)
    with pytest.raises(ValueError, match="block_size"):
        tether.FixedSizeResource(tether.HostResource(), 0)


# ---- over CUDA upstreams ---------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("make", [
    lambda up: tether.ArenaResource(up, arena_size="64 MiB"),
    lambda up: tether.BinningResource(up, (8, 16), blocks_to_preallocate=8),
    lambda up: tether.FixedSizeResource(up, "64 KiB", 8),
], ids=["arena", "binning", "fixed_size"])
def test_over_cuda_upstreams(make):
    r = make(tether.CudaResource(0))
    assert r.device_accessible and not r.host_accessible and r.device == 0
    streams = [0, None]
    ptrs = []
    for i in range(64):
        n = 256 * (1 + i)
        ptrs.append((r.allocate(n, stream=streams[i % 2]), n))
    for p, n in ptrs:
        r.deallocate(p, n, stream=0)
    r.trim()
