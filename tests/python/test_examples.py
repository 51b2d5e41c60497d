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
