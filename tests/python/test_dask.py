"""tether.dask: the TetherSetup worker plugin, worker_metrics and the preload module.

The plugin's logic is tested in this process against a stand-in worker (so the
census check applies); the distributed paths with a LocalCluster of two worker
processes on the CPU, using host specs (about 10 s). The GPU variant (two
workers on device 0, each with a CUDA pool from a spec and the torch and cupy
hooks) carries the gpu marker; ci/gpu.sh installs dask and distributed from
wheels carried in .whl/dask on a machine that lacks them.
"""

from __future__ import annotations

import importlib.util
import os
import time
import types
import warnings

import pytest

import tether

distributed = pytest.importorskip("distributed")
import tether.dask  # noqa: E402  (needs distributed)

SPEC = "pool(host, initial_size=1MiB)"


def fake_worker(name: str = "w0") -> types.SimpleNamespace:
    """What TetherSetup uses of a distributed.Worker: name and the metrics dict."""
    return types.SimpleNamespace(name=name, address="tcp://127.0.0.1:1", metrics={})


@pytest.fixture
def restore_host():
    """Put the host slot back as it was when the test began."""
    before = tether.get_current_resource(tether.HOST)
    yield
    replaced = tether.set_current_resource(before, tether.HOST)
    if replaced is not None:
        replaced.close()
    before.close()


# ---- in this process ---------------------------------------------------------------


def test_setup_installs_a_statistics_topped_stack_and_teardown_restores(restore_host):
    mine = tether.HostResource()
    old = tether.set_current_resource(mine)
    if old is not None:
        old.close()
    plugin = tether.dask.TetherSetup(SPEC, libraries=())
    worker = fake_worker()
    plugin.setup(worker)
    try:
        current = tether.get_current_resource(tether.HOST)
        assert current.spec == "statistics(" + SPEC + ")"
        current.close()
        b = tether.Buffer("4 KiB", device=tether.HOST)  # through the current host resource
        m = tether.dask.worker_metrics()
        assert m["spec"] == SPEC and m["slot"] == "host" and m["installed"] is True
        assert m["statistics"]["current_bytes"] == 4096 and m["statistics"]["total_count"] == 1
        assert m["pools"] == [{"pool_size": 1 << 20, "free_bytes": (1 << 20) - 4096,
                               "largest_free_block": (1 << 20) - 4096, "chunk_count": 1,
                               "free_blocks": 1}]
        assert m["pid"] == os.getpid() and m["worker"] == "w0" and m["hooks"] == []
        heartbeat = worker.metrics[tether.dask.METRIC_NAME](worker)
        assert heartbeat["current_bytes"] == 4096 and heartbeat["pool_size"] == 1 << 20
        b.close()
    finally:
        plugin.teardown(worker)
    assert tether.dask.METRIC_NAME not in worker.metrics
    assert tether.dask.worker_metrics() == {}
    back = tether.get_current_resource(tether.HOST)
    assert back == mine  # the resource the slot had before
    back.close()
    mine.close()


def test_set_if_unset_keeps_the_applications_choice(restore_host):
    mine = tether.from_spec("pool(host, initial_size=2MiB)")
    old = tether.set_current_resource(mine)
    if old is not None:
        old.close()
    plugin = tether.dask.TetherSetup(SPEC, libraries=(), set_if_unset=True)
    worker = fake_worker()
    plugin.setup(worker)
    try:
        assert tether.dask.worker_metrics()["installed"] is False
        current = tether.get_current_resource(tether.HOST)
        assert current == mine
        current.close()
    finally:
        plugin.teardown(worker)
    current = tether.get_current_resource(tether.HOST)
    assert current == mine  # teardown does not touch what it did not install
    current.close()
    mine.close()


def test_set_if_unset_installs_into_an_unset_slot(restore_host):
    old = tether.set_current_resource(None, tether.HOST)  # unset
    if old is not None:
        old.close()
    plugin = tether.dask.TetherSetup(SPEC, libraries=(), set_if_unset=True)
    worker = fake_worker()
    plugin.setup(worker)
    try:
        assert tether.dask.worker_metrics()["installed"] is True
        current = tether.get_current_resource(tether.HOST)
        assert current.spec.startswith("statistics(pool(host")
        current.close()
    finally:
        plugin.teardown(worker)
    current = tether.get_current_resource(tether.HOST)
    assert current.spec == "host"  # unset again: the slot's default
    current.close()


def test_only_one_active_per_process(restore_host):
    first = tether.dask.TetherSetup(SPEC, libraries=())
    second = tether.dask.TetherSetup("host", libraries=())
    w = fake_worker()
    first.setup(w)
    try:
        with pytest.raises(RuntimeError, match="another TetherSetup is already active"):
            second.setup(w)
        assert tether.dask.worker_metrics()["spec"] == SPEC
    finally:
        first.teardown(w)
    second.teardown(w)  # never set up: nothing to do


def test_missing_library_is_skipped_with_a_warning(restore_host, caplog):
    missing = [n for n in ("torch", "cupy", "numba") if importlib.util.find_spec(n) is None]
    if not missing:
        pytest.skip("torch, cupy and numba are all installed")
    plugin = tether.dask.TetherSetup(SPEC, libraries=missing[0])
    w = fake_worker()
    with pytest.warns(RuntimeWarning, match=f"{missing[0]} is not installed on this worker"):
        plugin.setup(w)
    try:
        assert tether.dask.worker_metrics()["hooks"] == []
        assert any("is not installed" in r.getMessage() for r in caplog.records if r.name == "tether.dask")
    finally:
        plugin.teardown(w)


def test_bad_spec_fails_setup_and_changes_nothing(restore_host):
    before = tether.get_current_resource(tether.HOST)
    plugin = tether.dask.TetherSetup("pol(host)", libraries=())
    w = fake_worker()
    with pytest.raises(tether.InvalidArgumentError, match="unknown resource 'pol'"):
        plugin.setup(w)
    assert w.metrics == {} and tether.dask.worker_metrics() == {}
    after = tether.get_current_resource(tether.HOST)
    assert after == before
    after.close()
    before.close()


@pytest.mark.parametrize("kwargs, error, needle", [
    ({"spec": None}, TypeError, "spec must be a str"),
    ({"spec": "  "}, ValueError, "spec must not be empty"),
    ({"spec": "host", "libraries": ("jax",)}, ValueError, "unknown library 'jax'"),
    ({"spec": "host", "libraries": 3}, TypeError, "libraries must be an iterable"),
    ({"spec": "host", "libraries": (1,)}, TypeError, "libraries: each entry must be a str"),
    ({"spec": "host", "log_directory": 3}, TypeError, "log_directory must be a str"),
    ({"spec": "host", "track_allocations": "yes"}, TypeError, "track_allocations must be a bool"),
    ({"spec": "host", "set_if_unset": 1}, TypeError, "set_if_unset must be a bool"),
])
def test_bad_arguments_name_the_argument(kwargs, error, needle):
    with pytest.raises(error, match=needle):
        tether.dask.TetherSetup(**kwargs)


def test_libraries_accept_a_comma_separated_str():
    assert tether.dask.TetherSetup("host", libraries=" CuPy, torch,,cupy").libraries == ("cupy", "torch")
    assert tether.dask.TetherSetup("host", libraries="").libraries == ()
    assert tether.dask.TetherSetup("host", libraries=None).libraries == ()
    assert tether.dask.TetherSetup("host").libraries == ("torch", "cupy", "numba")


@pytest.mark.skipif(hasattr(tether, "LoggingAdaptor"), reason="this tether has a LoggingAdaptor")
def test_log_directory_without_a_logging_adaptor_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="log_directory needs tether.LoggingAdaptor"):
        tether.dask.TetherSetup("host", log_directory=tmp_path)


@pytest.mark.skipif(hasattr(tether, "TrackingAdaptor"), reason="this tether has a TrackingAdaptor")
def test_track_allocations_without_a_tracking_adaptor_is_a_clear_error():
    with pytest.raises(RuntimeError, match="track_allocations=True needs tether.TrackingAdaptor"):
        tether.dask.TetherSetup("host", track_allocations=True)


@pytest.mark.skipif(not hasattr(tether, "LoggingAdaptor") or not hasattr(tether, "TrackingAdaptor"),
                    reason="needs tether.LoggingAdaptor and tether.TrackingAdaptor")
def test_log_and_tracking_adaptors_in_the_stack(restore_host, tmp_path):
    plugin = tether.dask.TetherSetup(SPEC, libraries=(), log_directory=tmp_path / "logs",
                                     track_allocations=True)
    w = fake_worker("tcp://10.0.0.1:4000")
    plugin.setup(w)
    try:
        b = tether.Buffer(512, device=tether.HOST)
        m = tether.dask.worker_metrics()
        assert m["outstanding_allocations"] == 1
        b.close()
        assert tether.dask.worker_metrics()["outstanding_allocations"] == 0
        path = m["log_path"]
        assert os.path.dirname(path) == str(tmp_path / "logs")
        assert os.path.basename(path) == "tether_tcp_10.0.0.1_4000.csv"
    finally:
        plugin.teardown(w)
    with open(path) as f:
        lines = f.read().splitlines()
    assert len(lines) >= 3  # the header, the allocation and the free


def test_log_and_tracking_adaptors_are_wired_in_order(restore_host, tmp_path, monkeypatch):
    """The stack's order and the log file's name, with stand-ins for the adaptors
    (statistics adaptors here; the real ones come from other branches)."""
    calls = []

    def logging_adaptor(upstream, path):
        calls.append(("logging", upstream.spec, str(path)))
        return tether.StatisticsAdaptor(upstream)

    def tracking_adaptor(upstream, capture_stacks):
        calls.append(("tracking", upstream.spec, capture_stacks))
        return tether.StatisticsAdaptor(upstream)

    monkeypatch.setattr(tether, "LoggingAdaptor", logging_adaptor, raising=False)
    monkeypatch.setattr(tether, "TrackingAdaptor", tracking_adaptor, raising=False)
    plugin = tether.dask.TetherSetup(SPEC, libraries=(), log_directory=str(tmp_path / "a" / "b"),
                                     track_allocations=True)
    w = fake_worker("tcp://10.0.0.1:4000")
    plugin.setup(w)
    try:
        expected_log = str(tmp_path / "a" / "b" / "tether_tcp_10.0.0.1_4000.csv")
        assert calls == [("logging", SPEC, expected_log), ("tracking", "statistics(" + SPEC + ")", False)]
        assert (tmp_path / "a" / "b").is_dir()
        current = tether.get_current_resource(tether.HOST)
        assert current.spec == "statistics(statistics(statistics(" + SPEC + ")))"
        current.close()
        assert tether.dask.worker_metrics()["log_path"] == expected_log
    finally:
        plugin.teardown(w)


def test_plugin_pickles_without_its_resources(restore_host):
    import pickle
    plugin = tether.dask.TetherSetup(SPEC, libraries=())
    w = fake_worker()
    plugin.setup(w)
    try:
        copy = pickle.loads(pickle.dumps(plugin))
        assert copy.spec == SPEC and copy.metrics() == {}
    finally:
        plugin.teardown(w)


# ---- a LocalCluster of two worker processes ---------------------------------------------


def _allocate_on_worker(size: int) -> dict:
    """A task: allocate and free a Buffer through the worker's current host resource."""
    import tether as t
    b = t.Buffer(size, device=t.HOST)
    b.close()
    current = t.get_current_resource(t.HOST)
    try:
        return {"pid": os.getpid(), "spec": current.spec}
    finally:
        current.close()


def _host_spec(dask_worker=None) -> str:
    import tether as t
    current = t.get_current_resource(t.HOST)
    try:
        return current.spec
    finally:
        current.close()


def _cluster(**kwargs):
    return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                    dashboard_address=":0", **kwargs)


def _wait_for_heartbeat_metric(client, expected: dict, timeout: float = 20.0) -> dict:
    """The workers' tether metric as the scheduler has it, once it shows ``expected``
    ({address: {field: value}}) for every worker, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        # The client's copy of the scheduler's identity is refreshed periodically; under load a
        # worker can be missing from it for a moment, so a missing worker reads as "not yet".
        workers = client.scheduler_info()["workers"]
        found = {a: workers.get(a, {}).get("metrics", {}).get(tether.dask.METRIC_NAME) or {} for a in expected}
        if all(all(found[a].get(k) == v for k, v in want.items()) for a, want in expected.items()):
            return found
        if time.monotonic() > deadline:
            return found
        time.sleep(0.2)


@pytest.fixture(scope="module")
def client():
    """One cluster of two worker processes for the plugin tests (a start costs seconds)."""
    with _cluster() as cluster, distributed.Client(cluster) as c:
        yield c


def test_local_cluster_bad_spec_fails_registration(client):
    with pytest.raises(ValueError, match="unknown resource 'pol'"):
        client.register_plugin(tether.dask.TetherSetup("pol(host)", libraries=()))
    assert all(v == {} for v in client.run(tether.dask.worker_metrics).values())


def test_local_cluster_plugin_per_worker_pools_and_metrics(client):
    client.register_plugin(tether.dask.TetherSetup(SPEC, libraries=()))
    addresses = sorted(client.scheduler_info()["workers"])
    assert len(addresses) == 2
    results = {a: client.submit(_allocate_on_worker, 4096 * (i + 1), workers=[a], pure=False).result()
               for i, a in enumerate(addresses)}
    assert len({r["pid"] for r in results.values()}) == 2  # one stack per worker process
    assert all(r["spec"] == "statistics(" + SPEC + ")" for r in results.values())
    figures = client.run(tether.dask.worker_metrics)
    assert sorted(figures) == addresses
    for i, a in enumerate(addresses):
        f = figures[a]
        assert f["pid"] == results[a]["pid"] and f["spec"] == SPEC and f["installed"]
        assert f["statistics"]["total_bytes"] == 4096 * (i + 1)  # each worker counts only its own
        assert f["statistics"]["total_count"] == 1 and f["statistics"]["current_bytes"] == 0
        assert f["pools"][0]["pool_size"] == 1 << 20
    # The heartbeat carries the same figures to the scheduler (within a few heartbeats).
    expected = {a: {"total_bytes": 4096 * (i + 1), "total_count": 1, "current_bytes": 0, "pool_size": 1 << 20}
                for i, a in enumerate(addresses)}
    assert _wait_for_heartbeat_metric(client, expected) == {
        a: {**e, "peak_bytes": e["total_bytes"], "current_count": 0, "peak_count": 1,
            "pool_free_bytes": 1 << 20, "pool_free_blocks": 1} for a, e in expected.items()}
    client.unregister_worker_plugin(tether.dask.TetherSetup.name)
    assert client.run(tether.dask.worker_metrics) == {a: {} for a in addresses}
    assert client.run(_host_spec) == {a: "host" for a in addresses}  # back to the default


def test_local_cluster_preload():
    argv = ["--tether-spec", "pool(host, initial_size=2MiB)", "--tether-libraries", ""]
    with _cluster(preload=["tether.dask"], preload_argv=argv) as cluster, distributed.Client(cluster) as client:
        addresses = sorted(client.scheduler_info()["workers"])
        pids = {a: client.submit(_allocate_on_worker, 1000, workers=[a], pure=False).result()["pid"]
                for a in addresses}
        figures = client.run(tether.dask.worker_metrics)
        assert len(set(pids.values())) == 2
        for a in addresses:
            assert figures[a]["spec"] == "pool(host, initial_size=2MiB)"
            assert figures[a]["pid"] == pids[a]
            assert figures[a]["statistics"]["total_bytes"] == 1000
            assert figures[a]["pools"][0]["pool_size"] == 2 << 20


# ---- GPU: a CUDA spec and the torch/cupy hooks ----------------------------------------

GPU_SPEC = "pool(cuda(device=0), initial_size=256MiB)"
TORCH_BYTES = 3 << 20   # what the task allocates through PyTorch ...
CUPY_BYTES = 5 << 20    # ... and through CuPy, both while the other's memory is live


def _torch_and_cupy_task() -> dict:
    """A task: a PyTorch tensor and a CuPy array on the worker's GPU, both through
    its tether stack; the statistics while both are live, and the results."""
    import cupy
    import torch

    import tether as t
    x = torch.ones(TORCH_BYTES, dtype=torch.uint8, device="cuda")
    y = cupy.full(CUPY_BYTES, 2, dtype=cupy.uint8)
    live = t.dask.worker_metrics()["statistics"]
    sums = (int(x.sum().item()), int(y.sum()))
    del x, y
    torch.cuda.synchronize()
    return {"pid": os.getpid(), "sums": sums, "live": live}


@pytest.mark.gpu
def test_local_cluster_cuda_pool_with_torch_and_cupy_hooks():
    """Two worker processes on one GPU (both on device 0), each with its own
    256 MiB pool from the spec and the torch and cupy hooks: a task allocates
    with both libraries, and the pool and statistics figures come back from
    each worker (client.run) and through the heartbeat (worker metrics)."""
    for library in ("torch", "cupy"):
        if importlib.util.find_spec(library) is None:
            pytest.skip(f"{library} is not installed (the test runs the torch and cupy hooks)")
    with _cluster() as cluster, distributed.Client(cluster) as client:
        client.register_plugin(tether.dask.TetherSetup(GPU_SPEC, libraries=("torch", "cupy")))
        addresses = sorted(client.scheduler_info()["workers"])
        assert len(addresses) == 2
        before = client.run(tether.dask.worker_metrics)
        for f in before.values():
            assert f["spec"] == GPU_SPEC and f["slot"] == 0 and f["hooks"] == ["torch", "cupy"]
            assert f["pools"][0]["pool_size"] == 256 << 20 and f["statistics"]["total_count"] == 0
        results = {a: client.submit(_torch_and_cupy_task, workers=[a], pure=False).result() for a in addresses}
        assert len({r["pid"] for r in results.values()}) == 2  # one stack per worker process
        figures = client.run(tether.dask.worker_metrics)
        for a in addresses:
            r, f = results[a], figures[a]
            assert r["sums"] == (TORCH_BYTES, 2 * CUPY_BYTES)
            # Both libraries' memory came through this worker's stack, at the same time.
            assert r["live"]["current_bytes"] >= TORCH_BYTES + CUPY_BYTES
            assert r["live"]["current_count"] >= 2
            assert f["pid"] == r["pid"]
            stats = f["statistics"]
            assert stats["total_bytes"] >= TORCH_BYTES + CUPY_BYTES
            assert stats["peak_bytes"] >= TORCH_BYTES + CUPY_BYTES
            # The tensor and the array went back (PyTorch may keep a small workspace of its own).
            assert stats["current_bytes"] <= r["live"]["current_bytes"] - TORCH_BYTES - CUPY_BYTES
            pool = f["pools"][0]
            assert pool["pool_size"] == 256 << 20  # served from the initial size, no growth
            assert stats["current_bytes"] <= pool["pool_size"] - pool["free_bytes"] < TORCH_BYTES
            assert pool["free_blocks"] >= 1
        # The same figures reach the scheduler with the heartbeat.
        expected = {a: {"current_bytes": figures[a]["statistics"]["current_bytes"],
                        "total_bytes": figures[a]["statistics"]["total_bytes"],
                        "pool_size": 256 << 20, "pool_free_bytes": figures[a]["pools"][0]["free_bytes"]}
                    for a in addresses}
        heartbeat = _wait_for_heartbeat_metric(client, expected)
        for a in addresses:
            assert {k: heartbeat[a].get(k) for k in expected[a]} == expected[a]
        client.unregister_worker_plugin(tether.dask.TetherSetup.name)
        assert client.run(tether.dask.worker_metrics) == {a: {} for a in addresses}
