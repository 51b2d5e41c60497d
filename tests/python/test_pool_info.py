"""PoolResource.pool_info(): every field of tether_pool_info_t, free_blocks included,
and the struct_size rule of info structs as Python's cffi sees it."""

from __future__ import annotations

import pytest

import tether
from tether._errors import check
from tether._ffi import ffi, lib


def test_free_blocks_counts_the_holes_of_a_pool():
    with tether.PoolResource(tether.HostResource(), initial_size="1 MiB") as pool:
        assert pool.pool_info().free_blocks == 1  # one free block: all of it
        a, b, c = (pool.allocate(4096) for _ in range(3))
        assert pool.pool_info().free_blocks == 1  # the tail
        pool.deallocate(b, 4096)
        info = pool.pool_info()
        assert info == tether.PoolInfo(pool_size=1 << 20, free_bytes=(1 << 20) - 2 * 4096,
                                       largest_free_block=(1 << 20) - 3 * 4096, chunk_count=1, free_blocks=2)
        pool.deallocate(a, 4096)
        pool.deallocate(c, 4096)
        assert pool.pool_info().free_blocks == 1  # coalesced again
        pool.trim()
        assert pool.pool_info() == tether.PoolInfo(0, 0, 0, 0, 0)


def test_pool_info_fields_are_the_c_struct_in_order():
    fields = [name for name, _ in ffi.typeof("tether_pool_info_t").fields if name != "struct_size"]
    assert list(tether.PoolInfo._fields) == fields
    assert fields[-1] == "free_blocks"


def test_an_old_size_struct_gets_the_old_fields_only():
    """A caller built against the header before free_blocks: struct_size = TETHER_POOL_INFO_FIRST_SIZE."""
    assert lib.TETHER_POOL_INFO_FIRST_SIZE == ffi.offsetof("tether_pool_info_t", "free_blocks")
    with tether.PoolResource(tether.HostResource(), initial_size="1 MiB") as pool:
        p = pool.allocate(4096)
        out = ffi.new("tether_pool_info_t*")
        out.struct_size = lib.TETHER_POOL_INFO_FIRST_SIZE
        out.free_blocks = 12345
        assert lib.tether_resource_get_pool_info(pool._h, out) == lib.TETHER_OK
        assert (out.pool_size, out.free_bytes, out.chunk_count) == (1 << 20, (1 << 20) - 4096, 1)
        assert out.free_blocks == 12345 and out.struct_size == lib.TETHER_POOL_INFO_FIRST_SIZE
        out.struct_size = lib.TETHER_POOL_INFO_FIRST_SIZE - 8
        with pytest.raises(tether.VersionMismatchError, match="struct_size"):
            check(lib.tether_resource_get_pool_info(pool._h, out))
        pool.deallocate(p, 4096)
