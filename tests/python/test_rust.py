"""The Rust frontend (rust/) shares one table with Python in one process.

Builds the Rust cdylib rust/xlang/python with cargo, letting tether-sys find
libtether through this Python package (tether.get_library(), the third place
its build script looks), and runs rust/xlang/python/scenario.py in a fresh
interpreter: Rust installs a pool that Python sees and allocates from, Python
frees a Rust-made buffer, Rust sees what Python installs, and all 120 orders
of dropping what the two languages hold leave the census where it began.
Skips with a reason where cargo is not installed; ci/rust.sh (called by
ci/test.sh) makes sure it is, and runs this test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tether

ROOT = Path(__file__).resolve().parents[2]
RUST = ROOT / "rust"


def _cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    rustup = Path.home() / ".cargo" / "bin" / "cargo"
    return str(rustup) if rustup.exists() else None


@pytest.fixture(scope="module")
def xlang_cdylib() -> Path:
    cargo = _cargo()
    if cargo is None:
        pytest.skip("cargo is not installed (ci/rust.sh installs Debian's cargo and runs this test)")
    if not (RUST / "Cargo.toml").is_file():
        pytest.skip("no rust/ workspace next to the tests (an installed-package test run)")
    target = RUST / "target" / "xlang-python"
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_LIB_DIR", "TETHER_INCLUDE_DIR")}
    env["TETHER_PYTHON"] = sys.executable
    env["PKG_CONFIG"] = "false"  # a tether.pc elsewhere on the machine must not win over this package
    env["CARGO_TARGET_DIR"] = str(target)
    proc = subprocess.run([cargo, "build", "--offline", "--quiet", "-p", "tether-xlang-python"],
                          cwd=RUST, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"cargo build failed:\n{proc.stdout}{proc.stderr}"
    lib = target / "debug" / "libtether_xlang_python.so"
    assert lib.is_file(), lib
    return lib


def test_cdylib_links_this_packages_library(xlang_cdylib: Path) -> None:
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("no ldd to read the cdylib's dependencies")
    out = subprocess.run([ldd, str(xlang_cdylib)], capture_output=True, text=True).stdout
    line = next((ln for ln in out.splitlines() if "libtether.so" in ln), "")
    assert "=>" in line, out
    resolved = Path(line.split("=>")[1].split("(")[0].strip())
    assert resolved.resolve() == Path(tether.get_library()).resolve(), line


def test_rust_and_python_share_one_table_in_every_release_order(xlang_cdylib: Path) -> None:
    scenario = RUST / "xlang" / "python" / "scenario.py"
    proc = subprocess.run([sys.executable, str(scenario), str(xlang_cdylib)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "one table, 120 release orders" in proc.stdout, proc.stdout
