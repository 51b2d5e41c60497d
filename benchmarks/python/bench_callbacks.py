"""Benchmark: the cost of the user-callback types, per allocate+deallocate pair.

Times ``r.allocate(64)`` + ``r.deallocate(p, 64)`` from Python for a host
resource (the reference), a CallbackResource whose functions are Python
(ctypes buffers), a pool over that resource (the callbacks only run when the
pool grows), a LoggingAdaptor writing to a callable and to a file, and a
FailureCallbackAdaptor (no failures: the callback never runs). All are timed in
turn within every repeat, so machine noise hits them alike. Prints ns per pair
(median over the repeats) and the ratio to the host resource. Never a test.

Usage: python benchmarks/python/bench_callbacks.py [--repeats 11] [--number 5000]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import tempfile
import timeit

import tether


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--number", type=int, default=5000)
    args = parser.parse_args()

    live: dict[int, ctypes.Array[ctypes.c_char]] = {}

    def allocate(size: int, alignment: int, stream: int) -> int:
        b = ctypes.create_string_buffer(size + alignment)
        p = (ctypes.addressof(b) + alignment - 1) // alignment * alignment
        live[p] = b
        return p

    def deallocate(ptr: int, size: int, alignment: int, stream: int) -> None:
        del live[ptr]

    lines: list[str] = []
    path = os.path.join(tempfile.mkdtemp(), "bench_callbacks.csv")
    host = tether.HostResource()
    python = tether.CallbackResource(allocate, deallocate)
    resources = {
        "host (reference)": host,
        "CallbackResource (Python functions)": python,
        "PoolResource over it": tether.PoolResource(python),
        "LoggingAdaptor -> Python callable": tether.LoggingAdaptor(host, callback=lines.append),
        "LoggingAdaptor -> file": tether.LoggingAdaptor(host, path),
        "FailureCallbackAdaptor (no failures)": tether.FailureCallbackAdaptor(host, lambda size: False),
    }

    def pair(r: tether.Resource) -> None:
        p = r.allocate(64)
        r.deallocate(p, 64)

    samples: dict[str, list[float]] = {name: [] for name in resources}
    for _ in range(args.repeats):
        lines.clear()
        for name, r in resources.items():
            t = timeit.timeit(lambda r=r: pair(r), number=args.number)
            samples[name].append(t / args.number * 1e9)
    ref = statistics.median(samples["host (reference)"])
    for name, s in samples.items():
        m = statistics.median(s)
        print(f"{name:40s} {m:9.0f} ns/pair  {m / ref:6.2f}x host")
    for r in resources.values():
        r.close()


if __name__ == "__main__":
    main()
