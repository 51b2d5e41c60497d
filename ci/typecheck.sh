#!/usr/bin/env bash
# mypy --strict on the Python package (python/tether); pass = exit status 0.
# Settings live in pyproject.toml [tool.mypy] (strict, Python 3.10, and
# ignore_missing_imports only for the optional libraries the integration
# modules import: torch, cupy, numba, cuda.core / cuda.bindings, rmm).
# Installs mypy into .venv (made by ci/setup.sh) if it is missing there.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || ci/setup.sh
python=.venv/bin/python
if ! "$python" -c "import mypy" >/dev/null 2>&1; then
  echo "typecheck: installing mypy into .venv"
  "$python" -m pip install -q "$(grep -E '^mypy([<>=! ]|$)' ci/requirements.txt || echo mypy)"
fi
"$python" -m mypy --version
"$python" -m mypy --strict python/tether
