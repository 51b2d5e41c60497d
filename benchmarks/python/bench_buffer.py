"""Benchmark: tether.Buffer construction + release vs numpy.empty + del.

For n = 256 B and 64 KiB, measures one allocate/release pair of
``tether.Buffer(n, resource=pool)`` on a host pool (released with close() and
with del) and of ``numpy.empty(n, dtype=numpy.uint8)`` + del, in the same run.
The three are timed in turn within every repeat, so machine noise hits them
alike. Prints ns per pair (median over the repeats) and the ratio to numpy.
Target: within 2x of numpy.empty. Never a test: it only reports.

For context it also times the floor under any Python wrapper: the two cffi
calls a Buffer needs (create and release, each releasing the GIL) on their own.

Usage: python benchmarks/python/bench_buffer.py [--repeats 21] [--number 20000]
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import numpy

import tether
from tether._ffi import lib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()

    pool = tether.PoolResource(tether.HostResource(), initial_size="16 MiB")
    Buffer, empty, uint8 = tether.Buffer, numpy.empty, numpy.uint8

    print(f"tether {tether.__version__}, numpy {numpy.__version__}; "
          f"median of {args.repeats} repeats x {args.number} pairs")
    print(f"{'size':>8}  {'numpy.empty+del':>16}  {'Buffer+close()':>15}  {'ratio':>6}  "
          f"{'Buffer+del':>11}  {'ratio':>6}  {'2 cffi calls':>13}  {'ratio':>6}")
    create, release, handle = lib._tether_py_buffer_create, lib.tether_buffer_release, pool._h
    for n in (256, 64 << 10):
        def numpy_pair():
            a = empty(n, dtype=uint8)
            del a

        def close_pair():
            Buffer(n, resource=pool).close()

        def del_pair():
            b = Buffer(n, resource=pool)
            del b

        def raw_pair():
            release(create(handle, 0, n, 0))

        cases = {"numpy": numpy_pair, "close": close_pair, "del": del_pair, "raw": raw_pair}
        timers = {k: timeit.Timer(f) for k, f in cases.items()}
        for t in timers.values():
            t.timeit(2000)  # warm up (pool chunks, caches)
        samples = {k: [] for k in cases}
        for _ in range(args.repeats):
            for k, t in timers.items():
                samples[k].append(t.timeit(args.number) / args.number * 1e9)
        ref, closed, deleted, raw = (statistics.median(samples[k]) for k in ("numpy", "close", "del", "raw"))
        label = "256 B" if n == 256 else "64 KiB"
        print(f"{label:>8}  {ref:13.0f} ns  {closed:12.0f} ns  {closed / ref:5.2f}x  "
              f"{deleted:8.0f} ns  {deleted / ref:5.2f}x  {raw:10.0f} ns  {raw / ref:5.2f}x")
    pool.close()


if __name__ == "__main__":
    main()
