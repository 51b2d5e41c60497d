"""tests/clients (the peers' test-suite runner, ci/gpu_clients.sh): the outcome recorder
and the summary, on a small suite run twice in fresh pytest processes - no GPU, no peer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLIENTS = Path(__file__).resolve().parents[1] / "clients"

SUITE = '''
import os, pytest
FLIP = os.environ.get("FLIP") == "1"
def test_pass(): pass
def test_flips(): assert not FLIP, "flipped"
def test_fail(): assert False
@pytest.mark.skip(reason="no")
def test_skip(): pass
@pytest.mark.xfail(strict=True)
def test_xfail(): assert False
@pytest.fixture
def broken(): raise RuntimeError("setup")
def test_error(broken): pass
@pytest.mark.parametrize("n", [1, 2])
def test_param(n): pass
'''


def run_suite(tmp_path: Path, name: str, flip: bool) -> None:
    (tmp_path / "suite").mkdir(exist_ok=True)
    (tmp_path / "suite" / "test_s.py").write_text(SUITE)
    env = dict(os.environ, PYTHONPATH=str(CLIENTS), TETHER_CLIENTS_RECORD=str(tmp_path / f"s-{name}.jsonl"),
               FLIP="1" if flip else "0")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "clients_record", "-p", "no:cacheprovider",
                           str(tmp_path / "suite")], env=env, capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (tmp_path / f"s-{name}.meta").write_text("3 1\n")


def test_record_and_summarize(tmp_path):
    run_suite(tmp_path, "baseline", flip=False)
    run_suite(tmp_path, "tether", flip=True)
    proc = subprocess.run([sys.executable, str(CLIENTS / "summarize.py"), str(tmp_path), "s"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr     # a passing test fails, nothing routed
    lines = proc.stdout.splitlines()
    # passed failed skipped error xfailed xpassed total
    base = next(ln for ln in lines if ln.startswith("s      baseline")).split()
    teth = next(ln for ln in lines if ln.startswith("s      tether")).split()
    assert base[2:9] == ["4", "1", "1", "1", "1", "0", "8"], lines
    assert teth[2:9] == ["3", "2", "1", "1", "1", "0", "8"], lines
    assert "s: 1 test(s) differ baseline -> tether (of 8 run in both)" in proc.stdout, proc.stdout
    assert "test_s.py::test_flips: passed -> failed" in proc.stdout and "flipped" in proc.stdout, proc.stdout
    assert "no tether statistics written" in proc.stdout
    verdict = lines[-1]
    assert verdict.startswith("verdict: FAILED") and "1 test(s) that pass in the baseline fail" in verdict, verdict
    assert "allocated nothing through tether" in verdict, verdict
