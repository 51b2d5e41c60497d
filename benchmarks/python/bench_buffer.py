"""Benchmark: the Python hot paths on host memory, against references measured in the same run.

For the fixed sizes of issue #13 (256 B and 1 MiB) it measures one
allocate/release pair of

* ``tether.Buffer(n, resource=pool)`` released with ``close()`` and with ``del``,
* ``pool.allocate(n)`` / ``pool.deallocate(p, n)`` (raw addresses),
* the floors under any Python wrapper: the two cffi calls a Buffer needs
  (create and release) and the two a raw pair needs, straight through cffi,
* references: ``numpy.empty(n, dtype=uint8)`` + del, and ``torch.empty(n,
  dtype=torch.uint8)`` (CPU) + del when PyTorch is installed,

on a host pool (``PoolResource(HostResource(), initial_size="16 MiB")``). The
cases are timed in turn within every repeat, so machine noise hits them alike.
Prints ns per pair (median over the repeats) and ratios to numpy.empty (and to
torch.empty). Never a test: it only reports. The GPU targets (Buffer <= 0.4x
torch.empty on CUDA, raw pairs no slower than cupy.cuda.alloc) are measured by
benchmarks/gpu/bench_python.py; on a shared CPU, instruction counts
(``valgrind --tool=callgrind``) are steadier than these times.

Usage: python benchmarks/python/bench_buffer.py [--repeats 21] [--number 20000]
       python benchmarks/python/bench_buffer.py --only CASE --size N --number K
--only runs one case K times after 2000 warm-up pairs and prints nothing: for
instruction counts, run it under callgrind with two values of K and divide the
difference of the totals by the difference of K, e.g.
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      python bench_buffer.py --only del --size 256 --number 5000   (then 25000)
CASE: numpy, torch, close, del, raw, buffer-floor, raw-floor.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import numpy

import tether
from tether._ffi import lib


_ONLY = ("numpy", "torch", "close", "del", "raw", "buffer-floor", "raw-floor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--only", choices=list(_ONLY), help="run one case --number times, untimed")
    parser.add_argument("--size", type=int, default=256, help="the size for --only")
    args = parser.parse_args()
    try:
        import torch
        torch_empty, torch_uint8 = torch.empty, torch.uint8
        torch_version = torch.__version__
    except ImportError:
        torch_empty = None
        torch_version = "not installed"

    pool = tether.PoolResource(tether.HostResource(), initial_size="16 MiB")
    Buffer, empty, uint8 = tether.Buffer, numpy.empty, numpy.uint8
    allocate, deallocate = pool.allocate, pool.deallocate
    # The floors call what the wrappers call: the _tether_py_gil_* helpers,
    # which keep the GIL where libtether's quick path serves the call
    # (python/ffibuild.py).
    create, release = lib._tether_py_gil_buffer_create, lib._tether_py_gil_buffer_release
    raw_allocate, raw_deallocate = lib._tether_py_gil_allocate, lib._tether_py_gil_deallocate
    handle = pool._h

    if args.only:
        n = args.size
        case = {"numpy": lambda: empty(n, dtype=uint8),
                "torch": lambda: torch_empty(n, dtype=torch_uint8),  # type: ignore[misc]
                "close": lambda: Buffer(n, resource=pool).close(),
                "del": lambda: Buffer(n, resource=pool),
                "raw": lambda: deallocate(allocate(n), n),
                "buffer-floor": lambda: release(create(handle, 0, n, 0)),
                "raw-floor": lambda: raw_deallocate(handle, raw_allocate(handle, n, 0, 0), n, 0, 0)}[args.only]
        for _ in range(2000):
            case()
        for _ in range(args.number):
            case()
        pool.close()
        return

    print(f"tether {tether.__version__}, numpy {numpy.__version__}, torch {torch_version}; "
          f"median ns per pair of {args.repeats} repeats x {args.number} pairs")
    for n in (256, 1 << 20):
        def numpy_pair():
            a = empty(n, dtype=uint8)
            del a

        def torch_pair():
            t = torch_empty(n, dtype=torch_uint8)
            del t

        def close_pair():
            Buffer(n, resource=pool).close()

        def del_pair():
            b = Buffer(n, resource=pool)
            del b

        def raw_pair():
            deallocate(allocate(n), n)

        def buffer_floor():
            release(create(handle, 0, n, 0))

        def raw_floor():
            raw_deallocate(handle, raw_allocate(handle, n, 0, 0), n, 0, 0)

        cases = {"numpy.empty + del": numpy_pair}
        if torch_empty is not None:
            cases["torch.empty (CPU) + del"] = torch_pair
        cases.update({
            "Buffer + close()": close_pair,
            "Buffer + del": del_pair,
            "pool.allocate/deallocate": raw_pair,
            "  (floor: 2 cffi calls, Buffer)": buffer_floor,
            "  (floor: 2 cffi calls, raw)": raw_floor,
        })
        timers = {k: timeit.Timer(f) for k, f in cases.items()}
        for t in timers.values():
            t.timeit(2000)  # warm up (pool chunks, caches)
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeats):
            for k, t in timers.items():
                samples[k].append(t.timeit(args.number) / args.number * 1e9)
        med = {k: statistics.median(v) for k, v in samples.items()}
        ref = med["numpy.empty + del"]
        tref = med.get("torch.empty (CPU) + del")
        label = "256 B" if n == 256 else "1 MiB"
        print(f"\n{label}:")
        print(f"  {'case':34s} {'ns/pair':>9s} {'vs numpy':>9s}" + (f" {'vs torch':>9s}" if tref else ""))
        for k, v in med.items():
            line = f"  {k:34s} {v:9.0f} {v / ref:8.2f}x"
            if tref:
                line += f" {v / tref:8.2f}x"
            print(line)
    pool.close()


if __name__ == "__main__":
    main()
