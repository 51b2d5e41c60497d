#!/usr/bin/env bash
# The libFuzzer target tests/fuzz/fuzz_capi.cpp: random C ABI call sequences
# checked against a model, under ASan+UBSan, libtether built the same way.
#
#   ci/fuzz.sh            fuzz for TETHER_FUZZ_SECONDS (default 120) starting from
#                         tests/fuzz/corpus; new inputs go to build/fuzz/corpus
#                         (not committed); exits non-zero on any crash, leak or
#                         model mismatch (the input is left in build/fuzz/artifacts/)
#   ci/fuzz.sh --replay   run every committed corpus file once (seconds)
#
# Environment: TETHER_FUZZ_SECONDS, TETHER_FUZZ_HOSTILE (bit mask of the hostile
# ops, default all: see fuzz_capi.cpp), TETHER_FUZZ_JOBS (build jobs),
# TETHER_FUZZ_BUILD (build dir, default build/fuzz).
# Installs clang (Debian) when it is missing, as ci/setup.sh installs GoogleTest.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=fuzz
case "${1:-}" in
  "") ;;
  --replay) mode=replay ;;
  *) echo "usage: ci/fuzz.sh [--replay]" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: installing clang (Debian)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq clang >/dev/null
fi

build=${TETHER_FUZZ_BUILD:-build/fuzz}
jobs=${TETHER_FUZZ_JOBS:-$(nproc)}
CC=clang CXX=clang++ cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTETHER_SANITIZE=address,undefined -DTETHER_BUILD_FUZZERS=ON \
  -DTETHER_BUILD_EXAMPLES=OFF -DTETHER_BUILD_BENCHMARKS=OFF >/dev/null
ninja -C "$build" -j"$jobs" tether_fuzz_capi
fuzzer=$build/tests/fuzz/tether_fuzz_capi

# -fsanitize=fuzzer puts libstdc++ before the shared ASan runtime in the
# program's library list (harmless: it defines no allocator function).
export ASAN_OPTIONS="verify_asan_link_order=0:allocator_may_return_null=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

if [ "$mode" = replay ]; then
  n=$(find tests/fuzz/corpus -type f | wc -l)
  rc=0
  mkdir -p "$build/artifacts"
  "$fuzzer" -runs=0 -artifact_prefix="$build/artifacts/" tests/fuzz/corpus >"$build/replay.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    grep -E "^(==[0-9]+==|SUMMARY|fuzz_capi: (model|line)|Running:)" "$build/replay.log" | head -20 || true
    echo "fuzz: replay FAILED (exit $rc), log in $build/replay.log"
    exit "$rc"
  fi
  grep -E "^#[0-9]+[[:space:]]+DONE" "$build/replay.log" | tail -1 || true
  echo "fuzz: replayed $n corpus inputs, no crash"
  exit 0
fi

seconds=${TETHER_FUZZ_SECONDS:-120}
mkdir -p "$build/corpus" "$build/artifacts"
log=$build/fuzz.log
echo "fuzz: $seconds s, log in $log"
rc=0
# The first corpus dir receives new inputs; the committed one is only read.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/" "$build/corpus" tests/fuzz/corpus >"$log" 2>&1 || rc=$?
grep -E "^(==[0-9]+==|SUMMARY|fuzz_capi: (model|line)|artifact_prefix)" "$log" | head -20 || true
# libFuzzer's last status line (cov: edges, ft: features, exec/s) and final stats.
grep -E "^#[0-9]+" "$log" | tail -1
grep -E "^stat::" "$log" || true
if [ "$rc" -ne 0 ]; then
  echo "fuzz: FAILED (exit $rc); the input is in $build/artifacts/ (replay: $fuzzer FILE)"
  exit "$rc"
fi
# One line for the CI log: executions, their rate and libFuzzer's coverage.
last=$(grep -E "^#[0-9]+" "$log" | tail -1)
cov=$(printf '%s\n' "$last" | sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1 edges, ft \2 features, corpus \3 inputs/p')
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
echo "fuzz: no crash in $seconds s: $runs executions, $rate exec/s, $cov"
