"""The CMake package the wheel ships works from where pip put it:
find_package(tether) with tether_DIR = tether.get_cmake_dir() builds and runs a C program."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import tether

CMAKE = shutil.which("cmake")

PROJECT = """
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(tether REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE tether::tether)
"""

MAIN = """
#include <stdio.h>
#include <tether/tether.h>
int main(void) {
  tether_resource_t* host = NULL;
  if (tether_abi_version() != TETHER_ABI_VERSION) return 1;
  if (tether_host_resource_create(&host) != TETHER_OK) return 2;
  tether_resource_release(host);
  printf("%s\\n", tether_version_string());
  return 0;
}
"""


@pytest.mark.skipif(CMAKE is None or shutil.which("cc") is None, reason="needs cmake and a C compiler")
def test_find_package_from_the_installed_package(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(PROJECT)
    (tmp_path / "main.c").write_text(MAIN)
    build = tmp_path / "build"
    for cmd in ([CMAKE, "-S", str(tmp_path), "-B", str(build), f"-Dtether_DIR={tether.get_cmake_dir()}"],
                [CMAKE, "--build", str(build)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    exe = next(p for p in build.rglob("consumer") if p.is_file())
    proc = subprocess.run([str(exe)], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout.strip()) == (0, tether.__version__), proc.stderr
