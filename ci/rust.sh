#!/usr/bin/env bash
# The Rust frontend (rust/, issue #15), as CI runs it:
#   1. makes sure cargo and Debian's bindgen CLI (with libclang) are installed;
#   2. builds libtether in the CMake build dir build/release (target `tether` only);
#   3. cargo fmt --check, cargo test --offline --workspace against it: the safe
#      crate's tests, the regenerate-and-diff test of tether-sys's committed
#      bindings (TETHER_REQUIRE_BINDGEN=1: fails rather than skips), and the
#      Rust <-> C++ proof (rust/xlang/cpp);
#   4. rustdoc with -D warnings; clippy with -D warnings where clippy is installed;
#      the Rust tests once more against build/san-address's ASan+UBSan libtether
#      when ci/test.sh has built it;
#   5. the Rust <-> Python proof (tests/python/test_rust.py: a Rust cdylib that
#      ctypes loads into Python, linked against the installed package's
#      libtether through tether.get_library()), with the package in .venv.
# No crate comes from a registry (--offline). About 1-2 minutes on 2 cores when
# build/release is already built (ci/test.sh builds it first).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${TETHER_JOBS:-$(nproc)}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
say() { printf -- '--- rust: %s\n' "$*"; }

# 1. Tools. rustup's cargo (~/.cargo/bin) if there is one, else Debian's.
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}
if ! command -v cargo >/dev/null 2>&1; then
  say "installing cargo (Debian)"
  apt_install cargo
fi
# bindgen loads libclang at run time, and needs clang's own headers (stddef.h):
# check by running it on a header that includes one.
bindgen_works() {
  local h
  h=$(mktemp --suffix=.h)
  echo '#include <stddef.h>' > "$h"
  echo 'size_t tether_probe(void);' >> "$h"
  bindgen "$h" >/dev/null 2>&1
  local rc=$?
  rm -f "$h"
  return $rc
}
if ! command -v bindgen >/dev/null 2>&1 || ! bindgen_works; then
  say "installing bindgen and libclang (Debian)"
  apt_install bindgen libclang1-14 libclang-common-14-dev
fi
say "$(cargo --version), $(bindgen --version 2>&1 | head -1)"

# 2. libtether from the CMake build.
cmake -G Ninja -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build/release -j"$jobs" tether >/dev/null
export TETHER_LIB_DIR=$root/build/release/capi
export TETHER_INCLUDE_DIR=$root/capi/include
export CARGO_BUILD_JOBS=$jobs

cd rust
# 3. Format, tests (bindings regenerated and compared), the C++ proof.
if cargo fmt --version >/dev/null 2>&1; then
  say "cargo fmt --check"
  cargo fmt --all --check
fi
say "cargo test --offline --workspace"
TETHER_REQUIRE_BINDGEN=1 cargo test --offline --workspace --quiet
say "the README example (tether/examples/readme.rs)"
cargo run --offline --quiet -p tether --example readme

# 4. Docs and lints.
say "rustdoc -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --offline --no-deps --workspace --quiet
if cargo clippy --version >/dev/null 2>&1; then
  say "cargo clippy -D warnings"
  cargo clippy --offline --workspace --all-targets --quiet -- -D warnings
else
  say "clippy is not installed (no rustup component here): skipped"
fi

# 4b. The Rust tests again against the ASan+UBSan libtether that ci/test.sh builds
# (build/san-address), with the sanitizer runtimes preloaded through a cargo
# runner: catches leaks and memory errors the Rust side causes in the library.
san=$root/build/san-address/capi
if [ -e "$san/libtether.so" ] && [ "${TETHER_RUST_ASAN:-1}" = 1 ]; then
  say "cargo test against the ASan+UBSan libtether ($san)"
  preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  TETHER_LIB_DIR=$san CARGO_TARGET_DIR=$root/rust/target/asan \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$preload" \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    cargo test --offline --workspace --tests --quiet
else
  say "no build/san-address/capi/libtether.so (ci/test.sh builds it): sanitizer run skipped"
fi

# 4c. tether-sys finds libtether in the documented order: TETHER_LIB_DIR, then
# pkg-config, then the Python package (a tether.pc made here points elsewhere).
say "tether-sys discovery order: TETHER_LIB_DIR, pkg-config, Python"
disc=$root/rust/target/discovery
mkdir -p "$disc/pc"
printf 'libdir=%s\nincludedir=%s\nName: tether\nDescription: tether\nVersion: 0\nLibs: -L${libdir} -ltether\n' \
  "$root/build/release/capi" "$root/capi/include" > "$disc/pc/tether.pc"
found_by() {
  env "$@" CARGO_TARGET_DIR="$disc" cargo build --offline --quiet -p tether-sys
  sed -n 's/^cargo:found_by=//p' "$(ls -t "$disc"/debug/build/tether-sys-*/output | head -1)"
}
py=$root/.venv/bin/python
got=$(found_by TETHER_LIB_DIR="$TETHER_LIB_DIR" PKG_CONFIG_PATH="$disc/pc" TETHER_PYTHON="$py")
[ "$got" = "TETHER_LIB_DIR" ] || { echo "rust: expected TETHER_LIB_DIR to win, got '$got'" >&2; exit 1; }
got=$(found_by -u TETHER_LIB_DIR PKG_CONFIG_PATH="$disc/pc" TETHER_PYTHON="$py")
[ "$got" = "pkg-config" ] || { echo "rust: expected pkg-config second, got '$got'" >&2; exit 1; }
# (from the root: in rust/ the crate folder tether/ imports as a namespace package)
if (cd "$root" && "$py" -c "import tether; tether.get_library()") >/dev/null 2>&1; then
  got=$(found_by -u TETHER_LIB_DIR PKG_CONFIG=false TETHER_PYTHON="$py")
  [ "$got" = "python tether.get_library()" ] || { echo "rust: expected the Python package third, got '$got'" >&2; exit 1; }
fi
cd "$root"

# 5. Rust <-> Python, against the package installed in .venv (installed here if missing).
python=.venv/bin/python
if ! [ -x "$python" ]; then
  ci/setup.sh
fi
if ! "$python" -c "import tether" >/dev/null 2>&1; then
  say "installing the Python package into .venv"
  "$python" -m pip install -q --no-build-isolation .
fi
say "Rust <-> Python (tests/python/test_rust.py)"
log=$(mktemp)
"$python" -m pytest tests/python/test_rust.py -q -rs -p no:cacheprovider 2>&1 | tee "$log"
if ! grep -q "2 passed" "$log"; then
  rm -f "$log"
  echo "rust: the cross-language test did not run and pass (see above)" >&2
  exit 1
fi
rm -f "$log"
say "all passed"
