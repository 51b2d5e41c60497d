"""tether quick start: one current-resource table shared by Python and C.

1. build a host pool with a statistics adaptor and make it the current host resource;
2. allocate from Python (numpy sees the memory without a copy);
3. compile a tiny C library against the package's headers and libtether, and
   allocate from C through the same table;
4. drop the handles in an awkward order - nothing breaks;
5. print what the statistics adaptor counted.

Runs without a GPU. Needs a C compiler (cc) for step 3.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import tether

HERE = Path(__file__).resolve().parent


def compile_native(out_dir: str) -> ctypes.CDLL | None:
    """Build quickstart_native.c like an extension author would; None without a compiler."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    lib = Path(tether.get_library())
    target = Path(out_dir) / "libquickstart_native.so"
    subprocess.run([cc, "-std=c11", "-O1", "-shared", "-fPIC", f"-I{tether.get_include()}",
                    str(HERE / "quickstart_native.c"), "-o", str(target), str(lib),
                    f"-Wl,-rpath,{lib.parent}"], check=True)
    native = ctypes.CDLL(str(target))
    native.native_current_host_resource.restype = ctypes.c_size_t
    native.native_make_buffer.restype = ctypes.c_size_t
    native.native_make_buffer.argtypes = (ctypes.c_size_t, ctypes.c_int)
    native.native_last_error.restype = ctypes.c_char_p
    return native


def mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def main() -> int:
    print(f"tether {tether.__version__} (ABI {tether.abi_version()}), CUDA available: {tether.cuda_available()}")
    baseline = tether.debug.live_objects()

    # 1. host -> pool -> statistics, installed as the current host resource.
    host = tether.HostResource()
    pool = tether.PoolResource(host, initial_size="64 MiB")
    stats = tether.StatisticsAdaptor(pool)
    with tether.using(stats, device=tether.HOST):
        print(f"1. current host resource: {stats.name} -> {pool.name} "
              f"({mib(pool.pool_info().pool_size)}) -> {host.name}")

        # 2. Python allocates from the current host resource; numpy views it in place.
        py_buf = tether.Buffer("1 MiB", device=tether.HOST)
        view = np.asarray(py_buf)
        view[:] = 1
        print(f"2. Python: Buffer of {mib(py_buf.size)} at 0x{py_buf.ptr:x}, numpy view sums to {int(view.sum())}")

        # 3. C, compiled now against the package's headers and library, uses the same table.
        c_buf = None
        with tempfile.TemporaryDirectory() as tmp:
            native = compile_native(tmp)
            if native is None:
                print("3. C: skipped (no C compiler found)")
            else:
                c_handle = native.native_current_host_resource()
                same = "the same handle" if c_handle == stats.handle else "A DIFFERENT HANDLE"
                print(f"3. C sees current host resource 0x{c_handle:x}, Python 0x{stats.handle:x}: {same}")
                h = native.native_make_buffer(256 << 10, 2)
                if h == 0:
                    print(f"   C allocation failed: {native.native_last_error().decode()}")
                    return 1
                c_buf = tether.Buffer.from_handle(h, owned=True)  # Python takes over C's buffer
                print(f"   C allocated {mib(c_buf.size)} from it; Python reads it: "
                      f"sum = {int(np.asarray(c_buf).sum())}")
        s = stats.statistics()
        print(f"   the adaptor counts both: {s.current_count} allocations, {mib(s.current_bytes)} in use")

        # 4. Drop handles in an awkward order: every dependent keeps what it needs alive.
        keep_stats = py_buf.resource  # to read the counters at the end
        host.close()   # the upstream before the pool and the adaptor that use it
        pool.close()   # the upstream before the adaptor
        stats.close()  # the resource while it is still current, before its buffers
    # Leaving `using` popped this thread's override of the host slot: now only the buffers hold the chain.
    py_buf.close()  # the numpy view still holds the memory ...
    view[:3] = 9    # ... so this is safe
    print(f"4. closed host, pool and adaptor (while current), restored the slot, closed the "
          f"Python buffer: the numpy view is still fine {view[:4].tolist()}")
    del view
    if c_buf is not None:
        c_buf.close()

    # 5. What the adaptor counted, from both languages.
    s = keep_stats.statistics()
    print(f"5. statistics: {s.total_count} allocations, {mib(s.total_bytes)} in total, "
          f"peak {mib(s.peak_bytes)}, {s.current_bytes} bytes still in use")
    keep_stats.close()
    gc.collect()
    print(f"   tether objects left alive: {tether.debug.live_objects() - baseline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
