"""Emit the C source of the cffi extension tether._tether (out-of-line API mode).

Run by python/CMakeLists.txt at build time; never shipped in the wheel.
The cdef comes from the public headers (cdefgen.py) plus the declarations of
the extension's own helpers (src/tether_py.h, compiled from src/tether_py.c)
and of the Python functions C calls back (src/tether_py_callbacks.h, wrapped
in ``extern "Python+C"`` here).

Usage: python ffibuild.py INCLUDE_DIR --c-output _tether.c --cdef-output _cdef.h
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cffi

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cdefgen  # noqa: E402

HELPERS = HERE / "src" / "tether_py.h"
# Python functions that C calls (@ffi.def_extern in tether/_callbacks.py).
# "Python+C": cffi defines them as C functions tether_py.c can call (its
# trampolines check the interpreter is still there first).
CALLBACKS = HERE / "src" / "tether_py_callbacks.h"


def make_ffi(include_dir: str | Path) -> tuple[cffi.FFI, str]:
    """The FFI builder and the generated cdef of the public headers."""
    cdef = cdefgen.generate(include_dir)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.cdef(HELPERS.read_text(encoding="utf-8"))
    ffi.cdef('extern "Python+C" {\n' + CALLBACKS.read_text(encoding="utf-8") + '\n}')
    # cffi releases the GIL around every call in API mode; that is intended:
    # every tether call is thread-safe and may block (CUDA, pool growth).
    ffi.set_source("tether._tether", '#include "tether/tether.h"\n#include "tether_py.h"\n')
    return ffi, cdef


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("include_dir")
    parser.add_argument("--c-output", required=True)
    parser.add_argument("--cdef-output", required=True)
    args = parser.parse_args(argv)
    try:
        ffi, cdef = make_ffi(args.include_dir)
    except cdefgen.CdefError as e:
        print(f"ffibuild: error: {e}", file=sys.stderr)
        return 1
    ffi.emit_c_code(args.c_output)
    Path(args.cdef_output).write_text(cdef, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
