"""Resources: construction, properties, identity, options and argument checks.
What every resource owes its users (sizes, alignment, threads, frees, out of
memory...) is the conformance suite: test_conformance.py."""

from __future__ import annotations

import pytest

import tether
from tether import ResourceKind


# ---- properties and identity -------------------------------------------------------

def test_properties_of_host_side_resources():
    with tether.HostResource() as host, tether.PoolResource(host) as pool, tether.StatisticsAdaptor(pool) as st:
        for r, kind, name in ((host, ResourceKind.HOST, "host"), (pool, ResourceKind.POOL, "pool"),
                              (st, ResourceKind.STATISTICS, "statistics")):
            assert r.kind == kind and isinstance(r.kind, ResourceKind)
            assert r.device == tether.HOST
            assert r.host_accessible and not r.device_accessible
            assert r.name == name
            assert name in repr(r) and type(r).__name__ in repr(r)


def test_upstream_chain():
    host = tether.HostResource()
    pool = tether.PoolResource(host)
    stats = tether.StatisticsAdaptor(pool)
    up = stats.upstream
    assert isinstance(up, tether.PoolResource) and up == pool and up is not pool
    assert up.handle == pool.handle
    assert isinstance(up.upstream, tether.HostResource) and up.upstream.handle == host.handle
    assert host.upstream is None
    for r in (up, stats, pool, host):
        r.close()


def test_equality_and_hash():
    a, b = tether.HostResource(), tether.HostResource()
    pool1, pool2 = tether.PoolResource(a), tether.PoolResource(a)
    assert a == a and pool1 == pool1
    # Host memory may be freed into any host resource; two pools never share memory.
    assert a == b and hash(a) == hash(b)
    assert pool1 != pool2 and pool1 != a
    same = pool1.upstream
    assert same == a and hash(same) == hash(a)
    assert {a, b, same} == {a}
    assert (a == "host") is False
    same.close()
    for r in (pool2, pool1, b, a):
        r.close()
    assert a == a and a != b  # closed: equal only to itself


def test_from_handle_wraps_by_kind():
    with tether.PoolResource(tether.HostResource()) as pool:
        again = tether.Resource.from_handle(pool.handle)
        assert type(again) is tether.PoolResource and again == pool
        again.close()
        assert not pool.closed  # each wrapper owns its own reference
        again = tether.PoolResource.from_handle(pool.handle)
        again.close()
        with pytest.raises(TypeError):
            tether.StatisticsAdaptor.from_handle(pool.handle)


def test_resource_is_abstract():
    with pytest.raises(TypeError):
        tether.Resource()


def test_rmm_keyword_aliases():
    host = tether.HostResource()
    pool = tether.PoolResource(upstream_mr=host, initial_pool_size="1 MiB", maximum_pool_size="2 MiB")
    info = pool.pool_info()
    assert info.pool_size == 1 << 20 and info.chunk_count == 1
    with pytest.raises(tether.OutOfMemoryError):
        pool.allocate("3 MiB")
    stats = tether.StatisticsAdaptor(upstream_mr=pool)
    with pytest.raises(TypeError):
        tether.PoolResource(host, upstream_mr=host)
    with pytest.raises(TypeError):
        tether.PoolResource(host, initial_size=1, initial_pool_size=1)
    with pytest.raises(TypeError):
        tether.PoolResource()
    for r in (stats, pool, host):
        r.close()


def test_pool_info_and_trim():
    with tether.PoolResource(tether.HostResource(), growth_size="1 MiB") as pool:
        assert pool.pool_info().pool_size == 0
        p = pool.allocate(1000)
        info = pool.pool_info()
        assert info.pool_size >= 1 << 20 and info.free_bytes < info.pool_size and info.chunk_count == 1
        pool.deallocate(p, 1000)
        assert pool.pool_info().free_bytes == pool.pool_info().pool_size
        pool.trim()
        assert pool.pool_info() == tether.PoolInfo(0, 0, 0, 0, 0)


def test_pool_rejects_initial_above_maximum():
    with tether.HostResource() as host:
        with pytest.raises(tether.InvalidArgumentError):
            tether.PoolResource(host, initial_size="2 MiB", maximum_size="1 MiB")


def test_wrong_resource_frees_are_errors_not_corruption():
    host = tether.HostResource()
    pool1, pool2 = tether.PoolResource(host), tether.PoolResource(host)
    p = pool1.allocate(128)
    with pytest.raises(tether.InvalidArgumentError):
        pool2.deallocate(p, 128)  # not pool2's
    with pytest.raises(tether.InvalidArgumentError):
        pool1.deallocate(p, 64)  # wrong size
    with pytest.raises(tether.InvalidArgumentError):
        pool1.deallocate(p + 8, 128)  # not an allocation
    hp = host.allocate(64)
    with pytest.raises(tether.InvalidArgumentError):
        pool1.deallocate(hp, 64)
    with pytest.raises(tether.InvalidArgumentError):
        host.deallocate(hp, 65)
    host.deallocate(hp, 64)
    pool1.deallocate(p, 128)  # still intact after the refused frees
    with pytest.raises(tether.InvalidArgumentError):
        pool1.deallocate(p, 128)  # double free
    for r in (pool2, pool1, host):
        r.close()


def test_bad_arguments():
    with tether.HostResource() as host:
        with pytest.raises(TypeError):
            tether.PoolResource("host")
        with pytest.raises(TypeError):
            tether.Buffer(10, resource=object())
        with pytest.raises(TypeError):
            host.allocate(10, stream="s")
        with pytest.raises(ValueError):
            host.allocate(10, stream=-1)
        with pytest.raises(ValueError):
            host.allocate(10, alignment=-1)
        with pytest.raises(TypeError):
            host.allocate(None)


# ---- lists derived from the library's constants ---------------------------------

def test_resource_kinds_come_from_the_headers():
    from tether._ffi import lib
    constants = {name[len("TETHER_RESOURCE_KIND_"):]: getattr(lib, name)
                 for name in dir(lib) if name.startswith("TETHER_RESOURCE_KIND_")}
    assert {m.name: m.value for m in ResourceKind} == constants
    assert [m.value for m in ResourceKind] == sorted(constants.values())


def test_an_unknown_kind_is_an_int_compatible_member():
    kind = ResourceKind(1000)
    assert isinstance(kind, ResourceKind) and kind == 1000 and kind.name == "UNKNOWN_1000"
    assert ResourceKind(1000) is kind
    assert 1000 not in [m.value for m in ResourceKind]  # not added to the iteration
    with pytest.raises(ValueError):
        ResourceKind("pool")


def test_a_resource_of_an_unknown_kind_wraps_as_the_base_class(monkeypatch):
    # A resource kind this package has no class for (a newer libtether, a resource made in C).
    from tether import _resources
    real = _resources._properties

    def newer_kind(h):
        props = real(h)
        props.kind = 1001
        return props

    monkeypatch.setattr(_resources, "_properties", newer_kind)
    with tether.HostResource() as host:
        again = tether.Resource.from_handle(host.handle)
        assert type(again) is tether.Resource
        assert again.kind == 1001 and isinstance(again.kind, ResourceKind)
        assert again.name == "host" and again == host
        p = again.allocate(64)
        again.deallocate(p, 64)
        again.close()


def test_info_tuples_have_the_fields_of_the_c_structs():
    from tether._ffi import ffi
    for cls, ctype in ((tether.PoolInfo, "tether_pool_info_t"), (tether.Statistics, "tether_statistics_t")):
        fields = [name for name, _ in ffi.typeof(ctype).fields if name != "struct_size"]
        assert list(cls._fields) == fields
        assert issubclass(cls, tuple) and cls(*range(len(fields)))[-1] == len(fields) - 1


def test_upstream_adaptor_base():
    assert issubclass(tether.PoolResource, tether.UpstreamAdaptor)
    assert issubclass(tether.StatisticsAdaptor, tether.UpstreamAdaptor)
    assert not issubclass(tether.HostResource, tether.UpstreamAdaptor)
    with pytest.raises(TypeError, match=r"StatisticsAdaptor\(\) needs an upstream"):
        tether.StatisticsAdaptor()
    with pytest.raises(TypeError, match="upstream must be a tether resource"):
        tether.StatisticsAdaptor("host")
    with tether.HostResource() as host:
        with pytest.raises(TypeError, match="either upstream= or upstream_mr="):
            tether.StatisticsAdaptor(host, upstream_mr=host)
        host2 = tether.HostResource()
        host2.close()
        with pytest.raises(tether.InvalidHandleError):
            tether.PoolResource(host2)
        with tether.StatisticsAdaptor(upstream_mr=host) as st:
            assert st.upstream == host and st.upstream is not host
