"""A fixed workload for callgrind: tether.cupy's C hook (python/src/tether_py.c,
``_tether_py_cupy_malloc``/``_free``) called the way CuPy's CFunctionAllocator
calls it - with the GIL held, through C function pointers - over a host pool,
without CuPy or a GPU. Instruction counts per pair are the evidence on a
shared CPU, where timings are noise; they split the hook's own work (its
pointer map and locks, the GIL state calls) from the pool's quick paths.

    valgrind --tool=callgrind --callgrind-out-file=cg.out \\
        python benchmarks/python/cupy_hook_callgrind.py [pairs=20000] [size=256]
    callgrind_annotate --inclusive=yes --threshold=100 cg.out | grep -E 'quick|mutex|GILState'

and divide each count by ``pairs`` (the set-up is a small constant). With no
stream getter the hook orders on stream 0; CuPy's getter adds its own cost.
Prints what it ran. Never a test.
"""

from __future__ import annotations

import ctypes
import sys

import tether
from tether._ffi import ffi, lib

# The C signatures CuPy calls (cupy/cuda/memory.pyx: malloc_func_type, free_func_type);
# PYFUNCTYPE keeps the GIL across the call, as CuPy's Cython caller does.
MALLOC = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
FREE = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


def _address(name: str) -> int:
    return int(ffi.cast("intptr_t", ffi.addressof(lib, name)))


def main(argv: list[str]) -> int:
    if len(argv) > 2:
        raise SystemExit("usage: cupy_hook_callgrind.py [pairs=20000] [size=256]")
    pairs = int(argv[0]) if argv else 20000
    size = int(argv[1]) if len(argv) > 1 else 256
    if pairs < 1 or size < 1:
        raise SystemExit(f"pairs and size must be at least 1, got {pairs} and {size}")
    malloc, free = MALLOC(_address("_tether_py_cupy_malloc")), FREE(_address("_tether_py_cupy_free"))
    pool = tether.PoolResource(tether.HostResource(), initial_size="64 MiB")
    hook = lib._tether_py_cupy_hook_new(pool._h, -1, ffi.NULL, 0)
    if hook == ffi.NULL:
        raise SystemExit("could not make the hook")
    param = int(ffi.cast("intptr_t", hook))
    try:
        for _ in range(pairs):
            ptr = malloc(param, size, tether.HOST)
            if not ptr:
                raise SystemExit("the hook's malloc failed")
            free(param, ptr, tether.HOST)
    finally:
        lib._tether_py_cupy_hook_delete(hook)
    print(f"cupy_hook_callgrind: {pairs} malloc+free pairs of {size} B through the C hook over a host pool")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
