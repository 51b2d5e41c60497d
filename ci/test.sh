#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, the CMake build with the C++ core,
# C ABI, header, symbol, install and example tests (ctest), the same C/C++ tests
# under AddressSanitizer+UBSan and under ThreadSanitizer, a bounded libFuzzer run
# over the C ABI, the ABI check against abi/libtether.abi, the Python package and
# its tests (pytest), the Rust frontend (ci/rust.sh), the docs (Sphinx, warnings as errors; then checked in headless
# Chromium, ci/docs_browser.sh), and the wheel (ci/wheel.sh: cp310-abi3, auditwheel,
# abi3audit, tests/python on another CPython). The fault-injection
# sweep (tests/fault) runs inside the Release ctest.
# GPU tests skip with a reason when there is no device (ci/gpu.sh runs them on one).
# First of all, ci/gen_kinds.py --check: the files derived from capi/kinds.json are current.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
jobs=${TETHER_JOBS:-$(nproc)}
step() { printf '\n=== %s\n' "$*"; }

# Cheap, and first: the files generated from the registry of kinds match it.
step "registry of kinds (ci/gen_kinds.py --check)"
python ci/gen_kinds.py --check

step "build (Release) and ctest"
cmake -G Ninja -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release -j"$jobs"
ctest --test-dir build/release --output-on-failure -j"$jobs"

for san in address,undefined thread; do
  dir=build/san-${san%%,*}
  step "ctest under -fsanitize=$san (core, capi)"
  cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTETHER_SANITIZE="$san" \
    -DTETHER_BUILD_EXAMPLES=OFF -DTETHER_BUILD_BENCHMARKS=OFF >/dev/null
  ninja -C "$dir" -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    TSAN_OPTIONS=halt_on_error=1:allocator_may_return_null=1 \
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" -L 'core|capi'
done

# Time-bounded: the fuzzer builds its own clang+ASan tree, then runs TETHER_FUZZ_SECONDS (120 s).
step "fuzz: libFuzzer over the C ABI (${TETHER_FUZZ_SECONDS:-120} s)"
ci/fuzz.sh
step "ABI check (abidiff against abi/libtether.abi)"
ci/abi.sh

step "Python package (pip install .) and pytest"
python -m pip install -q --no-build-isolation .
python -m pytest tests/python -q -ra
step "mypy --strict on python/tether (ci/typecheck.sh)"
ci/typecheck.sh

step "Rust frontend (cargo test, bindings check, rustdoc, clippy, Rust<->C++ and Rust<->Python)"
ci/rust.sh

if [ -x ci/docs.sh ]; then
  step "docs (sphinx -W)"
  ci/docs.sh
  step "docs in headless Chromium (every page reachable, no code block cut off)"
  ci/docs_browser.sh
fi
step "wheel: cp310-abi3, auditwheel repair + show, abi3audit, tests on another CPython"
ci/wheel.sh
step "all tests passed"
