"""Python-side device allocation speed: tether against CuPy and PyTorch.

The random pattern of benchmarks/c/random_pattern.h (sizes log-uniform in
256 B - 4 MiB, fixed seed, at most 1000 live, random free order) is generated
once and replayed by every contender; the result is the median ns per
allocate+free pair over the repetitions (after one warm-up replay), measured in
this run, with ratios against torch.empty and cupy.cuda.alloc.

Contenders (missing frameworks are left out):
  tether Buffer + close()     tether.Buffer(size, resource=pool), freed with close()
  tether Buffer + del         the same, freed by dropping the last reference
  tether raw allocate         pool.allocate(size) / pool.deallocate(ptr, size)
  (floor rows)                the same two C calls straight through cffi, and the
                              replay loop with no allocator: where the time goes
  cupy.empty                  CuPy's default memory pool, uint8 arrays
  cupy.cuda.alloc             CuPy's pool, raw MemoryPointer
  torch.empty                 PyTorch's caching allocator, uint8 tensors on 'cuda'
The tether pool is a PoolResource over a CudaResource (and, second, over an
AsyncResource).

usage: python bench_python.py [ops (default 20000)] [repetitions (default 5)]
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time

MAX_LIVE = 1000
MIN_SIZE, MAX_SIZE = 256.0, 4.0 * 1024 * 1024


def make_pattern(n_ops: int, seed: int = 0x7E7BE5):
    """[(True, size) | (False, index of the live allocation to free)], and the number of pairs."""
    import random
    rng = random.Random(seed)
    lo, hi = math.log(MIN_SIZE), math.log(MAX_SIZE)
    ops, live, pairs = [], 0, 0
    for _ in range(n_ops):
        if live == 0 or (live < MAX_LIVE and rng.random() < 0.5):
            ops.append((True, int(math.exp(lo + rng.random() * (hi - lo)))))
            live += 1
            pairs += 1
        else:
            ops.append((False, rng.randrange(live)))
            live -= 1
    return ops, pairs


def replay_objects(ops, make, free):
    """Replay with `make(size) -> obj` and `free(obj)`; objects hold their own memory."""
    live = []
    append, pop = live.append, live.pop
    for is_alloc, arg in ops:
        if is_alloc:
            append(make(arg))
        else:
            obj = live[arg]
            live[arg] = live[-1]
            pop()
            free(obj)
    while live:
        free(pop())


def replay_drop(ops, make):
    """Replay where freeing is dropping the last reference (CuPy, PyTorch, tether's finalizer)."""
    live = []
    append, pop = live.append, live.pop
    for is_alloc, arg in ops:
        if is_alloc:
            append(make(arg))
        else:
            live[arg] = live[-1]
            pop()
    live.clear()


def replay_raw(ops, allocate, deallocate):
    live = []
    append, pop = live.append, live.pop
    for is_alloc, arg in ops:
        if is_alloc:
            append((allocate(arg), arg))
        else:
            p, n = live[arg]
            live[arg] = live[-1]
            pop()
            deallocate(p, n)
    while live:
        deallocate(*pop())


def measure(run, pairs: int, reps: int, sync) -> float:
    run()  # warm-up: pools grow
    sync()
    times = []
    gc.disable()
    try:
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            run()
            sync()
            times.append((time.perf_counter_ns() - t0) / pairs)
    finally:
        gc.enable()
    return statistics.median(times)


def main(argv) -> int:
    n_ops = int(argv[1]) if len(argv) > 1 else 20000
    reps = int(argv[2]) if len(argv) > 2 else 5
    import tether
    if not tether.cuda_available():
        print("bench_python: skipped: no usable CUDA device")
        return 0
    ops, pairs = make_pattern(n_ops)
    results: dict[str, float] = {}
    sync = lambda: None  # noqa: E731  (replaced once a framework is there)

    try:
        import cupy
        sync = cupy.cuda.Device().synchronize
    except ImportError:
        cupy = None
    try:
        import torch
        if not torch.cuda.is_available():
            torch = None
        elif cupy is None:
            sync = torch.cuda.synchronize
    except ImportError:
        torch = None

    Buffer = tether.Buffer
    for label, upstream in (("pool(cuda)", tether.CudaResource(0)), ("pool(async)", tether.AsyncResource(0))):
        pool = tether.PoolResource(upstream)
        results[f"tether Buffer + close(), {label}"] = measure(
            lambda: replay_objects(ops, lambda n: Buffer(n, resource=pool), Buffer.close), pairs, reps, sync)
        results[f"tether Buffer + del, {label}"] = measure(
            lambda: replay_drop(ops, lambda n: Buffer(n, resource=pool)), pairs, reps, sync)
        results[f"tether raw allocate, {label}"] = measure(
            lambda: replay_raw(ops, pool.allocate, pool.deallocate), pairs, reps, sync)
        if label == "pool(cuda)":
            # Where the time goes: the two cffi calls alone (no method, no checks).
            from tether._ffi import lib
            h, a, d = pool._h, lib._tether_py_allocate, lib._tether_py_deallocate
            results[f"  (floor: 2 cffi calls), {label}"] = measure(
                lambda: replay_raw(ops, lambda n: a(h, n, 0, 0), lambda p, n: d(h, p, n, 0, 0)), pairs, reps, sync)
            results["  (floor: the replay loop alone)"] = measure(
                lambda: replay_raw(ops, lambda n: 0, lambda p, n: None), pairs, reps, sync)
        pool.close()
        upstream.close()

    if cupy is not None:
        uint8 = cupy.uint8
        empty = cupy.empty
        results["cupy.empty (default pool)"] = measure(
            lambda: replay_drop(ops, lambda n: empty(n, dtype=uint8)), pairs, reps, sync)
        alloc = cupy.cuda.alloc
        results["cupy.cuda.alloc (its pool)"] = measure(lambda: replay_drop(ops, alloc), pairs, reps, sync)
        cupy.get_default_memory_pool().free_all_blocks()
    if torch is not None:
        tempty, tuint8 = torch.empty, torch.uint8
        results["torch.empty (caching allocator)"] = measure(
            lambda: replay_drop(ops, lambda n: tempty(n, dtype=tuint8, device="cuda")), pairs, reps, sync)
        torch.cuda.empty_cache()

    torch_ns = results.get("torch.empty (caching allocator)")
    cupy_alloc_ns = results.get("cupy.cuda.alloc (its pool)")
    print(f"bench_python: {n_ops} ops ({pairs} allocate+free pairs), {reps} repetitions, median ns per pair\n")
    print(f"{'allocator':44s} {'ns/pair':>10s} {'vs torch.empty':>15s} {'vs cupy.cuda.alloc':>19s}")
    for name, ns in results.items():
        a = f"{ns / torch_ns:14.3f}x" if torch_ns else f"{'-':>15s}"
        b = f"{ns / cupy_alloc_ns:18.3f}x" if cupy_alloc_ns else f"{'-':>19s}"
        print(f"{name:44s} {ns:10.1f} {a} {b}")
    print("\ntargets:")
    if torch_ns:
        r = results["tether Buffer + close(), pool(cuda)"] / torch_ns
        print(f"  Buffer + close() / torch.empty          = {r:.3f} (target <= 0.5): {'met' if r <= 0.5 else 'MISSED'}")
        r = results["tether Buffer + del, pool(cuda)"] / torch_ns
        print(f"  Buffer + del / torch.empty              = {r:.3f} (target <= 0.5): {'met' if r <= 0.5 else 'MISSED'}")
    if cupy_alloc_ns:
        r = results["tether raw allocate, pool(cuda)"] / cupy_alloc_ns
        print(f"  raw allocate/deallocate / cupy.cuda.alloc = {r:.3f} (target <= 1.0): {'met' if r <= 1.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
