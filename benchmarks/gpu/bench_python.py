"""Python-side device allocation speed: tether against CuPy and PyTorch.

The random pattern of benchmarks/c/random_pattern.h (sizes log-uniform in
256 B - 4 MiB, fixed seed, at most 1000 live, random free order) is generated
once and replayed by every contender; the result is the median ns per
allocate+free pair over the repetitions (after one warm-up replay each; the
contenders take turns within every repetition), measured in this run, with
ratios against torch.empty and cupy.cuda.alloc.

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

A second table repeats the comparison at the fixed sizes of issue #13 (256 B
and 1 MiB): each contender allocates and frees one object of that size in a
loop (the loop included), median ns per pair, ratios in the same run.
Targets: Buffer (close() and del) <= 0.4x torch.empty, raw allocate/deallocate
<= 1.0x cupy.cuda.alloc.

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


def measure_all(contenders, pairs: int, reps: int, sync) -> dict:
    """Median ns per pair of every contender. Each is warmed up once (pools
    grow), then the repetitions take turns - contender after contender within
    each repetition - so drifts of the machine (clocks, other load) hit all alike."""
    for run in contenders.values():
        run()
        sync()
    times = {name: [] for name in contenders}
    gc.disable()
    try:
        for _ in range(reps):
            for name, run in contenders.items():
                t0 = time.perf_counter_ns()
                run()
                sync()
                times[name].append((time.perf_counter_ns() - t0) / pairs)
    finally:
        gc.enable()
    return {name: statistics.median(v) for name, v in times.items()}


def tether_contenders(ops, pool, label: str, floors: bool) -> dict:
    """The tether contenders on one pool (closures bound to it)."""
    import tether
    Buffer = tether.Buffer
    c = {
        f"tether Buffer + close(), {label}":
            lambda: replay_objects(ops, lambda n: Buffer(n, resource=pool), Buffer.close),
        f"tether Buffer + del, {label}": lambda: replay_drop(ops, lambda n: Buffer(n, resource=pool)),
        f"tether raw allocate, {label}": lambda: replay_raw(ops, pool.allocate, pool.deallocate),
    }
    if floors:
        # Where the time goes: the two cffi calls alone (no method, no checks), and the loop.
        # The calls pool.allocate/deallocate make: the _tether_py_gil_* helpers, which keep
        # the GIL where libtether's quick path serves them (python/ffibuild.py).
        from tether._ffi import lib
        h, a, d = pool._h, lib._tether_py_gil_allocate, lib._tether_py_gil_deallocate
        c[f"  (floor: 2 cffi calls), {label}"] = lambda: replay_raw(
            ops, lambda n: a(h, n, 0, 0), lambda p, n: d(h, p, n, 0, 0))
        c["  (floor: the replay loop alone)"] = lambda: replay_raw(ops, lambda n: 0, lambda p, n: None)
    return c


FIXED_SIZES = (256, 1 << 20)


def fixed_contenders(n: int, pool, cupy, torch) -> dict:
    """One allocate+free of n bytes per iteration, for every contender that is there."""
    import tether
    Buffer = tether.Buffer
    allocate, deallocate = pool.allocate, pool.deallocate
    c = {
        "tether Buffer + close()": lambda: Buffer(n, resource=pool).close(),
        "tether Buffer + del": lambda: Buffer(n, resource=pool),
        "tether raw allocate": lambda: deallocate(allocate(n), n),
    }
    if cupy is not None:
        alloc = cupy.cuda.alloc
        c["cupy.cuda.alloc (its pool)"] = lambda: alloc(n)
    if torch is not None:
        tempty, tuint8 = torch.empty, torch.uint8
        c["torch.empty (caching allocator)"] = lambda: tempty(n, dtype=tuint8, device="cuda")
    return c


def measure_fixed(contenders: dict, iters: int, reps: int, sync) -> dict:
    """Median ns per pair; contenders take turns within each repetition (as measure_all)."""
    def loop(f):
        def run():
            for _ in range(iters):
                f()
        return run
    return measure_all({k: loop(f) for k, f in contenders.items()}, iters, reps, sync)


def main(argv) -> int:
    n_ops = int(argv[1]) if len(argv) > 1 else 20000
    reps = int(argv[2]) if len(argv) > 2 else 5
    import tether
    if not tether.cuda_available():
        print("bench_python: skipped: no usable CUDA device")
        return 0
    ops, pairs = make_pattern(n_ops)
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

    contenders = {}
    upstreams = [tether.CudaResource(0), tether.AsyncResource(0)]
    pools = [tether.PoolResource(u) for u in upstreams]
    contenders.update(tether_contenders(ops, pools[0], "pool(cuda)", floors=True))
    contenders.update(tether_contenders(ops, pools[1], "pool(async)", floors=False))
    if cupy is not None:
        uint8, empty, alloc = cupy.uint8, cupy.empty, cupy.cuda.alloc
        contenders["cupy.empty (default pool)"] = lambda: replay_drop(ops, lambda n: empty(n, dtype=uint8))
        contenders["cupy.cuda.alloc (its pool)"] = lambda: replay_drop(ops, alloc)
    if torch is not None:
        tempty, tuint8 = torch.empty, torch.uint8
        contenders["torch.empty (caching allocator)"] = lambda: replay_drop(
            ops, lambda n: tempty(n, dtype=tuint8, device="cuda"))
    results = measure_all(contenders, pairs, reps, sync)
    fixed = {n: measure_fixed(fixed_contenders(n, pools[0], cupy, torch), n_ops, reps, sync) for n in FIXED_SIZES}
    for p in pools + upstreams:
        p.close()
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
    if torch is not None:
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
        print(f"  Buffer + close() / torch.empty          = {r:.3f} (target <= 0.4): {'met' if r <= 0.4 else 'MISSED'}")
        r = results["tether Buffer + del, pool(cuda)"] / torch_ns
        print(f"  Buffer + del / torch.empty              = {r:.3f} (target <= 0.4): {'met' if r <= 0.4 else 'MISSED'}")
    if cupy_alloc_ns:
        r = results["tether raw allocate, pool(cuda)"] / cupy_alloc_ns
        print(f"  raw allocate/deallocate / cupy.cuda.alloc = {r:.3f} (target <= 1.0): {'met' if r <= 1.0 else 'MISSED'}")

    print(f"\nfixed sizes (issue #13), pool(cuda), {n_ops} pairs per repetition, median ns per pair")
    print(f"{'allocator':44s} {'size':>8s} {'ns/pair':>10s} {'vs torch.empty':>15s} {'vs cupy.cuda.alloc':>19s}")
    for n, res in fixed.items():
        t_ns, c_ns = res.get("torch.empty (caching allocator)"), res.get("cupy.cuda.alloc (its pool)")
        for name, ns in res.items():
            a = f"{ns / t_ns:14.3f}x" if t_ns else f"{'-':>15s}"
            b = f"{ns / c_ns:18.3f}x" if c_ns else f"{'-':>19s}"
            print(f"{name:44s} {n:8d} {ns:10.1f} {a} {b}")
        if t_ns:
            for k in ("tether Buffer + close()", "tether Buffer + del"):
                r = res[k] / t_ns
                print(f"  {n} B: {k} / torch.empty = {r:.3f} (target <= 0.4): {'met' if r <= 0.4 else 'MISSED'}")
        if c_ns:
            r = res["tether raw allocate"] / c_ns
            print(f"  {n} B: raw allocate/deallocate / cupy.cuda.alloc = {r:.3f} (target <= 1.0): "
                  f"{'met' if r <= 1.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
