#!/usr/bin/env bash
# Allocation-failure injection: run tests/fault/scenario.c under the malloc
# shim (tests/fault/malloc_shim.c, LD_PRELOAD), failing the Nth allocation for
# every allocation site N of the scenario (first counted with the shim armed
# and nothing failing), then a few runs failing at random with p = 1/1000,
# 1/100, 1/10. Any abort, crash, hang or wrong status fails.
#
#   ci/fault.sh [--build-dir DIR] [--quick]
# Time-bounded: at most TETHER_FAULT_BUDGET_S seconds (default 60) of sweep;
# with more sites than fit, an evenly spaced sample (always the first 200).
# --quick: a 15 s budget (the ctest entry).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/fault
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "usage: ci/fault.sh [--build-dir DIR] [--quick]" >&2; exit 2 ;;
  esac
done
budget=${TETHER_FAULT_BUDGET_S:-60}
[ "$quick" = 1 ] && budget=${TETHER_FAULT_QUICK_BUDGET_S:-15}
jobs=${TETHER_JOBS:-$(nproc)}

if ! [ -x "$build/tests/fault/fault_scenario" ] || ! [ -f "$build/tests/fault/malloc_shim.so" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTETHER_BUILD_PYTHON=OFF \
    -DTETHER_BUILD_EXAMPLES=OFF -DTETHER_BUILD_BENCHMARKS=OFF >/dev/null
  ninja -C "$build" -j"$jobs" fault_scenario fault_malloc_shim >/dev/null
fi
scenario=$build/tests/fault/fault_scenario
shim=$(cd "$build/tests/fault" && pwd)/malloc_shim.so
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# One run: FAULT_* settings as arguments. Prints nothing on success.
run_one() {
  local tag=$1; shift
  local rc=0
  env "$@" LD_PRELOAD="$shim" timeout 20 "$scenario" >"$log/$tag.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    local why="exit $rc"
    [ "$rc" = 124 ] && why="hung (killed after 20 s)"
    [ "$rc" -gt 128 ] && [ "$rc" != 124 ] && why="killed by signal $((rc - 128))"
    echo "FAIL [$*]: $why"
    tail -n 8 "$log/$tag.out" | sed 's/^/    /'
  fi
}
export -f run_one
export shim scenario log

# Counting mode: armed, nothing fails.
env LD_PRELOAD="$shim" "$scenario" >"$log/count.out" 2>&1 || { cat "$log/count.out"; echo "fault: the scenario fails without injected failures"; exit 1; }
sites=$(sed -n 's/^allocations: \([0-9]*\).*/\1/p' "$log/count.out")
[ -n "$sites" ] && [ "$sites" -gt 0 ] || { cat "$log/count.out"; echo "fault: the shim counted no allocations"; exit 1; }

# How many runs fit the budget (time one run).
t0=$(date +%s%N)
run_one probe FAULT_FAIL_AT=1 >"$log/probe.res"
t1=$(date +%s%N)
per_run_ms=$(( (t1 - t0) / 1000000 + 1 ))
max_runs=$(( budget * 1000 * jobs / per_run_ms ))
[ "$max_runs" -lt 20 ] && max_runs=20

list=$log/sites
if [ "$sites" -le "$max_runs" ]; then
  seq 1 "$sites" >"$list"
else
  first=$(( max_runs / 4 ))
  { seq 1 "$first"; awk -v n="$sites" -v k=$(( max_runs - first )) -v f="$first" \
      'BEGIN { for (i = 1; i <= k; i++) { s = f + int(i * (n - f) / k); print s } }'; } | sort -un >"$list"
fi
{ for p in 0.001 0.01 0.1; do for seed in 1 2 3; do echo "p $p $seed"; done; done; } >"$log/random"

start=$(date +%s)
results=$log/results
{
  xargs -P "$jobs" -I{} bash -c 'run_one "n{}" FAULT_FAIL_AT={}' <"$list"
  xargs -P "$jobs" -L1 bash -c 'run_one "p$1-$2" FAULT_PROB=$1 FAULT_SEED=$2' _ <"$log/random" | sed 's/^/    /' || true
} >"$results" 2>&1 || true
elapsed=$(( $(date +%s) - start ))
runs=$(( $(wc -l <"$list") + $(wc -l <"$log/random") ))
failures=$(grep -c '^ *FAIL' "$results" || true)
cat "$results" | head -n 80
echo "fault injection: $runs runs, $sites sites ($(wc -l <"$list") swept, ${elapsed} s), $failures failures"
[ "$failures" = 0 ]
