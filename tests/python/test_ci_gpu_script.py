"""ci/gpu.sh's bookkeeping, run here on a tiny suite (no GPU, no build): each step's start and
outcome go to steps.log as they happen, so a call the device machine stops at its time limit still
says which steps finished and which was running; TETHER_PYTEST_MARK selects by marker; each test's
outcome and time go to pytest-junit.xml."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import time
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "gpu.sh"

pytestmark = pytest.mark.skipif(
    os.path.isdir("/tmp/site/librmm/include"),
    reason="this machine has RMM's wheels unpacked in /tmp/site (the GPU machine): the script's pytest step "
    "would build the RMM C++ interop example too",
)

SUITE = """
import os, time, pytest
@pytest.mark.gpu
def test_marked():
    if os.environ.get("HANG") == "1":
        time.sleep(600)
def test_unmarked():
    assert False, "deselected by TETHER_PYTEST_MARK=gpu"
"""


def script_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], Path]:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_tiny.py").write_text(SUITE)
    site = tmp_path / "site"
    (site / "tether").mkdir(parents=True)
    (site / "tether" / "__init__.py").write_text("")  # TETHER_GPU_REUSE_SITE=1 takes it as installed
    out = tmp_path / "out"
    env = dict(
        os.environ,
        OUT=str(out),
        PYTHON=sys.executable,
        TETHER_GPU_SITE=str(site),
        TETHER_GPU_REUSE_SITE="1",
        TETHER_GPU_BUILD=str(tmp_path / "build"),
        TETHER_GPU_STEPS="pytest",
        TETHER_PYTEST_ARGS=str(tmp_path / "suite"),
        TETHER_PYTEST_MARK="gpu",
        **extra,
    )
    return env, out


def run_script(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)


def test_steps_log_records_each_step_and_the_marker_selects(tmp_path: Path) -> None:
    env, out = script_env(tmp_path)
    proc = run_script(env)
    assert proc.returncode == 0, proc.stdout + proc.stderr + (out / "pytest.log").read_text()
    pytest_log = (out / "pytest.log").read_text()
    assert "1 passed, 1 deselected" in pytest_log, pytest_log
    steps = (out / "steps.log").read_text().splitlines()
    names = [line for line in steps if "pytest tests/python, -m gpu" in line]
    assert len(names) == 2, steps
    assert names[0].startswith("started "), steps
    assert names[1].startswith("ok "), steps
    junit = (out / "pytest-junit.xml").read_text()  # each test's outcome and time, for the next session's plan
    assert 'name="test_marked"' in junit and "test_unmarked" not in junit, junit
    summary = (out / "summary.log").read_text()
    assert "result: all steps passed" in summary, summary


def test_a_stopped_call_leaves_the_running_step_in_steps_log(tmp_path: Path) -> None:
    env, out = script_env(tmp_path, HANG="1")
    proc = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        steps_log = out / "steps.log"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            text = steps_log.read_text() if steps_log.exists() else ""
            if "started" in text and "pytest tests/python" in text:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the pytest step never started")
        os.killpg(proc.pid, signal.SIGKILL)  # as the device's time limit stops a call
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    steps = steps_log.read_text().splitlines()
    assert steps[-1].startswith("started ") and "pytest tests/python, -m gpu" in steps[-1], steps
    assert not (out / "summary.log").exists()


def test_past_the_file_limit_every_log_is_packed_beside_summary_and_steps(tmp_path: Path) -> None:
    """The device tool brings back at most 8 files: past TETHER_OUT_MAX_FILES the script packs
    every file into logs.tar.gz, and only summary.log and steps.log stay beside it."""
    env, out = script_env(tmp_path, TETHER_OUT_MAX_FILES="2")
    proc = run_script(env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar.gz", "steps.log", "summary.log"]
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = {Path(n).name for n in tar.getnames()}
        pytest_log = tar.extractfile("./pytest.log")
        assert pytest_log is not None
        assert "1 passed, 1 deselected" in pytest_log.read().decode()
    assert {"pytest.log", "pytest-junit.xml", "env.log", "steps.log", "summary.log"} <= names, names
    summary = (out / "summary.log").read_text()
    assert "result: all steps passed" in summary and "in logs.tar.gz" in summary, summary


def test_within_the_file_limit_the_logs_stay_as_they_are(tmp_path: Path) -> None:
    env, out = script_env(tmp_path)  # the tiny run writes fewer than the default 8 files
    proc = run_script(env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = {p.name for p in out.iterdir()}
    assert "logs.tar.gz" not in names and {"pytest.log", "summary.log", "steps.log"} <= names, names


def load_pytest_part() -> types.ModuleType:  # ci/ is not a package: load it by path
    import importlib.util

    spec = importlib.util.spec_from_file_location("pytest_part", REPO / "ci" / "pytest_part.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_parts_cover_every_test_file_once_and_balance_the_recorded_gpu_time() -> None:
    part = load_pytest_part()
    files = sorted(p.name for p in (REPO / "tests" / "python").glob("test_*.py"))
    seconds = part.read_seconds()
    assert sum(seconds.values()) > 0, "ci/gpu_pytest_seconds.txt records no time"
    for n in (1, 2, 3, 4):
        parts = part.parts(files, seconds, n)
        assert sorted(f for p in parts for f in p) == files  # each file in exactly one part
        loads = [sum(seconds.get(f, 0.0) for f in p) for p in parts]
        # greedy heaviest-first: no part exceeds the even share by more than the heaviest file
        assert max(loads) <= sum(loads) / n + max(seconds.values()) + 1e-9, loads
    two = [sum(seconds.get(f, 0.0) for f in p) for p in part.parts(files, seconds, 2)]
    assert max(two) <= 1.1 * min(two), two  # the two device calls of a session take about as long


def test_a_new_file_weighs_a_typical_one_and_the_script_prints_paths(tmp_path: Path) -> None:
    part = load_pytest_part()
    seconds = {"test_a.py": 10.0, "test_b.py": 10.0, "test_c.py": 0.0}
    # test_new.py is unknown: it weighs the median of the timed files (10), not 0
    parts = part.parts(["test_a.py", "test_b.py", "test_c.py", "test_new.py"], seconds, 2)
    # heaviest first (ties by name): a, b, new (10 each, not 0), then c
    assert parts == [["test_a.py", "test_new.py"], ["test_b.py", "test_c.py"]], parts
    for name in ("test_x.py", "test_y.py"):
        (tmp_path / name).write_text("")
    out = [
        subprocess.run([sys.executable, str(REPO / "ci" / "pytest_part.py"), str(k), "2", str(tmp_path)],
                       capture_output=True, text=True, check=True).stdout.split()
        for k in (1, 2)
    ]
    assert sorted(out[0] + out[1]) == [str(tmp_path / "test_x.py"), str(tmp_path / "test_y.py")], out
    bad = subprocess.run([sys.executable, str(REPO / "ci" / "pytest_part.py"), "3", "2"], capture_output=True, text=True)
    assert bad.returncode == 2 and "K must be between 1 and N (2), not 3" in bad.stderr, bad.stderr


def test_times_from_junit_round_trips_through_the_seconds_file(tmp_path: Path) -> None:
    part = load_pytest_part()
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.python.test_gpu_ipc" name="a" time="1.5"/>'
        '<testcase classname="tests.python.test_gpu_ipc.TestX" name="b" time="2.0"/>'
        '<testcase classname="tests.python.test_spec" name="c" time="0.5"/>'
        "</testsuite></testsuites>"
    )
    test_dir = tmp_path / "suite"
    test_dir.mkdir()
    for name in ("test_gpu_ipc.py", "test_spec.py", "test_cpu_only.py"):
        (test_dir / name).write_text("")
    text = part.times_from([str(junit)], test_dir)
    (tmp_path / "seconds.txt").write_text(text)
    assert part.read_seconds(tmp_path / "seconds.txt") == {"test_gpu_ipc.py": 3.5, "test_spec.py": 0.5,
                                                           "test_cpu_only.py": 0.0}


def test_a_part_that_names_no_files_fails_the_run_instead_of_running_everything(tmp_path: Path) -> None:
    env, out = script_env(tmp_path, TETHER_PYTEST_PART="3/2")
    proc = run_script(env)
    assert proc.returncode != 0
    summary = (out / "summary.log").read_text()
    assert "FAILED" in summary and "pytest tests/python, part 3/2, -m gpu" in summary, summary
    assert "result: FAILED" in summary, summary
    steps = (out / "steps.log").read_text().splitlines()  # recorded like any other step's outcome
    assert steps[-1].startswith("FAILED") and "part 3/2" in steps[-1], steps
    pytest_log = (out / "pytest.log").read_text()
    assert "K must be between 1 and N (2), not 3" in pytest_log
    assert "passed" not in pytest_log, pytest_log  # no test ran
