#!/usr/bin/env bash
# Set up (if needed) and run the main demo: examples/python/quickstart.py.
# Needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
TETHER_SETUP_GTEST=0 TETHER_SETUP_DOCS=0 ci/setup.sh
echo "demo: building and installing the tether Python package into .venv"
.venv/bin/python -m pip install -q --no-build-isolation .
exec .venv/bin/python examples/python/quickstart.py
