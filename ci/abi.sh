#!/usr/bin/env bash
# ABI check of libtether.so against the committed baseline abi/libtether.abi.
#
#   ci/abi.sh            build libtether with debug info (-g -Og, build/abi), describe
#                        its exported ABI with libabigail's abidw (only the types of the
#                        public headers, capi/include/tether) and compare it with the
#                        baseline (abidiff). Fails on an incompatible change - a removed
#                        or changed function or variable, a changed public struct - unless
#                        TETHER_ABI_VERSION (capi/include/tether/version.h) differs from
#                        the version the baseline records (abi/ABI_VERSION). Added
#                        functions pass; they are listed.
#   ci/abi.sh --update   rewrite the baseline (and abi/ABI_VERSION) from this build:
#                        commit it with the change, and with the ABI version bump if the
#                        change is incompatible.
#
# Exit status: 0 compatible (or the version was bumped), 1 incompatible, 2 tool error.
# Installs abigail-tools (Debian) when abidw/abidiff are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
case "${1:-}" in
  "") ;;
  --update) update=1 ;;
  *) echo "usage: ci/abi.sh [--update]" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v abidw >/dev/null 2>&1 || ! command -v abidiff >/dev/null 2>&1; then
  echo "abi: installing abigail-tools (Debian)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq abigail-tools >/dev/null
fi

build=${TETHER_ABI_BUILD:-build/abi}
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS_DEBUG="-g -Og" -DCMAKE_CXX_FLAGS_DEBUG="-g -Og" -DTETHER_SANITIZE= \
  -DTETHER_BUILD_TESTS=OFF -DTETHER_BUILD_EXAMPLES=OFF -DTETHER_BUILD_BENCHMARKS=OFF >/dev/null
ninja -C "$build" -j"${TETHER_JOBS:-$(nproc)}" tether >/dev/null

# No paths or source lines in the description: it changes only when the ABI does.
current=$build/libtether.abi
# abi/internal.suppr: tether_internal_* (for tether's own Python extension) are not ABI.
abidw --headers-dir capi/include/tether --drop-private-types --exported-interfaces-only \
  --suppressions abi/internal.suppr \
  --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
  --out-file "$current" "$build/capi/libtether.so"

version=$(sed -n 's/^#define TETHER_ABI_VERSION \([0-9][0-9]*\).*/\1/p' capi/include/tether/version.h)
[ -n "$version" ] || { echo "abi: no TETHER_ABI_VERSION in capi/include/tether/version.h" >&2; exit 2; }

if [ "$update" = 1 ]; then
  mkdir -p abi
  cp "$current" abi/libtether.abi
  echo "$version" >abi/ABI_VERSION
  echo "abi: baseline abi/libtether.abi rewritten for ABI version $version ($(grep -c '<elf-symbol ' abi/libtether.abi) exported symbols)"
  exit 0
fi

[ -f abi/libtether.abi ] && [ -f abi/ABI_VERSION ] ||
  { echo "abi: no baseline (abi/libtether.abi, abi/ABI_VERSION): run ci/abi.sh --update" >&2; exit 2; }
baseline_version=$(tr -d '[:space:]' <abi/ABI_VERSION)

rc=0
report=$(abidiff abi/libtether.abi "$current") || rc=$?
if [ $((rc & 3)) -ne 0 ]; then
  printf '%s\n' "$report"
  echo "abi: abidiff failed (exit $rc)" >&2
  exit 2
fi

# "Functions changes summary: R Removed, C Changed, A Added functions" (and the
# same for variables): anything removed or changed is incompatible; abidiff's
# own incompatible bit (8) marks removed symbols.
count() {
  local v
  v=$(printf '%s\n' "$report" | sed -n "s/.*$1 changes summary: \([0-9]*\) Removed[^,]*, \([0-9]*\) Changed[^,]*, \([0-9]*\) Added.*/\\$2/p" | head -1)
  echo "${v:-0}"
}
removed=$(( $(count Functions 1) + $(count Variables 1) ))
changed=$(( $(count Functions 2) + $(count Variables 2) ))
added=$(( $(count Functions 3) + $(count Variables 3) ))

if [ $((rc & 8)) -ne 0 ] || [ "$removed" -gt 0 ] || [ "$changed" -gt 0 ]; then
  printf '%s\n' "$report"
  if [ "$version" != "$baseline_version" ]; then
    echo "abi: incompatible changes, and TETHER_ABI_VERSION is $version (baseline: $baseline_version): accepted."
    echo "abi: record the new ABI with ci/abi.sh --update and commit abi/ with the change."
    exit 0
  fi
  echo "abi: FAILED: incompatible ABI change ($removed removed, $changed changed) with TETHER_ABI_VERSION still $version." >&2
  echo "abi: keep the old declarations, or bump TETHER_ABI_VERSION in capi/include/tether/version.h and run ci/abi.sh --update." >&2
  exit 1
fi
if [ "$added" -gt 0 ] || [ "$rc" -ne 0 ]; then
  printf '%s\n' "$report"
  echo "abi: compatible: $added added (run ci/abi.sh --update so the baseline defends them too)"
else
  echo "abi: libtether's ABI matches abi/libtether.abi (ABI version $version, $(grep -c '<elf-symbol ' "$current") exported symbols)"
fi
