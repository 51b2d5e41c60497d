#!/usr/bin/env bash
# The peers' own test suites as clients of tether (issue #20 section 3), on a GPU machine:
# RMM's Python tests with tether.rmm.memory_resource as RMM's current device resource, and
# subsets of CuPy's tests with tether.cupy.enable, each run twice - baseline (the library's own
# allocator), then through tether - and compared test by test.
#
# The test files are the peers', never committed: carried in .clients/rmm_tests (RMM's
# python/rmm/rmm/tests subset, its conftest.py, test_helpers.py and pytest config) and
# .clients/cupy_tests (CuPy's tests/ subset with its conftest.py and pyproject.toml); see
# docs/clients.rst for how they are fetched. The plugins that route the allocations and record
# the outcomes are ours, in tests/clients (loaded with -p). Every pytest run is bounded
# (timeout, SIGINT first so pytest still writes what it has); the whole script fits in about 6
# minutes on an H200 with the defaults.
#
# Writes $OUT/clients-summary.txt (per suite and mode: passed/failed/skipped/errors/xfailed/
# xpassed, the routing proof from the statistics adaptor, and every test whose outcome differs)
# and $OUT/clients-logs.tar.gz (per run: the pytest log, the junit XML, the outcome lines).
# Exit status: non-zero when a run could not start, when a test that passes in the baseline
# fails or errors through tether, or when a suite's tether run allocated nothing through tether.
#
# usage: ci/gpu_clients.sh   (with tether importable, e.g. PYTHONPATH=$SITE as ci/gpu.sh sets it)
#   PYTHON (python3); OUT (./build-gpu/logs); TETHER_CLIENTS_DIR (./.clients);
#   TETHER_CLIENTS_SUITES ("rmm cupy"); TETHER_CLIENTS_WORKERS (pytest-xdist workers, 8; 0: none);
#   TETHER_CLIENTS_RMM_SECONDS (50) / TETHER_CLIENTS_CUPY_SECONDS (130): the bound of one run;
#   TETHER_CLIENTS_RMM_TESTS / TETHER_CLIENTS_CUPY_TESTS: the test paths (defaults below);
#   TETHER_CLIENTS_CUPY_SUBSAMPLE (1: CuPy's own CUPY_TEST_RANDOM_SUBSAMPLE with a fixed seed, so
#   both runs pick the same tests; 0: every parametrization).
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
OUT=${OUT:-$ROOT/build-gpu/logs}
CLIENTS=${TETHER_CLIENTS_DIR:-$ROOT/.clients}
WORK=${TETHER_CLIENTS_WORK:-/tmp/tether-clients}
SUITES=${TETHER_CLIENTS_SUITES:-rmm cupy}
WORKERS=${TETHER_CLIENTS_WORKERS:-8}
RMM_TESTS=${TETHER_CLIENTS_RMM_TESTS:-test_device_buffer.py test_cupy_integration.py test_rmm_pytorch.py test_allocations.py test_stream.py test_statistics.py test_lifecycle.py}
CUPY_TESTS=${TETHER_CLIENTS_CUPY_TESTS:-tests/cupy_tests/core_tests/test_ndarray.py tests/cupy_tests/core_tests/test_ndarray_copy_and_view.py tests/cupy_tests/core_tests/test_ndarray_elementwise_op.py tests/cupy_tests/core_tests/test_ndarray_reduction.py tests/cupy_tests/core_tests/test_ndarray_indexing.py tests/cupy_tests/core_tests/test_ndarray_owndata.py tests/cupy_tests/core_tests/test_ndarray_cuda_array_interface.py tests/cupy_tests/manipulation_tests tests/cupy_tests/math_tests/test_arithmetic.py tests/cupy_tests/sorting_tests tests/cupy_tests/linalg_tests/test_product.py}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export CUPY_CACHE_DIR=$WORK/cupy-kernel-cache   # the baseline compiles, the tether run reuses
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
T0=$(date +%s)

if ! "$PY" -c "import tether" 2>/dev/null; then
  echo "gpu_clients: tether is not importable (install the package first)"; exit 1
fi
XDIST=()
if [ "$WORKERS" != 0 ] && "$PY" -c "import xdist" 2>/dev/null; then
  XDIST=(-n "$WORKERS")
fi
echo "gpu_clients: suites '$SUITES' from $CLIENTS, xdist '${XDIST[*]:-none}'"
for s in $CLIENTS/*/SOURCE.txt; do [ -f "$s" ] && echo "  $(basename "$(dirname "$s")"): $(cat "$s")"; done

# run SUITE MODE DIR SECONDS PLUGIN [ARGS...]: one bounded pytest run in DIR, outcomes to $WORK.
run() {
  local suite=$1 mode=$2 dir=$3 seconds=$4 plugin=$5 t0 rc
  shift 5
  # no:benchmark: pytest-benchmark warns under xdist, and RMM's pytest settings make warnings errors
  local plugins=(-p no:benchmark -p clients_record -p clients_env)
  [ -n "$plugin" ] && plugins+=(-p "$plugin")
  t0=$(date +%s)
  echo "--- $suite $mode: pytest ${plugins[*]} ${XDIST[*]} (at most ${seconds}s)"
  (cd "$dir" && env PYTHONPATH="$ROOT/tests/clients${PYTHONPATH:+:$PYTHONPATH}" \
    TETHER_CLIENTS_RECORD="$WORK/$suite-$mode.jsonl" TETHER_CLIENTS_STATS_DIR="$WORK/$suite-$mode-stats" \
    timeout -s INT -k 30 "$seconds" "$PY" -m pytest -q -p no:cacheprovider "${plugins[@]}" "${XDIST[@]}" \
    -rfE --junitxml="$WORK/$suite-$mode.xml" "$@") >"$WORK/$suite-$mode.log" 2>&1
  rc=$?
  echo "$(($(date +%s) - t0)) $rc" >"$WORK/$suite-$mode.meta"
  # the short summary (failures, errors) and pytest's last line, with the plugin's routing line
  grep -E "^(FAILED|ERROR) |^tether .* plugin: |^=+ .*(passed|failed|error|skipped|no tests ran).* =+$" \
    "$WORK/$suite-$mode.log" | tail -60 | sed 's/^/    /'
  echo "    ($suite $mode: exit $rc after $(($(date +%s) - t0))s; log $suite-$mode.log)"
}

ran=()
for suite in $SUITES; do
  case $suite in
    rmm)
      if [ ! -d "$CLIENTS/rmm_tests" ]; then echo "gpu_clients: no $CLIENTS/rmm_tests; rmm skipped"; continue; fi
      if ! "$PY" -c "import rmm, tether.rmm" 2>"$WORK/rmm-import.log"; then
        echo "gpu_clients: rmm not importable ($(tail -1 "$WORK/rmm-import.log")); rmm skipped"; continue
      fi
      # shellcheck disable=SC2086
      run rmm baseline "$CLIENTS/rmm_tests" "${TETHER_CLIENTS_RMM_SECONDS:-50}" "" $RMM_TESTS
      # shellcheck disable=SC2086
      run rmm tether "$CLIENTS/rmm_tests" "${TETHER_CLIENTS_RMM_SECONDS:-50}" tether_rmm_plugin $RMM_TESTS
      ran+=(rmm)
      ;;
    cupy)
      if [ ! -d "$CLIENTS/cupy_tests" ]; then echo "gpu_clients: no $CLIENTS/cupy_tests; cupy skipped"; continue; fi
      if ! "$PY" -c "import cupy, tether.cupy" 2>"$WORK/cupy-import.log"; then
        echo "gpu_clients: cupy not importable ($(tail -1 "$WORK/cupy-import.log")); cupy skipped"; continue
      fi
      if [ "${TETHER_CLIENTS_CUPY_SUBSAMPLE:-1}" = 1 ]; then
        export CUPY_TEST_RANDOM_SUBSAMPLE=1 _CUPY_TEST_SUBSAMPLE_SEED=${TETHER_CLIENTS_CUPY_SEED:-20}
      fi
      # shellcheck disable=SC2086
      run cupy baseline "$CLIENTS/cupy_tests" "${TETHER_CLIENTS_CUPY_SECONDS:-130}" "" $CUPY_TESTS
      # shellcheck disable=SC2086
      run cupy tether "$CLIENTS/cupy_tests" "${TETHER_CLIENTS_CUPY_SECONDS:-130}" tether_cupy_plugin $CUPY_TESTS
      unset CUPY_TEST_RANDOM_SUBSAMPLE _CUPY_TEST_SUBSAMPLE_SEED
      ran+=(cupy)
      ;;
    *) echo "gpu_clients: unknown suite '$suite' (rmm, cupy)"; exit 2 ;;
  esac
done
if [ ${#ran[@]} = 0 ]; then
  echo "gpu_clients: no suite ran" | tee "$OUT/clients-summary.txt"
  exit 1
fi

{
  echo "gpu_clients: $(($(date +%s) - T0))s; suites ${ran[*]}; xdist '${XDIST[*]:-none}';" \
    "CuPy subsample ${TETHER_CLIENTS_CUPY_SUBSAMPLE:-1} (seed ${TETHER_CLIENTS_CUPY_SEED:-20})"
  for s in "$CLIENTS"/*/SOURCE.txt; do [ -f "$s" ] && echo "  tests: $(cat "$s")"; done
  "$PY" "$ROOT/tests/clients/summarize.py" "$WORK" "${ran[@]}"
} >"$OUT/clients-summary.txt" 2>&1
rc=$?
cat "$OUT/clients-summary.txt"
tar -C "$WORK" --exclude=cupy-kernel-cache -czf "$OUT/clients-logs.tar.gz" . 2>/dev/null
exit $rc
