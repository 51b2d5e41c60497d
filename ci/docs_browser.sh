#!/usr/bin/env bash
# The built docs in a real browser: Debian's headless Chromium crawls the toctree
# from index.html (every page must be reachable), measures every code block and
# API signature at two window widths (none may be cut off) and screenshots every
# page into build/docs_browser/ (see ci/docs_browser.py). Run after ci/docs.sh.
# Installs Debian's chromium when missing (as ci/setup.sh installs libgtest-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
command -v "$python" >/dev/null 2>&1 || python=python3
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v chromium >/dev/null 2>&1; then
  echo "docs_browser: installing chromium (Debian)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
fi
[ -f docs/_build/html/index.html ] || ci/docs.sh
rm -rf build/docs_browser
"$python" ci/docs_browser.py --self-test docs/_build/html build/docs_browser
