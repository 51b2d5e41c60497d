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


def test_steps_log_records_each_step_and_the_marker_selects(tmp_path: Path) -> None:
    env, out = script_env(tmp_path)
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
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
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
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
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = {p.name for p in out.iterdir()}
    assert "logs.tar.gz" not in names and {"pytest.log", "summary.log", "steps.log"} <= names, names
