"""The Python examples run as tests (the README's demo command runs quickstart.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


@pytest.mark.skipif(shutil.which("cc") is None, reason="the quick start compiles C code with cc")
def test_quickstart():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")], capture_output=True,
                          text=True, timeout=120, cwd=str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "the same handle" in out  # C and Python share the table
    assert "sum = 524288" in out  # memory C wrote, read in Python
    assert "2 allocations, 1.25 MiB in total" in out  # the adaptor counted both languages
    assert "0 bytes still in use" in out
    assert "tether objects left alive: 0" in out


@pytest.mark.skipif(shutil.which("c++") is None, reason="the example compiles a C++ extension with c++")
def test_swap_while_allocating():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "swap_while_allocating.py"), "--iterations", "5000"],
                          capture_output=True, text=True, timeout=300, cwd=str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "20000 allocations by 4 C++ threads" in out
    assert "bytes still in use: 0" in out
    assert "all frees returned to their origin" in out
    assert "tether objects left alive: 0" in out
    # The C++ threads really saw the swaps: more than one resource served them.
    seen = int(out.split(" different resources")[0].rsplit(" ", 1)[1])
    assert seen > 1, out


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("c++") is None, reason="the example compiles a C++ extension with c++")
def test_swap_while_allocating_on_device_0():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "swap_while_allocating.py"), "--device", "0",
                           "--iterations", "5000"], capture_output=True, text=True, timeout=300, cwd=str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all frees returned to their origin" in proc.stdout
    assert "tether objects left alive: 0" in proc.stdout


@pytest.mark.gpu
def test_frameworks_share_a_pool():
    for lib in ("torch", "cupy", "numba"):
        pytest.importorskip(lib, reason=f"{lib} is not installed")
    proc = subprocess.run([sys.executable, str(EXAMPLES / "frameworks_share_a_pool.py")], capture_output=True,
                          text=True, timeout=600, cwd=str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all frees returned to their origin" in proc.stdout
    for lib in ("torch", "cupy", "numba"):
        assert f"  {lib:6} " in proc.stdout  # each library's share was printed


def test_spilling():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "spilling.py")], capture_output=True, text=True,
                          timeout=120, cwd=str(EXAMPLES))
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stdout + proc.stderr
    out = proc.stdout
    assert "spilled block0 (1 MiB) to make room for 1 MiB" in out
    assert "4 blocks on the device, 2 spilled, 4 MiB in use" in out
    assert "10 events logged, 2 out-of-memory before spilling" in out
    assert "bytes still in use: 0" in out


def test_record_and_replay(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLES / "record_and_replay.py"), "--out", str(tmp_path),
                           "--allocations", "500"], capture_output=True, text=True, timeout=300, cwd=str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = int(proc.stdout.split("recorded ")[1].split()[0])
    assert recorded > 1000  # 2 threads x 500 steps, then the frees of what was left
    assert f"{recorded} operations, 2 thread(s)" in proc.stdout  # every event replayed
    assert "pool(host)\n  time" in proc.stdout and "host\n  time" in proc.stdout
    assert "FAILED" not in proc.stdout


@pytest.mark.gpu
def test_record_and_replay_on_device_0(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLES / "record_and_replay.py"), "--device", "0", "--out",
                           str(tmp_path), "--allocations", "500"], capture_output=True, text=True, timeout=300,
                          cwd=str(EXAMPLES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pool(cuda(device=0))\n  time" in proc.stdout
    assert "2 stream(s)" in proc.stdout or "3 stream(s)" in proc.stdout
