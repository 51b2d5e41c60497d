"""Per-allocation cost through each library's allocator hook, tether vs the
library's own allocator vs RMM's hook over an RMM pool, measured in one run.

  torch.empty(n, device="cuda")   PyTorch's caching allocator | tether.torch.enable(pool) | rmm_torch_allocator
  cupy.empty(n, uint8)            CuPy's MemoryPool           | tether.cupy.allocator(pool) | rmm_cupy_allocator

n = 256 B, 1 MiB, and "random": a fixed sequence of sizes log-uniform in
256 B - 1 MiB (seed 42, the same in every interpreter), one size per
iteration. Each contender runs in its own interpreter (PyTorch lets a
process pick its allocator once). Each reports the median over repetitions
of ns per allocate+free (the tensor/array is created and dropped in a loop;
memory is not touched). tether and RMM pools are created with a 1 GiB initial
size, so no measured allocation grows a pool. Ratios are against the library's
own allocator and against RMM's hook from the same run.

Two more CuPy rows split tether's share from CuPy's (the same rounds):
  floor    CuPy's CFunctionAllocator over two C functions that do nothing (malloc
           returns one static buffer, free returns): what every C-level hook pays
           in CuPy - the CFunctionAllocatorMemory object, its 5-argument __init__,
           the MemoryPointer - before any allocator runs. Compiled with `cc` at
           start; "not measured" without a compiler.
  direct   tether's C hook installed as CFunctionAllocator.malloc itself, without
           the Python function tether.cupy puts in front of it (which turns
           CPython's SystemError back into tether's exception, see
           docs/hooks/cupy.rst): that function's cost is direct - tether.
(tether - floor) is tether's own work per cupy.empty; (own - floor) is what any
C-level hook has to fit in to match CuPy's pool.

Processes differ more than rows do (the same row moved by up to 2x between
interpreters on one machine), so the whole set of contenders runs ROUNDS times,
interleaved (round 1: every contender once, round 2: every contender again,
in rotated order, ...), each time in a fresh interpreter. A round's ratio is
tether/own of that round's two processes; the verdict is on the median ratio
over the rounds, and the table shows that median with the rounds' range.

Targets (issue 22): torch.empty through tether's hook <= 0.95x the caching allocator, cupy.empty
through tether.cupy <= 1.0x CuPy's MemoryPool, at every size.

usage: python bench_hooks.py [iterations=20000] [repetitions=7] [--rounds 3] [--json FILE] [--libs torch,cupy]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap

SIZES = (256, 1 << 20, "random")
TARGET = {"torch": 0.95, "cupy": 1.0}  # tether / own, issue 22

SETUP = {
    ("torch", "own"): "import torch",
    ("torch", "tether"): """
        import torch, tether, tether.torch
        tether.torch.enable(tether.PoolResource(tether.AsyncResource(0), initial_size="1 GiB"))
    """,
    ("torch", "rmm"): """
        import torch, rmm, rmm.mr
        from rmm.allocators.torch import rmm_torch_allocator
        rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(),
                                                                      initial_pool_size=1 << 30))
        torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    """,
    ("cupy", "own"): "import cupy",
    # The shipped hook: C-level (CuPy's CFunctionAllocator over tether_py.c's malloc/free,
    # stream read through CuPy's C API) with CuPy >= 14.1, else the Python hook; the row
    # says which.
    ("cupy", "tether"): """
        import cupy, tether, tether.cupy
        cupy.cuda.set_allocator(tether.cupy.allocator(
            tether.PoolResource(tether.AsyncResource(0), initial_size="1 GiB")))
        print("NOTE tether.cupy path:", tether.cupy.c_level_reason() or "C-level hook")
    """,
    ("cupy", "floor"): """
        import ctypes, os, subprocess, tempfile, cupy
        src = ("static char buf[64];\\n"
               "void* floor_malloc(void* p, unsigned long n, int d) { (void)p; (void)n; (void)d; return buf; }\\n"
               "void floor_free(void* p, void* q, int d) { (void)p; (void)q; (void)d; }\\n")
        tmp = tempfile.mkdtemp()
        with open(os.path.join(tmp, "floor.c"), "w") as f:
            f.write(src)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", os.path.join(tmp, "floor.so"),
                        os.path.join(tmp, "floor.c")], check=True)
        floor = ctypes.CDLL(os.path.join(tmp, "floor.so"))
        addr = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value
        cupy.cuda.set_allocator(cupy.cuda.memory.CFunctionAllocator(
            1, addr(floor.floor_malloc), addr(floor.floor_free), floor).malloc)
    """,
    ("cupy", "direct"): """
        import cupy, tether, tether.cupy
        hook = tether.cupy.allocator(tether.PoolResource(tether.AsyncResource(0), initial_size="1 GiB"))
        if not hasattr(hook, "_cupy_malloc"):
            raise SystemExit("the C-level hook is not in use: " + str(tether.cupy.c_level_reason()))
        cupy.cuda.set_allocator(hook._cupy_malloc)
    """,
    ("cupy", "rmm"): """
        import cupy, rmm, rmm.mr
        from rmm.allocators.cupy import rmm_cupy_allocator
        rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(),
                                                                      initial_pool_size=1 << 30))
        cupy.cuda.set_allocator(rmm_cupy_allocator)
    """,
}

LOOP = {
    "torch": """
        def make(n):
            return torch.empty(n, dtype=torch.uint8, device="cuda")
        sync = torch.cuda.synchronize
    """,
    "cupy": """
        def make(n):
            return cupy.empty(n, dtype=cupy.uint8)
        sync = cupy.cuda.Device().synchronize
    """,
}

MEASURE = """
import json, math, random, time
results = {}
rng = random.Random(42)
RANDOM = [int(math.exp(rng.uniform(math.log(256), math.log(1 << 20)))) for _ in range(ITERS)]
for n in SIZES:
    seq = RANDOM if n == "random" else [n] * ITERS
    for k in seq[:1000]:
        make(k)
    sync()
    reps = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        for k in seq:
            make(k)
        reps.append((time.perf_counter_ns() - t0) / ITERS)
    sync()
    results[str(n)] = reps
print("RESULT " + json.dumps(results))
"""


def measure(lib: str, who: str, iters: int, reps: int) -> dict[str, float] | str:
    code = "\n".join([textwrap.dedent(SETUP[(lib, who)]), textwrap.dedent(LOOP[lib]),
                      f"SIZES = {SIZES!r}; ITERS = {iters}; REPS = {reps}", MEASURE])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("NOTE "):
            print(f"  {lib} {who}: {line[len('NOTE '):]}")
        if line.startswith("RESULT "):
            raw = json.loads(line[len("RESULT "):])
            return {k: statistics.median(v) for k, v in raw.items()}
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return f"not measured: {tail}"


WHO = ("own", "tether", "rmm")
EXTRA = {"torch": (), "cupy": ("floor", "direct")}  # measured in every round, after WHO's


def parse_args(argv: list[str]) -> dict:
    """The options of ``argv`` (the arguments after the script's name).

    Positional: iterations (20000), repetitions (7); options: --rounds N (3),
    --json FILE, --libs torch,cupy. (Until stop 33 the positional list dropped
    its first element, so ``bench_hooks.py 20000 5`` timed 5 iterations per
    repetition; every figure measured that way is void.)
    """
    valued = {"--json", "--libs", "--rounds"}
    for i, a in enumerate(argv):
        if a in valued and i + 1 >= len(argv):
            raise SystemExit(f"{a} needs a value")
        if a.startswith("--") and a not in valued:
            raise SystemExit(f"unknown option {a}")
    positional = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] not in valued)]
    if len(positional) > 2:
        raise SystemExit(f"at most two positional arguments (iterations, repetitions), got {positional}")
    opts = {
        "iters": int(positional[0]) if positional else 20000,
        "reps": int(positional[1]) if len(positional) > 1 else 7,
        "rounds": int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3,
        "json": argv[argv.index("--json") + 1] if "--json" in argv else None,
        "libs": argv[argv.index("--libs") + 1].split(",") if "--libs" in argv else ["torch", "cupy"],
    }
    for name in ("iters", "reps", "rounds"):
        if opts[name] < 1:
            raise SystemExit(f"{name} must be at least 1, got {opts[name]}")
    return opts


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    iters, reps, rounds, json_out, libs = opts["iters"], opts["reps"], opts["rounds"], opts["json"], opts["libs"]
    # runs[(lib, who)]: one result per round (a dict of medians, or why it was not measured)
    runs: dict[tuple[str, str], list[dict[str, float] | str]] = {
        (l, w): [] for l in ("torch", "cupy") for w in WHO + EXTRA[l]}
    for r in range(rounds):
        order = [(l, w) for l in ("torch", "cupy") for w in WHO[r % 3:] + WHO[:r % 3] + EXTRA[l]]
        for lib, who in order:
            runs[(lib, who)].append(measure(lib, who, iters, reps) if lib in libs else "not measured: --libs")
    print(f"bench_hooks: ns per allocate+free, median over {reps} repetitions of {iters} per process; "
          f"{rounds} interleaved rounds, one process per contender and round")
    print("targets (issue 22): torch tether/own <= 0.95x, cupy tether/own <= 1.0x, at every size")
    print(f"{'library':8} {'size':>8} {'own':>10} {'tether':>10} {'rmm hook':>10} {'tether/own':>11} "
          f"{'(rounds)':>15} {'tether/rmm':>11}")
    summary = []
    nan = float("nan")
    for lib in ("torch", "cupy"):
        for who in WHO + EXTRA[lib]:
            for k, res in enumerate(runs[(lib, who)]):
                if isinstance(res, str):
                    print(f"  {lib} {who} round {k + 1}: {res}")
        for n in map(str, SIZES):
            def per_round(who):
                return [res[n] if isinstance(res, dict) else nan for res in runs[(lib, who)]]
            own, teth, rmm = (per_round(w) for w in WHO)
            vs_own = [t / o for t, o in zip(teth, own)]
            vs_rmm = [t / m for t, m in zip(teth, rmm)]
            def med(xs):
                xs = [x for x in xs if x == x]  # rounds that measured
                return statistics.median(xs) if xs else nan
            o, t, m, ratio = med(own), med(teth), med(rmm), med(vs_own)
            ok = [x for x in vs_own if x == x]
            spread = f"{min(ok):.2f}-{max(ok):.2f}" if ok else "-"
            print(f"{lib:8} {n:>8} {o:>10.1f} {t:>10.1f} {m:>10.1f} {ratio:>10.3f}x {spread:>15} "
                  f"{med(vs_rmm):>10.3f}x")
            summary.append({"library": lib, "size": n, "own_ns": o, "tether_ns": t, "rmm_ns": m,
                            "tether_vs_own": ratio, "tether_vs_own_rounds": vs_own,
                            "tether_vs_rmm": med(vs_rmm), "rounds": rounds})
    for lib in ("torch", "cupy"):
        if not EXTRA[lib] or lib not in libs:
            continue
        print(f"{lib}: where the time goes (ns per allocate+free, medians over the rounds; "
              "floor = CuPy's CFunctionAllocator over no-op C functions)")
        print(f"{'size':>8} {'floor':>8} {'direct':>8} {'tether':>8} {'own':>8} {'tether-floor':>13} "
              f"{'wrapper':>8} {'own-floor':>10}")
        for n in map(str, SIZES):
            def med_of(who):
                xs = [res[n] for res in runs[(lib, who)] if isinstance(res, dict)]
                return statistics.median(xs) if xs else nan
            fl, di, te, ow = (med_of(w) for w in ("floor", "direct", "tether", "own"))
            print(f"{n:>8} {fl:>8.1f} {di:>8.1f} {te:>8.1f} {ow:>8.1f} {te - fl:>13.1f} {te - di:>8.1f} "
                  f"{ow - fl:>10.1f}")
            row = next(r for r in summary if r["library"] == lib and r["size"] == n)
            row.update({"floor_ns": fl, "direct_ns": di})
    for row in summary:
        r, goal = row["tether_vs_own"], TARGET[row["library"]]
        verdict = "not measured" if r != r else "met" if r <= goal else "MISSED"
        print(f"  {row['library']} {row['size']:>8}: tether/own = {r:.3f} (median of {rounds} rounds; "
              f"target <= {goal}): {verdict}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
