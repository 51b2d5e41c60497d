#!/usr/bin/env bash
# Build the Sphinx documentation into docs/_build/html, warnings as errors.
# Uses the active Python (ci/test.sh puts .venv first on PATH); installs
# docs/requirements.txt into it only if Sphinx or the theme is missing. The build needs no
# network and not the compiled package: the pages are checked against the
# sources by docs/_ext/apicheck.py.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
command -v "$python" >/dev/null 2>&1 || python=python3
if ! "$python" -c "import sphinx, pydata_sphinx_theme" >/dev/null 2>&1; then
  echo "docs: installing docs/requirements.txt into $("$python" -c 'import sys; print(sys.prefix)')"
  "$python" -m pip install -q -r docs/requirements.txt
fi
# -E: a fresh environment, so every page (and every API check) runs each time.
"$python" -m sphinx -E -W --keep-going -b html docs docs/_build/html
echo "docs: docs/_build/html/index.html"
