"""A C++ extension allocates from tether's table while Python swaps the resource.

1. compile table_worker.cpp as a Python extension module, against the
   package's headers and libtether (tether.get_include(), tether.get_library());
2. its C++ threads allocate, at every step, from the current resource of the
   slot, keeping a few buffers alive;
3. meanwhile a Python thread keeps installing another pool (each with its own
   statistics adaptor) as the current resource;
4. afterwards every pool got allocations, and every pool is back to 0 bytes:
   each free went to the pool its buffer came from, even a pool that had been
   replaced (and whose Python handle was closed) long before.

Runs without a GPU on the host slot; ``--device 0`` uses device 0's slot with
CUDA pools. Needs a C++ compiler (c++) and Python's headers.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import tether

HERE = Path(__file__).resolve().parent


def build_extension(out_dir: str):
    """Compile table_worker.cpp the way an extension author would; return the module."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        raise SystemExit("this example needs a C++ compiler (c++)")
    lib = Path(tether.get_library())
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = Path(out_dir) / f"table_worker{suffix}"
    subprocess.run([cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-pthread",
                    f"-I{sysconfig.get_paths()['include']}", f"-I{tether.get_include()}",
                    "-DTETHER_CCCL_INTEROP=0", str(HERE / "table_worker.cpp"), "-o", str(target),
                    str(lib), f"-Wl,-rpath,{lib.parent}"], check=True)
    sys.path.insert(0, out_dir)
    import table_worker
    return table_worker


def make_pool(device: int) -> tether.StatisticsAdaptor:
    upstream = tether.HostResource() if device == tether.HOST else tether.AsyncResource(device)
    return tether.StatisticsAdaptor(tether.PoolResource(upstream))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="host", help="'host' (default) or a CUDA device id")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--swaps", type=int, default=50)
    args = parser.parse_args()
    device = tether.HOST if args.device == "host" else int(args.device)
    baseline = tether.debug.live_objects()

    with tempfile.TemporaryDirectory() as tmp:
        worker = build_extension(tmp)
        first = make_pool(device)
        previous = tether.set_current_resource(first, device=device)
        pools = [first]
        done = threading.Event()
        result = {}

        def allocate() -> None:
            try:
                result["value"] = worker.run(device, args.threads, args.iterations, 8)
            finally:
                done.set()

        t = threading.Thread(target=allocate)
        t.start()
        while not done.is_set() and len(pools) < args.swaps:  # swap while C++ allocates
            time.sleep(0.002)
            pool = make_pool(device)
            replaced = tether.set_current_resource(pool, device=device)
            replaced.close()  # the table let go, we let go: C++ buffers may still hold it
            pools.append(pool)
        t.join()
        allocations, seen = result["value"]
        restored = tether.set_current_resource(previous, device=device)
        restored.close()
        if previous is not None:
            previous.close()

        counts = [p.statistics() for p in pools]
        print(f"{allocations} allocations by {args.threads} C++ threads, from {seen} different resources; "
              f"Python installed {len(pools)}")
        used = sum(1 for s in counts if s.total_count > 0)
        print(f"{used} pools served allocations; bytes still in use: {sum(s.current_bytes for s in counts)}")
        assert allocations == args.threads * args.iterations
        assert sum(s.total_count for s in counts) == allocations, "every allocation came from a pool we made"
        assert all(s.current_bytes == 0 for s in counts), "a free went to the wrong pool"
        print("all frees returned to their origin")
        for p in pools:
            p.close()
    gc.collect()
    print(f"tether objects left alive: {tether.debug.live_objects() - baseline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
