"""``-ltether`` works for extension authors against the installed package.

The wheel holds one real library, ``libtether.so.N`` (wheels cannot hold
symlinks, and a second copy would give a process a second current-resource
table). ``libtether.so`` next to it is a GNU ld linker script naming that file,
so ``-L<dir> -ltether`` links, the program records the SONAME, and at run time
it uses the very library (and table) the Python package loaded.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tether

LIB_DIR = Path(tether.get_library()).parent
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc)")

PROGRAM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <tether/tether.h>
int main(void) {
  Dl_info info;
  if (!dladdr((void*)&tether_abi_version, &info) || !info.dli_fname) return 3;
  printf("%u\n%s\n", (unsigned)tether_abi_version(), info.dli_fname);
  return tether_abi_version() == TETHER_ABI_VERSION ? 0 : 1;
}
"""

SHARED = r"""
#include <tether/tether.h>
/* The name of the current host resource, as C sees the table. */
const char* consumer_current_host_name(void) {
  static char name[32];
  tether_resource_t* r = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK) return "error";
  const char* n = tether_resource_get_name(r);
  size_t i = 0;
  for (; n[i] && i + 1 < sizeof name; ++i) name[i] = n[i];
  name[i] = '\0';
  tether_resource_release(r);
  return name;
}
"""


def _link(tmp_path: Path, source: str, name: str, *extra: str) -> Path:
    """Compile and link the way the docs tell extension authors to: -I, -L, -ltether."""
    assert CC is not None
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / name
    cmd = [CC, "-std=c11", "-Wall", "-Wextra", "-Werror", *extra, f"-I{tether.get_include()}", str(src),
           "-o", str(out), f"-L{LIB_DIR}", "-ltether", f"-Wl,-rpath,{LIB_DIR}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    return out


def _needed(path: Path) -> list[str]:
    """DT_NEEDED entries of an ELF file (readelf from binutils, present with any cc)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("needs readelf to read DT_NEEDED")
    out = subprocess.run([readelf, "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def test_libtether_so_is_a_linker_script_naming_the_one_library() -> None:
    real = Path(tether.get_library())
    assert real.name == f"libtether.so.{tether.abi_version()}"
    script = LIB_DIR / "libtether.so"
    assert script.is_file() and not script.is_symlink()
    data = script.read_bytes()
    assert not data.startswith(b"\x7fELF"), "libtether.so must be a linker script, not a second copy"
    assert f"INPUT({real.name})" in data.decode("ascii")
    elves = [p.name for p in LIB_DIR.glob("libtether*") if p.read_bytes()[:4] == b"\x7fELF"]
    assert elves == [real.name]


@needs_cc
def test_program_linked_with_dash_ltether_runs_on_the_package_library(tmp_path: Path) -> None:
    exe = _link(tmp_path, PROGRAM, "consumer")
    assert f"libtether.so.{tether.abi_version()}" in _needed(exe)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run([str(exe)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    abi, path = proc.stdout.split("\n")[:2]
    assert int(abi) == tether.abi_version()
    assert os.path.realpath(path) == os.path.realpath(tether.get_library())


@needs_cc
def test_library_linked_with_dash_ltether_shares_the_package_table(tmp_path: Path) -> None:
    so = _link(tmp_path, SHARED, "libconsumer.so", "-shared", "-fPIC")
    consumer = ctypes.CDLL(str(so))
    consumer.consumer_current_host_name.restype = ctypes.c_char_p
    consumer.consumer_current_host_name.argtypes = []
    name_before = consumer.consumer_current_host_name()
    before = tether.get_current_resource(tether.HOST)
    pool = tether.PoolResource(tether.HostResource(), initial_size="1 MiB")
    try:
        tether.set_current_resource(pool, tether.HOST).close()
        assert consumer.consumer_current_host_name() == b"pool"  # C sees what Python installed
    finally:
        tether.set_current_resource(before, tether.HOST).close()
        before.close()
        pool.close()
    assert name_before != b"pool"
    assert consumer.consumer_current_host_name() == name_before  # and sees it put back
