#!/usr/bin/env bash
# The whole GPU run in one command, on a machine with a CUDA driver and device:
#   1. configure + build (Release, tests and benchmarks on)      -> $OUT/build.log
#   2. ctest: everything, the GPU tests (label gpu) included      -> $OUT/ctest.log
#   3. pip install the package, pytest tests/python (GPU too)     -> $OUT/pytest.log
#   4. the GPU benchmarks (C and Python, bench_ipc.py; bench_torch_train.py and the Thrust sort too) -> $OUT/bench.log
#   5. peer: ../shared/bench (copied to .bench), the peers side by side -> $OUT/peer.log, $OUT/peer/
#   6. clients: the peers' own test suites through tether (ci/gpu_clients.sh: RMM's Python tests with
#      tether.rmm as RMM's resource, CuPy test subsets with tether.cupy.enable, each beside a baseline
#      run; test files carried in .clients/, see docs/clients.rst) -> $OUT/clients.log,
#      $OUT/clients-summary.txt, $OUT/clients-logs.tar.gz
# plus $OUT/pytest-junit*.xml (each test's outcome and time), $OUT/env.log (what the machine
# has), $OUT/steps.log (each step's start and outcome as it happens, so a call stopped at the
# device's time limit still tells what finished) and $OUT/summary.log (at the end). The device
# tool brings back at most 8 files, so at the end, if $OUT holds more than TETHER_OUT_MAX_FILES
# (default 8; 0: never), every file is packed into $OUT/logs.tar.gz and only summary.log,
# steps.log and logs.tar.gz stay (`tar -xzf logs.tar.gz` gives the rest back).
# Every step runs even when an earlier one failed, so all logs come back; the
# exit status is non-zero if any step failed. Python's cffi/pycparser come from
# ./.whl (cp312 wheels) when that folder exists and the interpreter lacks them; dask and
# distributed (for the Dask tests) likewise from ./.whl/dask.
#
# usage: ci/gpu.sh            (OUT defaults to ./build-gpu/logs; TETHER_JOBS to nproc;
#        TETHER_PYTEST_ARGS: what pytest runs, default tests/python; TETHER_PYTEST_PART=K/N: the K-th of N
#        parts of tests/python instead; TETHER_PYTEST_MARK: only the tests matching this marker
#        expression (pytest -m), e.g. gpu; TETHER_BENCH_OPS: benchmark size;
#        TETHER_HOST_BENCH_OPS: the host benchmarks' size; with ../shared/bench copied to .bench, the peer
#        harness runs, bounded by TETHER_PEER_SECONDS; with .clients, the clients step (about 6
#        minutes; TETHER_CLIENTS_* as ci/gpu_clients.sh documents); TETHER_TRAIN_ARGS: arguments of
#        bench_torch_train.py; TETHER_GPU_BENCHES: which benchmarks the bench step runs (unset: all, empty: none;
#        gpu_alloc pool_rmm host catalogue replay python ipc hooks thrust train); TETHER_GPU_STEPS: which of "build ctest pytest bench peer clients" to
#        run, default all - e.g. TETHER_GPU_STEPS=peer for the peer table alone,
#        TETHER_GPU_STEPS=clients for the peers' suites alone; the package is always installed, unless
#        TETHER_GPU_REUSE_SITE=1 and an earlier call on the same machine installed it)
#
# Timings (H100, stop 40): build 19 s, ctest 31 + 42 s, pip install 14 s, pytest -m gpu about
# 600 s (742 tests; 583 s in the tests themselves), bench_gpu_alloc 72 s, bench_pool_rmm 200 s,
# bench_hooks.py 108 s, the peer step 141 s. The GPU suite does not fit one 600 s device call
# beside the build, so a session runs it in two calls on the same warm machine, whose parts
# take about 290 s of tests each (ci/pytest_part.py):
#   TETHER_GPU_STEPS="build ctest pytest" TETHER_PYTEST_MARK=gpu TETHER_PYTEST_PART=1/2 ci/gpu.sh
#   TETHER_GPU_STEPS="pytest bench" TETHER_PYTEST_MARK=gpu TETHER_PYTEST_PART=2/2 \
#     TETHER_GPU_REUSE_SITE=1 TETHER_GPU_BENCHES=gpu_alloc ci/gpu.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/build-gpu/logs}
BUILD=${TETHER_GPU_BUILD:-$ROOT/build-gpu/release}
SITE=${TETHER_GPU_SITE:-/tmp/tether-gpu-site}
JOBS=${TETHER_JOBS:-$(nproc)}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$BUILD"
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

STEPS=" ${TETHER_GPU_STEPS:-build ctest pytest bench peer clients} "
want() { [[ $STEPS == *" $1 "* ]]; }

declare -a SUMMARY=()
FAILED=0
: >"$OUT/steps.log"  # step() appends as it goes (see the header)
START=$(date +%s)

# step NAME LOG COMMAND...: run, append output to LOG, record the outcome and the time taken.
step() {
  local name=$1 log=$2 t0 rc
  shift 2
  t0=$(date +%s)
  printf '\n=== %s: %s\n' "$name" "$*" >>"$log"
  printf 'started %s  %s\n' "$(date -u +%H:%M:%S)" "$name" >>"$OUT/steps.log"
  "$@" >>"$log" 2>&1
  rc=$?
  local dt=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then
    SUMMARY+=("ok      ${dt}s  $name")
  else
    SUMMARY+=("FAILED  ${dt}s  $name (exit $rc, see $(basename "$log"))")
    FAILED=1
  fi
  printf '%s\n' "${SUMMARY[${#SUMMARY[@]}-1]}" >>"$OUT/steps.log"
  return $rc
}

# ---- what the machine has ----------------------------------------------------------
{
  echo "date: $(date -u)"
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "nvidia-smi: not available"
  echo "cpus: $(nproc)"
  command -v cmake ninja gcc cc nvcc "$PY" 2>&1
  cmake --version 2>&1 | head -1
  "$PY" --version 2>&1
  "$PY" - <<'EOF' 2>&1
import importlib
for name in ("cffi", "pycparser", "numpy", "pytest", "scikit_build_core", "cupy", "torch", "numba"):
    try:
        m = importlib.import_module(name)
        print(f"{name} {getattr(m, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: not importable ({type(e).__name__}: {e})")
EOF
  ls /usr/include/gtest/gtest.h 2>&1
} >"$OUT/env.log" 2>&1

# ---- Python build/test requirements carried as wheels -------------------------------
if compgen -G "$ROOT/.whl/*.whl" >/dev/null && ! "$PY" -c "import cffi, pycparser" 2>/dev/null; then
  step "install carried wheels (.whl)" "$OUT/env.log" \
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# ---- Dask for tests/python/test_dask.py: dask, distributed and their dependencies carried
# as wheels in .whl/dask (only those the interpreter lacks are installed; see ci/dask_wheels.sh).
if compgen -G "$ROOT/.whl/dask/*.whl" >/dev/null && ! "$PY" -c "import distributed" 2>/dev/null; then
  DASK_SITE=${TETHER_GPU_DASK_SITE:-/tmp/tether-dask-site}
  rm -rf "$DASK_SITE"
  step "install carried Dask wheels (.whl/dask)" "$OUT/env.log" \
    bash "$ROOT/ci/dask_wheels.sh" "$PY" "$ROOT/.whl/dask" "$DASK_SITE" &&
    export PYTHONPATH=$DASK_SITE${PYTHONPATH:+:$PYTHONPATH}
fi

# ---- GoogleTest: the system's, or a libgtest-dev .deb carried in .whl/ or .deb/ -----
GTEST_ARGS=()
if ! [ -f /usr/include/gtest/gtest.h ]; then
  deb=$(compgen -G "$ROOT/.whl/libgtest-dev*.deb" || compgen -G "$ROOT/.deb/libgtest-dev*.deb" || true)
  deb=${deb%%$'\n'*}
  if [ -n "$deb" ]; then
    mkdir -p /tmp/gtest-root && dpkg -x "$deb" /tmp/gtest-root &&
      GTEST_ARGS=(-DCMAKE_PREFIX_PATH=/tmp/gtest-root/usr) &&
      echo "GoogleTest from $deb" >>"$OUT/env.log"
  else
    echo "no GoogleTest on this machine and none carried: the C++ core tests cannot be built" >>"$OUT/env.log"
  fi
fi

# ---- 1. build -------------------------------------------------------------------------
: >"$OUT/build.log"
BUILD_OK=0
if want build || want ctest; then
if step "configure (Release)" "$OUT/build.log" \
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DTETHER_BUILD_TESTS=ON -DTETHER_BUILD_BENCHMARKS=ON -DTETHER_BUILD_EXAMPLES=ON "${GTEST_ARGS[@]}"; then
  step "build" "$OUT/build.log" ninja -C "$BUILD" -j"$JOBS" && BUILD_OK=1
fi
if [ -f "$BUILD/capi/libtether.so" ]; then
  step "libtether links nothing from CUDA" "$OUT/build.log" sh "$ROOT/ci/check_symbols.sh" "$BUILD/capi/libtether.so"
fi
fi

# ---- 2. ctest ---------------------------------------------------------------------------
: >"$OUT/ctest.log"
if ! want ctest; then
  SUMMARY+=("SKIPPED      ctest (not in TETHER_GPU_STEPS)")
elif [ $BUILD_OK = 1 ]; then
  # CPU tests in parallel; GPU tests with a little parallelism (they share the device).
  step "ctest (all but gpu)" "$OUT/ctest.log" \
    ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS" -LE gpu --timeout 600
  step "ctest (label gpu)" "$OUT/ctest.log" \
    ctest --test-dir "$BUILD" --output-on-failure -j4 -L gpu --timeout 600
  {
    grep -E "tests passed|tests failed|\((Failed|SEGFAULT|Timeout|Subprocess aborted|Not Run)\)$" "$OUT/ctest.log"
    echo "ctest: $(grep -c '\*\*\*Skipped' "$OUT/ctest.log") skipped"
  } | sed 's/^/    /' >"$OUT/ctest-summary.tmp" || true
else
  echo "ctest: not run, the build failed" >>"$OUT/ctest.log"
  SUMMARY+=("SKIPPED      ctest (the build failed)")
  FAILED=1
fi

# ---- 3. Python package and pytest ----------------------------------------------------------
: >"$OUT/pytest.log"
# TETHER_GPU_REUSE_SITE=1: a later call on the same warm machine keeps the package an earlier
# call installed (the checkout unchanged), instead of building it again.
if [ "${TETHER_GPU_REUSE_SITE:-0}" = 1 ] && [ -f "$SITE/tether/__init__.py" ]; then
  install_site() { echo "reusing the package installed in $SITE (TETHER_GPU_REUSE_SITE=1)"; }
else
  rm -rf "$SITE"
  install_site() { "$PY" -m pip install --no-build-isolation --no-deps --no-cache-dir --target "$SITE" "$ROOT"; }
fi
if step "pip install . (into $SITE)" "$OUT/pytest.log" install_site; then
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
  # TETHER_PYTEST_PART=K/N: the K-th of N parts of tests/python, of about equal GPU time by the
  # per-file times in ci/gpu_pytest_seconds.txt (ci/pytest_part.py): the whole suite no longer fits
  # one 600 s device call with the install, so one call runs part 1/2 and the next 2/2
  # (TETHER_GPU_REUSE_SITE=1).
  PYTEST_NAME="pytest tests/python${TETHER_PYTEST_PART:+, part $TETHER_PYTEST_PART}"
  # TETHER_PYTEST_MARK=EXPR: only the tests that match (-m EXPR), whole suite or part alike.
  PYTEST_MARK=()
  if [ -n "${TETHER_PYTEST_MARK:-}" ]; then
    PYTEST_MARK=(-m "$TETHER_PYTEST_MARK")
    PYTEST_NAME="$PYTEST_NAME, -m $TETHER_PYTEST_MARK"
  fi
  # Every test's outcome and time also go to $OUT/pytest-junit[-K-of-N].xml (which tests are slow,
  # how to balance the parts).
  JUNIT=$OUT/pytest-junit${TETHER_PYTEST_PART:+-${TETHER_PYTEST_PART/\//-of-}}.xml
  # The step: the part's files (a part that names none fails the step, rather than run the whole
  # suite), then pytest on them.
  run_pytest() {
    local what=${TETHER_PYTEST_ARGS:-"$ROOT/tests/python"}
    if [ -n "${TETHER_PYTEST_PART:-}" ]; then
      what=$("$PY" "$ROOT/ci/pytest_part.py" "${TETHER_PYTEST_PART%/*}" "${TETHER_PYTEST_PART#*/}") || return 2
      echo "part $TETHER_PYTEST_PART: $(echo $what | wc -w) files"
    fi
    "$PY" -m pytest $what "${PYTEST_MARK[@]}" -q -ra -p no:cacheprovider --durations=15 --junitxml="$JUNIT"
  }
  want pytest && step "$PYTEST_NAME" "$OUT/pytest.log" run_pytest
  PY_OK=1
else
  PY_OK=0
fi

# RMM's C++ API takes a tether resource (needs the librmm wheel unpacked in /tmp/site).
if ! want pytest; then
  :
elif [ "$PY_OK" = 1 ] && [ -d /tmp/site/librmm/include ]; then
  step "RMM C++ interop (examples/cpp_rmm)" "$OUT/pytest.log" \
    env SITE=/tmp/site TETHER_SITE="$SITE" OUT_BIN=/tmp/rmm_interop bash "$ROOT/examples/cpp_rmm/build.sh"
else
  SUMMARY+=("SKIPPED      RMM C++ interop (no librmm wheel in /tmp/site)")
fi

# ---- 4. benchmarks ---------------------------------------------------------------------------
# TETHER_GPU_BENCHES picks which run (unset: all; empty: none): gpu_alloc pool_rmm host catalogue
# replay python ipc hooks thrust train.
BENCHES=" ${TETHER_GPU_BENCHES-gpu_alloc pool_rmm host catalogue replay python ipc hooks thrust train} "
bench() { [[ $BENCHES == *" $1 "* ]]; }
: >"$OUT/bench.log"
if want bench; then
if ! bench gpu_alloc; then
  :
elif [ -x "$BUILD/benchmarks/gpu/bench_gpu_alloc" ]; then
  step "bench_gpu_alloc (C ABI vs raw driver)" "$OUT/bench.log" \
    timeout 300 "$BUILD/benchmarks/gpu/bench_gpu_alloc" "${TETHER_BENCH_OPS:-20000}" 5 8
else
  SUMMARY+=("SKIPPED      bench_gpu_alloc (not built)")
fi
# RMM's pool and arena beside tether's pool: the live sweep and the footprint (issue 22).
if ! bench pool_rmm; then
  :
elif [ "$PY_OK" = 1 ] && [ -d /tmp/site/librmm/include ]; then
  step "bench_pool_rmm (RMM pool/arena vs tether pool: live sweep, footprint over 8 seeds)" "$OUT/bench.log" \
    env SITE=/tmp/site TETHER_SITE="$SITE" SRC="$ROOT/benchmarks/gpu/pool_rmm.cpp" CXXFLAGS_EXTRA="-I$ROOT/benchmarks/c" \
    OUT_BIN=/tmp/bench_pool_rmm timeout 240 bash "$ROOT/examples/cpp_rmm/build.sh" 5
else
  SUMMARY+=("SKIPPED      bench_pool_rmm (no librmm wheel in /tmp/site)")
fi
# The host pool on this (quiet, many-core) machine: vs glibc, the live sweep, footprint, threads.
for b in bench_pool_vs_malloc bench_pool_vs_malloc_core; do
  if bench host && [ -x "$BUILD/benchmarks/c/$b" ]; then
    step "$b (host pool vs glibc)" "$OUT/bench.log" timeout 240 "$BUILD/benchmarks/c/$b" "${TETHER_HOST_BENCH_OPS:-1000000}" 5
  fi
done
if bench catalogue && [ -x "$BUILD/benchmarks/gpu/bench_catalogue_alloc" ]; then
  step "bench_catalogue_alloc (arena, binning, pool; 1/4/8 threads)" "$OUT/bench.log" \
    timeout 240 "$BUILD/benchmarks/gpu/bench_catalogue_alloc" "${TETHER_BENCH_OPS:-20000}" 5
fi
if [ "$PY_OK" = 1 ]; then
  # What the package says about this machine, and a log recorded on the GPU replayed with a plot.
  step "tether info" "$OUT/env.log" "$PY" -m tether info
  if bench replay; then
    step "record_and_replay.py --device 0 (tether replay --plot)" "$OUT/bench.log" \
      "$PY" "$ROOT/examples/python/record_and_replay.py" --device 0 --out "$OUT"
    rm -f "$OUT/log.csv"
  fi
  bench python && step "bench_python.py (tether vs CuPy, PyTorch)" "$OUT/bench.log" \
    timeout 240 "$PY" "$ROOT/benchmarks/gpu/bench_python.py" "${TETHER_BENCH_OPS:-20000}" 5
  bench ipc && step "bench_ipc.py (IPC round trip: pool(cuda), async posix_fd)" "$OUT/bench.log" \
    timeout 240 "$PY" "$ROOT/benchmarks/gpu/bench_ipc.py" 200
  bench hooks && step "bench_hooks.py (torch/cupy hooks: tether vs own allocator vs RMM's hooks)" "$OUT/bench.log" \
    timeout 420 "$PY" "$ROOT/benchmarks/gpu/bench_hooks.py" "${TETHER_BENCH_OPS:-20000}" 5 --rounds 3
  # Thrust and CUB through tether::thrust_allocator: 10M keys sorted and checked; the sort's
  # time vs Thrust's default allocator and RMM's thrust_allocator (librmm wheel in /tmp/site).
  bench thrust && step "thrust_sort (examples/cpp_thrust: Thrust/CUB memory from tether vs default vs RMM)" "$OUT/bench.log" \
    env SITE=/tmp/site TETHER_SITE="$SITE" ARCH=sm_90 OUT_BIN=/tmp/thrust_sort timeout 240 \
    bash "$ROOT/examples/cpp_thrust/build.sh" 10000000 15
  # shellcheck disable=SC2086
  bench train && step "bench_torch_train.py (transformer, a new sequence length each step: caching, cudaMallocAsync, tether, RMM)" \
    "$OUT/bench.log" timeout 240 "$PY" "$ROOT/benchmarks/gpu/bench_torch_train.py" ${TETHER_TRAIN_ARGS:-}
else
  SUMMARY+=("SKIPPED      bench_python.py, bench_hooks.py (the package did not install)")
fi
fi

# The peers side by side: ../shared/bench copied to .bench, its wheels in .whl, run as its README
# says (run_all.sh: the C++ table at 1/4/8 threads with 8 GiB pools, the Python table, and
# summary.txt, the table a note quotes) with the package installed above as the tether under test.
# Usually 3 - 4 minutes; bounded by TETHER_PEER_SECONDS (540). Its files go to $OUT/peer/.
if want peer && [ -d "$ROOT/.bench" ] && [ "$PY_OK" = 1 ]; then
  step "peer bench (.bench/run_all.sh: cudaMalloc(Async), CCCL, RMM pool/arena/binning/async, CuPy, PyTorch, cuda.core vs tether)" \
    "$OUT/peer.log" env OUT="$OUT/peer" SITE=/tmp/site TETHER_SITE="$SITE" WHL="$ROOT/.whl" PYTHON="$PY" \
    timeout "${TETHER_PEER_SECONDS:-540}" bash "$ROOT/.bench/run_all.sh"
fi

# The peers' own test suites through tether, each beside a baseline run (.clients carried).
if ! want clients; then
  :
elif [ ! -d "$ROOT/.clients" ]; then
  SUMMARY+=("SKIPPED      clients (no .clients folder with the peers' test files)")
elif [ "$PY_OK" = 1 ]; then
  step "clients (RMM's and CuPy's own tests: baseline vs through tether)" "$OUT/clients.log" \
    env OUT="$OUT" PYTHON="$PY" timeout 480 bash "$ROOT/ci/gpu_clients.sh"
else
  SUMMARY+=("SKIPPED      clients (the package did not install)")
fi

# ---- summary ------------------------------------------------------------------------------------
{
  echo "ci/gpu.sh: $(($(date +%s) - START))s on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  printf '  %s\n' "${SUMMARY[@]}"
  [ -f "$OUT/ctest-summary.tmp" ] && cat "$OUT/ctest-summary.tmp"
  grep -E "^[0-9]+ (passed|failed)|passed|failed" "$OUT/pytest.log" | tail -1 | sed 's/^/    pytest: /'
  grep -A6 "^targets:" "$OUT/bench.log" | sed 's/^/    /'
  grep -A4 "^sort of .* keys, median" "$OUT/bench.log" | sed 's/^/    /'
  grep -E "target \(issue 1[3]\)|target \(issue 2[02]\)|target <=|^ratio |median .*, max .* over|pool over host memory" "$OUT/bench.log" | sed 's/^/    /'
  [ -f "$OUT/peer/summary.txt" ] && sed 's/^/    peer: /' "$OUT/peer/summary.txt"
  [ -f "$OUT/clients-summary.txt" ] &&
    grep -E "^(rmm|cupy) +(baseline|tether) |differ baseline|^verdict" "$OUT/clients-summary.txt" | sed 's/^/    clients: /'
  echo "logs: $OUT"
  [ $FAILED = 0 ] && echo "result: all steps passed" || echo "result: FAILED"
} | tee "$OUT/summary.log"
rm -f "$OUT/ctest-summary.tmp"

# Past TETHER_OUT_MAX_FILES files, pack $OUT into logs.tar.gz (why: see the header).
MAX_FILES=${TETHER_OUT_MAX_FILES:-8}
n_files=$(find "$OUT" -type f | wc -l)
if [ "$MAX_FILES" -gt 0 ] && [ "$n_files" -gt "$MAX_FILES" ]; then
  pack=$(mktemp /tmp/tether-gpu-logs.XXXXXX)  # outside $OUT, which it packs
  if tar -C "$OUT" --exclude=./logs.tar.gz -czf "$pack" . && mv "$pack" "$OUT/logs.tar.gz"; then
    find "$OUT" -mindepth 1 -maxdepth 1 ! -name summary.log ! -name steps.log ! -name logs.tar.gz -exec rm -rf {} +
    echo "packed: all $n_files files of $OUT in logs.tar.gz (more than $MAX_FILES; TETHER_OUT_MAX_FILES)" |
      tee -a "$OUT/summary.log"
  else
    rm -f "$pack"
    echo "packing $n_files files into logs.tar.gz failed: they stay as they are" | tee -a "$OUT/summary.log"
  fi
fi
exit $FAILED
