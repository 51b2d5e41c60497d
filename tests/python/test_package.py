"""The installed package: versions, the files it ships, paths for extension
authors, and that importing it changes nothing in the process."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import tether
from tether._ffi import check_versions, ffi, lib

PKG = Path(tether.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]


def header_version() -> str:
    text = (REPO / "capi" / "include" / "tether" / "version.h").read_text()
    parts = [re.search(rf"#define TETHER_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def test_versions_agree():
    assert tether.__version__ == header_version()
    assert ffi.string(lib.tether_version_string()).decode() == tether.__version__
    assert tether.abi_version() == lib.TETHER_ABI_VERSION
    from importlib.metadata import version
    assert version("tether") == tether.__version__


def test_package_ships_library_headers_and_cmake_config():
    lib_dir = PKG / "lib"
    assert (lib_dir / f"libtether.so.{tether.abi_version()}").is_file()
    headers = {p.name for p in (PKG / "include" / "tether").glob("*.h")}
    source_headers = {p.name for p in (REPO / "capi" / "include" / "tether").glob("*.h")}
    assert source_headers <= headers and "tether.h" in headers
    assert (Path(tether.get_cmake_dir()) / "tetherConfig.cmake").is_file()
    assert (Path(tether.get_include()) / "tether" / "tether.h").is_file()
    # Build inputs stay out of the package.
    assert not (PKG / "cdefgen.py").exists() and not (PKG / "ffibuild.py").exists()


def test_package_ships_exactly_one_libtether():
    # A wheel stores symlinks as copies; a second copy, loaded by its path,
    # would be a second library with a second current-resource table.
    # (libtether.so beside it is a linker script for -ltether: text, not ELF.)
    copies = sorted(p.name for p in PKG.rglob("libtether*") if p.read_bytes()[:4] == b"\x7fELF")
    assert copies == [f"libtether.so.{tether.abi_version()}"]


def test_get_library_is_the_loaded_file():
    path = Path(tether.get_library())
    assert path.is_file() and path.parent == PKG / "lib"
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if "libtether" in line}
    assert {os.path.realpath(p) for p in loaded} == {os.path.realpath(path)}


@pytest.mark.parametrize("kwargs, match", [
    (dict(compiled_version="0.2.0"), "compiled extension"),
    (dict(runtime_abi=99), "ABI version 99"),
    (dict(runtime_number=1), "older than the headers"),
])
def test_mismatched_library_is_refused(kwargs, match):
    args = dict(package_version="1.2.3", compiled_version="1.2.3", compiled_abi=1, runtime_abi=1,
                compiled_number=10203, runtime_number=10203)
    check_versions(**args)  # consistent: no error
    args.update(kwargs)
    with pytest.raises(ImportError, match=match):
        check_versions(**args)


def test_newer_compatible_library_is_accepted():
    check_versions("1.2.3", "1.2.3", 1, 1, 10203, 10400)


def test_import_changes_nothing(run_python):
    code = ("import tether\n"
            "assert tether.debug.live_objects() == 0, tether.debug.live_objects()\n"
            "assert not tether.is_current_resource_locked(tether.HOST)\n"
            "assert tether.debug.live_objects() == 0\n"
            "print('ok')\n")
    proc = run_python(code)
    assert proc.returncode == 0 and proc.stdout == "ok\n" and proc.stderr == "", proc.stderr


def test_public_names():
    for name in tether.__all__:
        assert hasattr(tether, name), name
    assert tether.HOST == lib.TETHER_DEVICE_HOST == -1
    assert tether.CURRENT_DEVICE == lib.TETHER_DEVICE_CURRENT
