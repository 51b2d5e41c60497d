"""pytest configuration for the tether Python tests.

The tests import the *installed* package (pip install .), never the source
tree. Fixtures here: the census check every test runs under, a C compiler
helper for the cross-language tests, and a subprocess runner.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tether

HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA driver and device (skipped without one)")
    config.addinivalue_line("markers", "no_census: the test changes the process-wide object census on purpose")


def pytest_collection_modifyitems(config, items):
    if tether.cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA driver or device on this machine (tether.cuda_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _host_default():
    """Create the host slot's default once (and, with a GPU, each device slot's),
    so tests that read them do not change the census: a default the table
    creates on first use lives as long as the table, it is not a leak."""
    tether.get_current_resource(tether.HOST).close()
    if tether.cuda_available():
        for device in range(tether.cuda_device_count()):
            tether.get_current_resource(device).close()


@pytest.fixture
def restore_device0():
    """Put device 0's slot back as it was when the test began."""
    before = tether.get_current_resource(0)
    yield
    replaced = tether.set_current_resource(before, 0)
    if replaced is not None:
        replaced.close()
    before.close()


@pytest.fixture(autouse=True)
def census(request):
    """Every test must leave no tether object alive (tether_debug_live_objects) that it created."""
    gc.collect()
    before = tether.debug.live_objects()
    yield before
    if request.node.get_closest_marker("no_census"):
        return
    gc.collect()
    after = tether.debug.live_objects()
    assert after == before, f"the test leaked {after - before} tether object(s) (census {before} -> {after})"


def _cc() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


@pytest.fixture(scope="session")
def build_native(tmp_path_factory):
    """Compile a C file into a shared library the way an extension author would:
    -I tether.get_include(), linked to tether.get_library() with an RPATH to it."""
    cc = _cc()
    if cc is None:
        pytest.skip("no C compiler (cc) to build the native test library")
    out_dir = tmp_path_factory.mktemp("native")
    built: dict[str, Path] = {}

    def build(source: Path) -> Path:
        if source in built:
            return built[source]
        lib = Path(tether.get_library())
        target = out_dir / f"lib{source.stem}.so"
        cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC",
               f"-I{tether.get_include()}", str(source), "-o", str(target), str(lib),
               f"-Wl,-rpath,{lib.parent}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
        built[source] = target
        return target

    return build


@pytest.fixture(scope="session")
def run_python():
    """Run a Python snippet in a fresh interpreter; returns the CompletedProcess."""
    def run(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        full_env = dict(os.environ)
        full_env.pop("TETHER_LEAK_REPORT", None)
        if env:
            full_env.update(env)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, env=full_env, cwd=str(HERE))
    return run


@pytest.fixture
def host_pool():
    """A host pool and two statistics adaptors over it (A and B), closed afterwards."""
    pool = tether.PoolResource(tether.HostResource())
    a, b = tether.StatisticsAdaptor(pool), tether.StatisticsAdaptor(pool)
    yield pool, a, b
    for r in (a, b, pool):
        r.close()
