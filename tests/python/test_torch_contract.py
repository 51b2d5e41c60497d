"""The rest of PyTorch's allocator contract without a GPU (tether/torch.h):
record_stream, empty_cache, the per-process memory fraction, CUDA graph pools,
memory_stats, and their registration through the allocator object's setters.
The C entry points are driven on host memory (device=tether.HOST), as PyTorch
would call them for a CUDA device; PyTorch itself is a fake (hook_fakes.FakeTorch)."""

from __future__ import annotations

import ctypes

import pytest

import tether
import tether.torch
from hook_fakes import FakeTorch
from tether._ffi import ffi, lib, library_path

HOST = lib.TETHER_DEVICE_HOST
KiB = 1 << 10
MiB = 1 << 20


def host_alloc(size, stream=ffi.NULL):
    p = lib.tether_torch_allocate(size, HOST, stream)
    assert p != ffi.NULL
    return p


def sptr(value: int):
    return ffi.cast("void*", value)


def pool_id(a: int, b: int):
    v = ffi.new("tether_torch_mempool_id_t*")
    v.first, v.second = a, b
    return v[0]


# ---- registration through the allocator object's setters -------------------------------

def test_allocator_registers_every_contract_function_at_its_libtether_address():
    fake = FakeTorch()
    with fake.installed_as_torch():
        pluggable = tether.torch.allocator()
    got = pluggable.allocator().registered
    so = ctypes.CDLL(library_path())
    expected = {setter: ctypes.cast(getattr(so, fn), ctypes.c_void_p).value
                for setter, fn, _ in tether.torch._CONTRACT}
    assert got == expected
    assert set(got) == {"set_record_stream_fn", "set_reset_fn", "set_memory_fraction_fn",
                        "set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool"}


def test_enable_installs_the_allocator_with_its_contract():
    fake = FakeTorch()
    with fake.installed_as_torch():
        tether.torch.enable()
    assert "set_record_stream_fn" in fake.installed.allocator().registered


def test_the_private_switch_leaves_record_stream_unregistered():
    fake = FakeTorch()
    with fake.installed_as_torch():
        pluggable = tether.torch.allocator(_record_stream=False)
    got = pluggable.allocator().registered
    assert "set_record_stream_fn" not in got and "set_reset_fn" in got


def test_a_missing_setter_names_itself_and_the_pytorch_version():
    fake = FakeTorch(version="2.0.1", missing=("set_release_pool", "set_begin_allocate_to_pool"))
    with fake.installed_as_torch(), pytest.raises(RuntimeError) as e:
        tether.torch.allocator()
    msg = str(e.value)
    assert "2.0.1" in msg and "set_release_pool" in msg and "set_begin_allocate_to_pool" in msg
    assert "set_reset_fn" not in msg


def test_the_registered_record_stream_is_callable_with_pytorchs_signature():
    # void(void*, cudaStream_t), called through the address the setter got.
    fake = FakeTorch()
    with fake.installed_as_torch():
        pluggable = tether.torch.allocator()
    address = pluggable.allocator().registered["set_record_stream_fn"]
    record = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(address)
    before = tether.torch.stats()
    with tether.using(tether.HostResource(), device=tether.HOST):
        p = host_alloc(4096)
        record(int(ffi.cast("uintptr_t", p)), 0x51DE)
        lib.tether_torch_deallocate(p, 4096, HOST, ffi.NULL)
    assert tether.torch.stats().recorded_streams == before.recorded_streams + 1


# ---- record_stream bookkeeping ---------------------------------------------------------

def test_record_stream_counts_new_streams_only_and_unknown_pointers():
    res = tether.StatisticsAdaptor(tether.HostResource())
    with tether.using(res, device=tether.HOST):
        before = tether.torch.stats()
        p = host_alloc(4096, sptr(0xA))
        lib.tether_torch_record_stream(p, sptr(0xB))
        lib.tether_torch_record_stream(p, sptr(0xB))   # duplicate: nothing new
        lib.tether_torch_record_stream(p, sptr(0xA))   # its own stream: nothing new
        for s in (0xC, 0xD, 0xE, 0xF):                 # past the inline set
            lib.tether_torch_record_stream(p, sptr(s))
        lib.tether_torch_record_stream(p, sptr(0xC))
        mid = tether.torch.stats()
        assert mid.recorded_streams == before.recorded_streams + 5
        assert mid.allocations == before.allocations + 1, "recording is not an allocation"
        assert mid.outstanding_count == before.outstanding_count + 1
        assert mid.unknown_records == before.unknown_records
        lib.tether_torch_deallocate(p, 4096, HOST, sptr(0xA))
        # Host memory has no stream order: the free is immediate.
        assert res.statistics().current_bytes == 0
        lib.tether_torch_record_stream(p, sptr(0xB))          # already freed
        lib.tether_torch_record_stream(sptr(0x1000), sptr(0xB))  # never allocated
        lib.tether_torch_record_stream(ffi.NULL, sptr(0xB))
        after = tether.torch.stats()
    assert after.unknown_records == before.unknown_records + 3
    assert after.outstanding_count == before.outstanding_count
    assert after.unknown_frees == before.unknown_frees
    res.close()


def test_stats_of_the_first_published_layout_are_still_written():
    out = ffi.new("tether_torch_stats_t*")
    out.struct_size = lib.TETHER_TORCH_STATS_FIRST_SIZE
    out.unknown_records = 12345
    assert lib.tether_torch_get_stats(out) == lib.TETHER_OK
    assert out.unknown_records == 12345, "fields past the caller's struct_size are not written"
    assert out.struct_size == lib.TETHER_TORCH_STATS_FIRST_SIZE


# ---- empty_cache ----------------------------------------------------------------------

def test_empty_cache_trims_the_current_resource():
    pool = tether.PoolResource(tether.HostResource())
    with tether.using(pool, device=tether.HOST):
        p = host_alloc(4 * MiB)
        lib.tether_torch_deallocate(p, 4 * MiB, HOST, ffi.NULL)
        assert pool.pool_info().pool_size >= 4 * MiB
        lib.tether_torch_empty_cache()
        assert pool.pool_info().pool_size == 0
    pool.close()


def test_empty_cache_trims_bound_resources(run_python):
    proc = run_python(
        "import tether, tether.torch\n"
        "from tether._ffi import ffi, lib\n"
        "pool = tether.PoolResource(tether.HostResource())\n"
        "fn = getattr(lib, tether.torch._function_name(pool, lib.TETHER_TORCH_NULL_ON_FAILURE))\n"
        "p = fn(4 << 20, lib.TETHER_DEVICE_HOST, ffi.NULL)\n"
        "lib.tether_torch_deallocate(p, 4 << 20, lib.TETHER_DEVICE_HOST, ffi.NULL)\n"
        "assert pool.pool_info().pool_size >= 4 << 20\n"
        "lib.tether_torch_empty_cache()\n"
        "assert pool.pool_info().pool_size == 0, pool.pool_info()\n"
        "print('ok')\n")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


# ---- the per-process memory fraction ---------------------------------------------------

def test_memory_fraction_fails_allocations_beyond_it_and_none_below(run_python):
    # A NULL_ON_FAILURE slot reports the failure as NULL (the unbound entry throws C++).
    proc = run_python(
        "import os, tether, tether.torch\n"
        "from tether._ffi import ffi, lib\n"
        "H = lib.TETHER_DEVICE_HOST\n"
        "total = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')\n"
        "fn = getattr(lib, tether.torch._function_name(tether.HostResource(), lib.TETHER_TORCH_NULL_ON_FAILURE))\n"
        "keep = fn(1 << 20, H, ffi.NULL)\n"
        "lib.tether_torch_set_memory_fraction((4 << 20) / total, H)\n"
        "s = tether.torch.memory_stats(tether.HOST)\n"
        "a = fn(2 << 20, H, ffi.NULL)\n"
        "assert a != ffi.NULL, 'below the limit: 3 of 4 MiB'\n"
        "assert fn(2 << 20, H, ffi.NULL) == ffi.NULL, 'beyond: 5 of 4 MiB'\n"
        "assert tether.torch.memory_stats(tether.HOST)['num_ooms'] == s['num_ooms'] + 1\n"
        "assert 'memory fraction' in ffi.string(lib.tether_last_error_message()).decode()\n"
        "b = fn((1 << 20) - 4096, H, ffi.NULL)\n"
        "assert b != ffi.NULL, 'up to the limit still works after a failure'\n"
        "lib.tether_torch_deallocate(a, 2 << 20, H, ffi.NULL)\n"
        "a = fn(2 << 20, H, ffi.NULL)\n"
        "assert a != ffi.NULL, 'freed memory counts no more'\n"
        "lib.tether_torch_set_memory_fraction(2.0, H)\n"
        "assert 'not in [0, 1]' in ffi.string(lib.tether_last_error_message()).decode()\n"
        "assert fn(2 << 20, H, ffi.NULL) == ffi.NULL, 'a bad fraction is ignored'\n"
        "lib.tether_torch_set_memory_fraction(1.0, H)\n"
        "c = fn(2 << 20, H, ffi.NULL)\n"
        "assert c != ffi.NULL\n"
        "for p, n in ((keep, 1 << 20), (a, 2 << 20), (b, (1 << 20) - 4096), (c, 2 << 20)):\n"
        "    lib.tether_torch_deallocate(p, n, H, ffi.NULL)\n"
        "assert tether.torch.memory_stats(tether.HOST)['allocated_bytes.all.current'] == 0\n"
        "print('ok')\n")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


# ---- CUDA graph pools ------------------------------------------------------------------

CAPTURE = 0xCA97


@ffi.callback("int(void*, void*)")
def capture_filter(stream, user):
    return int(ffi.cast("uintptr_t", stream)) == CAPTURE


def device_stats():
    out = ffi.new("tether_torch_device_stats_t*")
    out.struct_size = ffi.sizeof("tether_torch_device_stats_t")
    assert lib.tether_torch_get_device_stats(HOST, out) == lib.TETHER_OK
    return out


def test_graph_pool_memory_stays_the_pools_until_released():
    current = tether.StatisticsAdaptor(tether.PoolResource(tether.HostResource()))
    gid = pool_id(7, 1)
    with tether.using(current, device=tether.HOST):
        pools_before = device_stats().graph_pools
        assert lib.tether_torch_begin_allocate_to_pool_filter(HOST, gid, capture_filter, ffi.NULL) == lib.TETHER_OK
        assert device_stats().graph_pools == pools_before + 1
        g = host_alloc(64 * KiB, sptr(CAPTURE))          # the capture's: from the graph pool
        assert current.statistics().total_count == 0
        outside = host_alloc(64 * KiB, sptr(0x5))        # not the capture's stream
        assert current.statistics().total_count == 1
        assert device_stats().reserved_bytes >= 128 * KiB
        lib.tether_torch_deallocate(g, 64 * KiB, HOST, sptr(CAPTURE))
        lib.tether_torch_end_allocate_to_pool(HOST, gid)
        # After the capture, the capture stream allocates outside the pool again, and
        # never gets the graph's memory.
        later = [host_alloc(64 * KiB, sptr(CAPTURE)) for _ in range(4)]
        assert g not in later
        assert current.statistics().total_count == 5
        # A second graph on the same pool (torch.cuda.graph(g2, pool=g1.pool())) reuses it.
        assert lib.tether_torch_begin_allocate_to_pool_filter(HOST, gid, capture_filter, ffi.NULL) == lib.TETHER_OK
        assert device_stats().graph_pools == pools_before + 1, "the same pool, not a new one"
        g2 = host_alloc(64 * KiB, sptr(CAPTURE))
        assert g2 == g
        lib.tether_torch_end_allocate_to_pool(HOST, gid)
        lib.tether_torch_release_pool(HOST, gid)          # the first graph goes
        assert device_stats().graph_pools == pools_before + 1
        lib.tether_torch_release_pool(HOST, gid)          # the second: released, g2 still outstanding
        assert device_stats().graph_pools == pools_before
        lib.tether_torch_deallocate(g2, 64 * KiB, HOST, sptr(CAPTURE))  # into the pool it came from
        for p in later + [outside]:
            lib.tether_torch_deallocate(p, 64 * KiB, HOST, ffi.NULL)
    s = device_stats()
    assert s.allocated_bytes == 0 and s.reserved_bytes == 0, (s.allocated_bytes, s.reserved_bytes)
    assert current.statistics().current_bytes == 0
    current.close()


def test_graph_pool_calls_with_unknown_ids_or_bad_arguments_are_harmless():
    lib.tether_torch_end_allocate_to_pool(HOST, pool_id(99, 99))
    lib.tether_torch_release_pool(HOST, pool_id(99, 99))
    assert lib.tether_torch_begin_allocate_to_pool_filter(HOST, pool_id(1, 1), ffi.NULL, ffi.NULL) == \
        lib.TETHER_ERROR_INVALID_ARGUMENT
    assert lib.tether_torch_begin_allocate_to_pool_filter(1000, pool_id(1, 1), capture_filter, ffi.NULL) == \
        lib.TETHER_ERROR_INVALID_ARGUMENT
    assert b"device 1000" in ffi.string(lib.tether_last_error_message())
    assert device_stats().graph_pools == 0


# ---- memory_stats ----------------------------------------------------------------------

def test_memory_stats_has_the_keys_tether_knows_and_tracks_peaks():
    keys = {"allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
            "reserved_bytes.all.peak", "allocation.all.current", "allocation.all.peak", "num_ooms",
            "num_alloc_retries"}
    with tether.using(tether.HostResource(), device=tether.HOST):
        base = tether.torch.memory_stats(tether.HOST)
        assert set(base) == keys
        ps = [host_alloc(MiB) for _ in range(3)]
        s = tether.torch.memory_stats(tether.HOST)
        assert s["allocated_bytes.all.current"] == base["allocated_bytes.all.current"] + 3 * MiB
        assert s["allocation.all.current"] == base["allocation.all.current"] + 3
        for p in ps:
            lib.tether_torch_deallocate(p, MiB, HOST, ffi.NULL)
        after = tether.torch.memory_stats(tether.HOST)
    assert after["allocated_bytes.all.current"] == base["allocated_bytes.all.current"]
    assert after["allocated_bytes.all.peak"] >= base["allocated_bytes.all.current"] + 3 * MiB
    assert after["allocation.all.peak"] >= base["allocation.all.current"] + 3
    assert after["reserved_bytes.all.peak"] >= after["allocated_bytes.all.peak"]


def test_memory_stats_rejects_a_bad_device():
    with pytest.raises(ValueError, match="device 64"):
        tether.torch.memory_stats(64)
    with pytest.raises(TypeError, match="device must be"):
        tether.torch.memory_stats("cuda:0")
