"""Resource specs from Python: tether.from_spec, Resource.spec / str(), and the
TETHER_RESOURCE* environment variables that name the table's defaults."""

from __future__ import annotations

import textwrap

import pytest

import tether


def test_from_spec_builds_the_stack_and_round_trips():
    r = tether.from_spec("statistics(pool(host, initial_size='64 MiB', maximum_size=1GiB))")
    assert isinstance(r, tether.StatisticsAdaptor)
    pool = r.upstream
    assert isinstance(pool, tether.PoolResource)
    assert pool.pool_info().pool_size == 64 << 20
    assert r.spec == "statistics(pool(host, initial_size=64MiB, maximum_size=1GiB))"
    assert str(r) == r.spec
    again = tether.from_spec(r.spec)
    assert again.spec == r.spec
    b = tether.Buffer(1000, resource=r)
    assert r.statistics().current_bytes == 1000
    b.close()
    for x in (pool, r, again):
        x.close()


def test_resources_made_in_python_describe_themselves():
    host = tether.HostResource()
    pool = tether.PoolResource(host, initial_pool_size="2 MiB", growth_size=4096)
    assert pool.spec == "pool(host, initial_size=2MiB, growth_size=4KiB)"
    assert tether.from_spec(pool.spec).spec == pool.spec
    pool.close()
    host.close()
    with pytest.raises(tether.InvalidHandleError):
        pool.spec
    assert "closed" in str(pool)


@pytest.mark.parametrize("spec, needle", [
    ("pool(host, initial=1MiB)", "spec:12: unknown parameter 'initial' of pool"),
    ("pol(host)", "unknown resource 'pol'"),
    ("pool(host, initial_size=50%)", "a percentage needs device memory"),
    ("pool(host", "missing ')'"),
    ("", "empty spec"),
])
def test_bad_specs_name_position_and_token(spec, needle):
    with pytest.raises(tether.InvalidArgumentError, match=None) as e:
        tether.from_spec(spec)
    assert needle in str(e.value)
    assert isinstance(e.value, ValueError)


def test_bad_arguments():
    with pytest.raises(TypeError, match="spec must be a str"):
        tether.from_spec(b"host")
    with pytest.raises(ValueError, match="NUL"):
        tether.from_spec("host\0")


def test_cuda_spec_without_a_device():
    if tether.cuda_available():
        pytest.skip("a GPU is present: test_gpu_spec covers CUDA specs")
    with pytest.raises((tether.NoDeviceError, tether.NotSupportedError)):
        tether.from_spec("pool(cuda(), initial_size=10%)")


@pytest.mark.gpu
def test_gpu_spec():
    r = tether.from_spec("statistics(pool(cuda(0), initial_size=1%))")
    assert r.device == 0 and r.device_accessible
    assert r.spec.startswith("statistics(pool(cuda(device=0), initial_size=")
    assert tether.from_spec(r.spec).spec == r.spec
    b = tether.Buffer("1 MiB", resource=r)
    b.close()
    r.close()


@pytest.mark.no_census
def test_environment_names_the_host_default(run_python):
    code = textwrap.dedent("""
        import tether
        r = tether.get_current_resource(tether.HOST)
        print(r.spec)
        b = tether.Buffer(100, device=tether.HOST)
        print(r.upstream.pool_info().pool_size)
    """)
    p = run_python(code, env={"TETHER_RESOURCE_HOST": "statistics(pool(host, initial_size=3MiB))"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["statistics(pool(host,", "initial_size=3MiB))", str(3 << 20)]


@pytest.mark.no_census
def test_a_bad_environment_spec_fails_every_get_and_is_reported_once(run_python):
    code = textwrap.dedent("""
        import tether
        for _ in range(3):
            try:
                tether.get_current_resource(tether.HOST)
            except tether.InvalidArgumentError as e:
                print("error:", e)
        tether.set_current_resource(tether.HostResource(), device=tether.HOST)
        print("after set:", tether.get_current_resource(tether.HOST).spec)
    """)
    p = run_python(code, env={"TETHER_RESOURCE_HOST": "pool(host, initial=1)"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len([x for x in lines if x.startswith("error:")]) == 3
    assert all("TETHER_RESOURCE_HOST='pool(host, initial=1)'" in x and "spec:12" in x for x in lines[:3])
    assert lines[3] == "after set: host"
    assert p.stderr.count("tether: TETHER_RESOURCE_HOST=") == 1  # reported once


# ---- TETHER_HOOKS ---------------------------------------------------------------------

def test_hooks_variable_parsing():
    from tether._env_hooks import requested
    assert requested(None) == [] and requested("") == [] and requested(" , ") == []
    assert requested(" Torch, cupy ,torch,numba") == ["torch", "cupy", "numba"]
    with pytest.raises(ValueError, match="unknown hook 'jax'"):
        requested("torch,jax")


@pytest.mark.no_census
def test_import_without_the_variable_installs_nothing(run_python):
    p = run_python("import sys, tether; print(sorted(m for m in sys.modules if m in ('torch', 'cupy', 'numba', 'tether.torch', 'tether.cupy', 'tether.numba')))",
                   env={"TETHER_HOOKS": ""})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


@pytest.mark.no_census
def test_an_unknown_hook_fails_the_import(run_python):
    p = run_python("import tether", env={"TETHER_HOOKS": "torch,jax"})
    assert p.returncode != 0
    assert "unknown hook 'jax'" in p.stderr


@pytest.mark.no_census
def test_a_hook_whose_library_is_missing_fails_the_import_naming_the_variable(run_python):
    code = "import sys; sys.modules['cupy'] = None\nimport tether"
    p = run_python(code, env={"TETHER_HOOKS": "cupy"})
    assert p.returncode != 0
    assert "TETHER_HOOKS='cupy': cannot enable the cupy hook" in p.stderr
    assert "ImportError" in p.stderr or "ModuleNotFoundError" in p.stderr


@pytest.mark.gpu
@pytest.mark.no_census
def test_environment_configures_torch_and_cupy_through_the_table(run_python):
    pytest.importorskip("torch")
    pytest.importorskip("cupy")
    code = textwrap.dedent("""
        import tether, torch, cupy
        r = tether.get_current_resource(0)
        print(r.spec.split('(')[0], r.upstream.spec.split('(')[0])
        t = torch.empty(1 << 20, device="cuda")
        a = cupy.empty(1 << 20, dtype=cupy.uint8)
        print(tether.torch.stats().outstanding_bytes >= (4 << 20), r.statistics().current_bytes >= (5 << 20))
    """)
    p = run_python(code, env={"TETHER_RESOURCE": "statistics(pool(cuda(), initial_size=1%))",
                              "TETHER_HOOKS": "torch,cupy"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["statistics", "pool", "True", "True"]
