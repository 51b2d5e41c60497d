#!/usr/bin/env bash
# Build thrust_sort.cu with nvcc against an installed tether package (TETHER_SITE), and
# with RMM's thrust_allocator too when the librmm / rapids_logger wheels are unpacked in
# SITE; then run it (unless RUN=0).
# usage: examples/cpp_thrust/build.sh [N [RUNS]]
#   (SITE, TETHER_SITE, NVCC, CUDA_HOME, OUT_BIN, ARCH (e.g. sm_90; default: nvcc's),
#    RUN from the environment; TETHER_INCLUDE/TETHER_LIB instead of TETHER_SITE for a build tree)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SITE=${SITE:-/tmp/site}
TETHER_SITE=${TETHER_SITE:-/tmp/tether-gpu-site}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
OUT_BIN=${OUT_BIN:-/tmp/thrust_sort}
TINC=${TETHER_INCLUDE:-$TETHER_SITE/tether/include}
TLIB=${TETHER_LIB:-$(ls "$TETHER_SITE"/tether/lib/libtether.so.* 2>/dev/null | head -n 1)}
for p in "$TINC/tether/thrust.hpp" "$TLIB"; do
  [[ -e "$p" ]] || { echo "build.sh: missing $p" >&2; exit 1; }
done
std=c++17
args=(-O2 -I"$TINC" "$HERE/thrust_sort.cu" -o "$OUT_BIN" -Xlinker "$TLIB" -Xlinker -rpath -Xlinker "$(dirname "$TLIB")")
[[ -n ${ARCH:-} ]] && args+=(-arch="$ARCH")
libpath=
if [[ -d $SITE/librmm/include/rmm && -d $SITE/rapids_logger/include ]]; then
  # librmm's CCCL must win over the toolkit's (RMM's headers need its version, and C++20).
  std=c++20
  args+=(-DTETHER_EXAMPLE_WITH_RMM -DCCCL_DISABLE_PDL -I"$SITE/librmm/include" -I"$SITE/librmm/include/rapids"
         -I"$SITE/rapids_logger/include" -L"$SITE/librmm/lib64" -L"$SITE/rapids_logger/lib64" -lrmm -lrapids_logger)
  libpath=$SITE/librmm/lib64:$SITE/rapids_logger/lib64
fi
set -x
"$NVCC" -std=$std "${args[@]}"
[[ ${RUN:-1} = 0 ]] && exit 0
LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$OUT_BIN" "$@"
