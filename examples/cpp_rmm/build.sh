#!/usr/bin/env bash
# Build and run rmm_interop.cpp against the librmm / rapids_logger wheels (unpacked
# with pip install --target SITE) and an installed tether package (TETHER_SITE).
# usage: examples/cpp_rmm/build.sh   (SITE, TETHER_SITE, NVCC, OUT_BIN from the environment)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SITE=${SITE:-/tmp/site}
TETHER_SITE=${TETHER_SITE:-/tmp/tether-gpu-site}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT_BIN=${OUT_BIN:-/tmp/rmm_interop}
RMM_INC=$SITE/librmm/include
CCCL_INC=$SITE/librmm/include/rapids   # librmm's CCCL must win over the toolkit's
LOG_INC=$SITE/rapids_logger/include
TLIB=$(ls "$TETHER_SITE"/tether/lib/libtether.so.* | head -n 1)
for p in "$RMM_INC/rmm" "$CCCL_INC/cuda" "$TETHER_SITE/tether/include/tether/tether.hpp" "$TLIB"; do
  [[ -e "$p" ]] || { echo "build.sh: missing $p" >&2; exit 1; }
done
set -x
"$NVCC" -std=c++20 -O2 -x cu -I"$RMM_INC" -I"$CCCL_INC" -I"$LOG_INC" -I"$TETHER_SITE/tether/include" \
  -DCUB_DISABLE_NAMESPACE_MAGIC -DCUB_IGNORE_NAMESPACE_MAGIC_ERROR \
  -DTHRUST_DISABLE_ABI_NAMESPACE -DTHRUST_IGNORE_ABI_NAMESPACE_ERROR -DCCCL_DISABLE_PDL \
  "$HERE/rmm_interop.cpp" -o "$OUT_BIN" -cudart static \
  -Xlinker "$TLIB" -Xlinker -rpath="$(dirname "$TLIB")" \
  -L"$SITE/librmm/lib64" -L"$SITE/rapids_logger/lib64" -lrmm -lrapids_logger -ldl -lrt \
  -Xlinker -rpath="$SITE/librmm/lib64" -Xlinker -rpath="$SITE/rapids_logger/lib64"
"$OUT_BIN"
