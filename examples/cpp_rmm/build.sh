#!/usr/bin/env bash
# Build and run host C++ code that uses RMM and tether - rmm_interop.cpp by default -
# against the librmm / rapids_logger wheels (unpacked with pip install --target SITE) and
# an installed tether package (TETHER_SITE). Arguments go to the program; RUN=0 builds only.
# benchmarks/gpu/pool_rmm.cpp (RMM's pools beside tether's) is built with it too:
#   SRC=benchmarks/gpu/pool_rmm.cpp CXXFLAGS_EXTRA=-Ibenchmarks/c OUT_BIN=/tmp/bench_pool_rmm examples/cpp_rmm/build.sh 5
# usage: examples/cpp_rmm/build.sh [ARGS...]
#   (SITE, TETHER_SITE, CXX, CUDA_HOME, OUT_BIN, SRC, CXXFLAGS_EXTRA, RUN from the environment)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SITE=${SITE:-/tmp/site}
TETHER_SITE=${TETHER_SITE:-/tmp/tether-gpu-site}
CXX=${CXX:-g++}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
OUT_BIN=${OUT_BIN:-/tmp/rmm_interop}
SRC=${SRC:-$HERE/rmm_interop.cpp}
RMM_INC=$SITE/librmm/include
CCCL_INC=$SITE/librmm/include/rapids   # librmm's CCCL must win over the toolkit's
LOG_INC=$SITE/rapids_logger/include
TLIB=$(ls "$TETHER_SITE"/tether/lib/libtether.so.* 2>/dev/null | head -n 1)
for p in "$SRC" "$RMM_INC/rmm" "$CCCL_INC/cuda" "$TETHER_SITE/tether/include/tether/tether.hpp" "$TLIB"; do
  [[ -e "$p" ]] || { echo "build.sh: missing $p" >&2; exit 1; }
done
set -x
# Host code only (no kernels): the host compiler, the toolkit's headers and its runtime.
# shellcheck disable=SC2086
"$CXX" -std=c++20 -O2 -Wall -Wextra ${CXXFLAGS_EXTRA:-} -I"$RMM_INC" -I"$CCCL_INC" -I"$LOG_INC" \
  -I"$TETHER_SITE/tether/include" -I"$CUDA_HOME/include" -DCCCL_DISABLE_PDL \
  "$SRC" -o "$OUT_BIN" "$TLIB" -Wl,-rpath,"$(dirname "$TLIB")" \
  -L"$SITE/librmm/lib64" -L"$SITE/rapids_logger/lib64" -lrmm -lrapids_logger \
  -L"$CUDA_HOME/lib64" -lcudart -ldl -lrt -Wl,-rpath,"$CUDA_HOME/lib64"
[[ ${RUN:-1} = 0 ]] && exit 0
LD_LIBRARY_PATH="$SITE/librmm/lib64:$SITE/rapids_logger/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$OUT_BIN" "$@"
