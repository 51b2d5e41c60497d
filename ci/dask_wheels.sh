#!/usr/bin/env bash
# Install the Dask wheels carried in a folder (dask, distributed and their
# dependencies: cp312 manylinux / pure-Python wheels fetched with `pip download`)
# into TARGET, for a machine without network whose Python lacks distributed.
# Only the distributions the interpreter does not have already are installed, so
# the folder never shadows what the machine ships (packaging, jinja2, psutil ...
# that torch or cupy may depend on). --no-index --no-deps: nothing is fetched.
#
# usage: ci/dask_wheels.sh PYTHON WHEEL_DIR TARGET
#   then PYTHONPATH=TARGET PYTHON -c "import distributed"
# ci/gpu.sh calls it when .whl/dask exists and `import distributed` fails.
set -eu -o pipefail
PY=$1 WHEELS=$2 TARGET=$3
mkdir -p "$TARGET"
# Each wheel's distribution name is its file name's first field (PEP 427); keep the
# wheels whose distribution the interpreter (site-packages and PYTHONPATH) lacks.
mapfile -t missing < <("$PY" - "$WHEELS" <<'PYEOF'
import importlib.metadata, pathlib, re, sys
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    dist = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        print(wheel)
PYEOF
)
if [ ${#missing[@]} -eq 0 ]; then
  echo "dask_wheels: the interpreter has every distribution in $WHEELS"
  exit 0
fi
echo "dask_wheels: installing into $TARGET: ${missing[*]##*/}"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$TARGET" "${missing[@]}"
PYTHONPATH=$TARGET${PYTHONPATH:+:$PYTHONPATH} "$PY" -c "import dask, distributed; print('dask_wheels: dask', dask.__version__, 'distributed', distributed.__version__)"
