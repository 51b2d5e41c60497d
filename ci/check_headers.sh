#!/bin/sh
# Header checks are ctest tests (label "headers", registered by tests/capi):
# each public header alone as C11 and as C++17 (included twice with the
# umbrella), tether.hpp in C++17/20, and the CCCL concept check.
# Usage: ci/check_headers.sh [build-dir]   (the build dir must be configured)
set -eu
exec ctest --test-dir "${1:-build}" -L headers --output-on-failure
