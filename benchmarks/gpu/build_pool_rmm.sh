#!/usr/bin/env bash
# Build bench_pool_rmm (pool_rmm.cpp: RMM's pool and arena beside tether's pool on the live sweep
# and the footprint of issue 22) against the librmm / rapids_logger wheels (unpacked with
# pip install --target SITE) and an installed tether package (TETHER_SITE); then run it with the
# arguments given (unless RUN=0).
# usage: benchmarks/gpu/build_pool_rmm.sh [reps [pattern ops]]
#   (SITE, TETHER_SITE, CXX, CUDA_HOME, OUT_BIN, RUN from the environment)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SITE=${SITE:-/tmp/site}
TETHER_SITE=${TETHER_SITE:-/tmp/tether-gpu-site}
CXX=${CXX:-g++}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT_BIN=${OUT_BIN:-/tmp/bench_pool_rmm}
RMM_INC=$SITE/librmm/include
CCCL_INC=$SITE/librmm/include/rapids   # librmm's CCCL must win over the toolkit's
LOG_INC=$SITE/rapids_logger/include
TLIB=$(ls "$TETHER_SITE"/tether/lib/libtether.so.* 2>/dev/null | head -n 1)
for p in "$RMM_INC/rmm" "$CCCL_INC/cuda" "$TETHER_SITE/tether/include/tether/tether.h" "$TLIB"; do
  [[ -e "$p" ]] || { echo "build_pool_rmm.sh: missing $p" >&2; exit 1; }
done
set -x
"$CXX" -std=c++20 -O2 -Wall -Wextra -I"$RMM_INC" -I"$CCCL_INC" -I"$LOG_INC" -I"$TETHER_SITE/tether/include" \
  -I"$HERE/../c" -I"$CUDA_HOME/include" -DCCCL_DISABLE_PDL \
  "$HERE/pool_rmm.cpp" -o "$OUT_BIN" "$TLIB" -Wl,-rpath,"$(dirname "$TLIB")" \
  -L"$SITE/librmm/lib64" -L"$SITE/rapids_logger/lib64" -lrmm -lrapids_logger \
  -L"$CUDA_HOME/lib64" -lcudart -ldl -lrt -Wl,-rpath,"$CUDA_HOME/lib64"
[[ ${RUN:-1} = 0 ]] && exit 0
LD_LIBRARY_PATH="$SITE/librmm/lib64:$SITE/rapids_logger/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$OUT_BIN" "$@"
