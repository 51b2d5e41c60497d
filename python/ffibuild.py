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
    ffi.set_source("tether._tether", '#include "tether/tether.h"\n#include "tether_py.h"\n' + KEEP_GIL)
    return ffi, cdef


# The GIL. cffi's API mode releases the GIL around every C call (its wrapper
# _cffi_f_<name> brackets the call with Py_BEGIN_ALLOW_THREADS /
# Py_END_ALLOW_THREADS, unconditionally); that is right for tether calls in
# general: every one is thread-safe, and many may block - on CUDA (a call that
# waits for the device waits for a stream's host callbacks, which may be
# Python functions waiting for the GIL), on a pool's lock held across
# growth, or on a Python-implemented upstream, log sink or failure callback
# running on another thread, which needs the GIL itself.
#
# But on the hot paths the hand-off is a large part of the call: callgrind on
# bench_buffer.py --only buffer-floor --size 256 counted about 850 of ~3900
# instructions per Buffer create+release pair in take_gil/drop_gil and their
# mutexes. So the functions named _tether_py_gil_* (python/src/tether_py.h)
# are called WITH the GIL held, and decide themselves: each first tries
# libtether's quick path (capi/src/tether_internal.h), which refuses rather
# than waits - it takes only locks it can try (or leaf locks whose holders
# never wait), makes no CUDA call, calls no upstream, callback or Python
# code, destroys no resource, and enters the fork gate without waiting - so
# holding the GIL across it cannot deadlock: nothing it could wait for can
# be waiting for the GIL. Where it refuses, the helper releases the GIL
# (PyEval_SaveThread) and makes the usual call, as cffi would have. Kept this
# way: tether.Buffer(n, resource=...) creation and its release (close(),
# __del__), Resource.allocate/deallocate (a pool's quick cache or own free
# blocks, on the calling thread's arena); docs/python_api.rst ("Threads and
# the GIL") has what it gained: callgrind on bench_buffer.py, instructions per
# 256 B pair, Buffer + close() 9720 -> 8799, + del 9221 -> 8258, raw
# allocate/deallocate 6674 -> 6055.
#
# cffi has no per-function switch for this, so the set_source preamble
# redefines the two macros, which cffi's generated wrappers use only around
# the C call: a wrapper whose __func__ begins with "_cffi_f__tether_py_gil_"
# keeps the GIL. The test is written character by character (sizeof and
# constant indexes into __func__ fold at compile time): GCC did not fold
# __builtin_strncmp(__func__, ...) and called strncmp in every wrapper, about
# 35 instructions per call of every function.
_GIL_PREFIX = "_cffi_f__tether_py_gil_"
_KEEPS = " && ".join([f"sizeof(__func__) > {len(_GIL_PREFIX)}"] +
                     [f"__func__[{i}] == '{c}'" for i, c in enumerate(_GIL_PREFIX)])
KEEP_GIL = f"""
#undef Py_BEGIN_ALLOW_THREADS
#undef Py_END_ALLOW_THREADS
#define TETHER_PY_KEEPS_GIL ({_KEEPS})
#define Py_BEGIN_ALLOW_THREADS {{ PyThreadState* _save = TETHER_PY_KEEPS_GIL ? NULL : PyEval_SaveThread();
#define Py_END_ALLOW_THREADS if (_save != NULL) PyEval_RestoreThread(_save); }}
"""


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
