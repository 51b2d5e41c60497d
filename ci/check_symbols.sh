#!/bin/sh
# Check the exported interface of libtether.so:
#   - every defined dynamic symbol starts with tether_ (the version-script node
#     TETHER_<n> itself is allowed: the linker emits it as an absolute symbol);
#   - the library links nothing from CUDA (no NEEDED libcuda / libcudart / libnvrtc):
#     the driver is loaded at run time.
# Usage: ci/check_symbols.sh path/to/libtether.so
set -eu
lib=${1:?usage: check_symbols.sh path/to/libtether.so}
[ -f "$lib" ] || { echo "check_symbols: no such file: $lib" >&2; exit 2; }

status=0
# nm prints "value type name[@version]"; undefined symbols are excluded by --defined-only.
symbols=$(nm -D --defined-only "$lib" | awk '{ n = $NF; sub(/@.*/, "", n); print $(NF-1), n }')
count=$(printf '%s\n' "$symbols" | grep -c ' tether_' || true)
bad=$(printf '%s\n' "$symbols" | awk '$2 !~ /^tether_/ && !($1 == "A" && $2 ~ /^TETHER_[0-9]+$/) { print $2 }')
if [ -n "$bad" ]; then
  echo "check_symbols: exported symbols without the tether_ prefix:" >&2
  printf '  %s\n' $bad >&2
  status=1
fi
if [ "$count" -eq 0 ]; then
  echo "check_symbols: no tether_ symbols exported at all" >&2
  status=1
fi

needed=$(readelf -d "$lib" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $NF); print $NF }')
cuda=$(printf '%s\n' "$needed" | grep -E '^lib(cuda|cudart|nvrtc|nvidia-ml)\.' || true)
if [ -n "$cuda" ]; then
  echo "check_symbols: libtether must not link CUDA libraries, but NEEDs: $cuda" >&2
  status=1
fi

[ "$status" -eq 0 ] && echo "check_symbols: $count tether_ symbols, NEEDED: $(echo $needed)"
exit "$status"
