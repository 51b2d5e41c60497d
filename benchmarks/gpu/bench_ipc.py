"""CUDA IPC round trip per buffer: export + import + first touch + release.

The parent (exporter) allocates N buffers, and for each one, timed on its side:
export_ipc(), send the handle (and, for posix_fd pools, the pool's descriptor,
tether.ipc.send_handle) over a Unix socket to a spawned child, which imports it
(tether.import_ipc), touches it (reads it back to the host, 64 KiB by default),
releases it and replies. Median microseconds per buffer, for:

  pool(cuda)          a PoolResource over a CudaResource (cuIpcGetMemHandle of the chunk)
  async posix_fd      an AsyncResource(ipc_handle_type="posix_fd") (pool descriptor +
                      cuMemPoolExportPointer; the child imports the pool once)
References measured in the same run:
  messaging floor     the same socket round trip with a 192-byte message and no import
  one allocation      tether.Buffer(size, cuda) + close() in the parent (cuMemAlloc/cuMemFree)
and ratios of each path against them. Never fails on speed; without a GPU it says so
and exits 0.

usage: python bench_ipc.py [buffers (default 200)] [size bytes (default 65536)]
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import time


def child(address: str, count: int, mode: str) -> None:
    import tether
    import tether.ipc
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(address)
        for _ in range(count):
            if mode == "floor":
                got = b""
                while len(got) < 1 + tether.IPC_HANDLE_SIZE:
                    got += s.recv(1 + tether.IPC_HANDLE_SIZE - len(got))
            else:
                b = tether.ipc.recv_buffer(s)
                b.tobytes()  # first touch
                b.close()
            s.sendall(b"k")


def round_trips(ctx, buffers, mode: str) -> list[float]:
    import tether
    import tether.ipc
    address = os.path.join(tempfile.mkdtemp(), "bench.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
    server.listen(1)
    p = ctx.Process(target=child, args=(address, len(buffers), mode))
    p.start()
    conn, _ = server.accept()
    times = []
    with conn:
        for b in buffers:
            t0 = time.perf_counter()
            if mode == "floor":
                conn.sendall(b"\x00" + bytes(tether.IPC_HANDLE_SIZE))
            else:
                tether.ipc.send_handle(conn, b.export_ipc())
            if conn.recv(1) != b"k":
                raise RuntimeError("the importer failed")
            times.append(time.perf_counter() - t0)
    p.join(120)
    server.close()
    if p.exitcode != 0:
        raise RuntimeError(f"the importer exited with {p.exitcode}")
    return times[1:]  # the first one pays the importer's CUDA start-up


def main() -> int:
    import tether
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 65536
    if not tether.cuda_available():
        print("bench_ipc: no CUDA device: skipped")
        return 0
    ctx = mp.get_context("spawn")
    cuda = tether.CudaResource(0)
    results: dict[str, float] = {}
    alloc = []
    for _ in range(n):
        t0 = time.perf_counter()
        tether.Buffer(size, cuda).close()
        alloc.append(time.perf_counter() - t0)
    results["one allocation"] = statistics.median(alloc)
    results["messaging floor"] = statistics.median(round_trips(ctx, [None] * (n + 1), "floor"))
    pool = tether.PoolResource(cuda, initial_pool_size=max(64 << 20, 2 * n * size))
    bufs = [tether.Buffer(size, pool) for _ in range(n + 1)]
    for b in bufs:
        b.copy_from_host(bytes(size))
    results["pool(cuda)"] = statistics.median(round_trips(ctx, bufs, "import"))
    for b in bufs:
        b.close()
    try:
        fd_pool = tether.AsyncResource(0, ipc_handle_type="posix_fd")
    except tether.NotSupportedError as e:
        print(f"bench_ipc: async posix_fd skipped: {e}")
    else:
        bufs = [tether.Buffer(size, fd_pool) for _ in range(n + 1)]
        for b in bufs:
            b.copy_from_host(bytes(size))
        results["async posix_fd"] = statistics.median(round_trips(ctx, bufs, "import"))
        for b in bufs:
            b.close()
    print(f"bench_ipc: {n} buffers of {size} bytes, median us per buffer (export + send + import + "
          f"first touch + release + reply)")
    for name, t in results.items():
        print(f"  {name:<18} {t * 1e6:10.1f} us   x{t / results['messaging floor']:7.2f} floor   "
              f"x{t / results['one allocation']:8.2f} one allocation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
