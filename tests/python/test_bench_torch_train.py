"""benchmarks/gpu/bench_torch_train.py runs without a GPU: --help, and --selftest (the
orchestration on synthetic results: round order, medians, ratios, the loss comparison, the
table; plus two CPU training steps, repeated bit for bit, where PyTorch is installed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "bench_torch_train.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_help():
    proc = run("--help")
    assert proc.returncode == 0 and "--repeats" in proc.stdout, proc.stdout + proc.stderr


def test_selftest():
    proc = run("--selftest")
    assert proc.returncode == 0 and "selftest: orchestration ok" in proc.stdout, proc.stdout + proc.stderr
    assert "losses identical" in proc.stdout
