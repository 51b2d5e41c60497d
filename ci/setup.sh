#!/usr/bin/env bash
# Prepare a fresh machine for the demo and the tests: Debian's GoogleTest and a
# Python virtual environment (.venv) with the build and test requirements.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

want_gtest=${TETHER_SETUP_GTEST:-1}
if [ "$want_gtest" = 1 ] && ! [ -f /usr/include/gtest/gtest.h ]; then
  echo "setup: installing libgtest-dev (Debian)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq libgtest-dev >/dev/null
fi

if ! [ -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -r ci/requirements.txt
if [ -f docs/requirements.txt ] && [ "${TETHER_SETUP_DOCS:-1}" = 1 ]; then
  .venv/bin/python -m pip install -q -r docs/requirements.txt
fi
echo "setup: ready (.venv: $(.venv/bin/python --version))"
