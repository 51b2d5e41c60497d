"""PyTorch's allocator contract under tether.torch.enable(), on a real GPU: record_stream
(the side-stream race, with PyTorch's own allocator as the control and a run without the
record_stream hook proving the test can see the race), empty_cache, the per-process memory
fraction, CUDA graphs (make_graphed_callables; two graphs on one pool; captured memory not
reused outside), memory_stats, and CUDA IPC through tether.torch.mem_pool().

PyTorch lets a process choose its allocator once, before its first CUDA allocation, so every
scenario runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():  # pragma: no cover - depends on the machine
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

PRELUDE = """
import gc, os, sys
import torch
import tether, tether.torch
MiB = 1 << 20
GiB = 1 << 30
"""


def run(run_python, body: str, timeout: float = 300) -> str:
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(body) + "\nprint('SCENARIO OK')\n"
    proc = run_python(code, timeout=timeout)
    assert proc.returncode == 0 and "SCENARIO OK" in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout


# The pattern: x is read on a side stream by a long reduction, x.record_stream(side),
# del x, and the next allocation of the same size on the current stream writes zeros. If that
# allocation got x's memory before the side stream finished, some side-stream sums are short.
SIDE_STREAM_TRIALS = """
N = 64 * MiB                  # int32: 256 MiB
REPEATS = 24                  # the side stream reads x this many times (milliseconds)
TRIALS = 100
side = torch.cuda.Stream()
corrupt = 0
for trial in range(TRIALS):
    x = torch.ones(N, dtype=torch.int32, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        sums = torch.stack([x.sum() for _ in range(REPEATS)])
    x.record_stream(side)
    sums.record_stream(torch.cuda.current_stream())
    del x
    y = torch.zeros(N, dtype=torch.int32, device="cuda")   # the current stream, at once
    torch.cuda.synchronize()
    if not bool((sums == N).all()):
        corrupt += 1
    del y, sums
print("CORRUPT", corrupt, "OF", TRIALS)
"""


def corrupt_count(out: str) -> int:
    line = next(ln for ln in out.splitlines() if ln.startswith("CORRUPT "))
    print(line)  # the count, for the log (pytest -rP or -s)
    return int(line.split()[1])


def test_record_stream_keeps_memory_from_the_next_allocation_until_the_side_stream_is_done(run_python):
    out = run(run_python, textwrap.dedent("""
        pool = tether.PoolResource(tether.CudaResource(0), initial_size="1 GiB")
        tether.torch.enable(pool)
        """) + SIDE_STREAM_TRIALS + textwrap.dedent("""
        assert tether.torch.stats().recorded_streams >= 100
        assert tether.torch.stats().unknown_records == 0
        """))
    assert corrupt_count(out) == 0, out


def test_control_pytorchs_own_allocator_shows_no_corruption(run_python):
    out = run(run_python, SIDE_STREAM_TRIALS)
    assert corrupt_count(out) == 0, out


def test_control_without_the_record_stream_hook_the_race_is_seen(run_python):
    # Proves the stress test can fail: the same trials with record_stream not registered.
    out = run(run_python, textwrap.dedent("""
        pool = tether.PoolResource(tether.CudaResource(0), initial_size="1 GiB")
        tether.torch.enable(pool, _record_stream=False)
        """) + SIDE_STREAM_TRIALS)
    assert corrupt_count(out) > 0, out


def test_empty_cache_gives_device_memory_back(run_python):
    run(run_python, """
        pool = tether.PoolResource(tether.CudaResource(0))
        tether.torch.enable(pool)
        x = torch.empty(2 * GiB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        del x
        torch.cuda.synchronize()
        free0, total = torch.cuda.mem_get_info()
        assert pool.pool_info().pool_size >= 2 * GiB
        torch.cuda.empty_cache()
        free1, _ = torch.cuda.mem_get_info()
        assert free1 - free0 >= 2 * GiB - 64 * MiB, (free0, free1)
        assert pool.pool_info().pool_size == 0
    """)


def test_memory_fraction_raises_above_the_limit_and_not_below_and_memory_stats(run_python):
    run(run_python, """
        tether.torch.enable(tether.PoolResource(tether.CudaResource(0)))
        total = torch.cuda.mem_get_info()[1]
        keys = {"allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "reserved_bytes.all.peak", "allocation.all.current", "allocation.all.peak", "num_ooms",
                "num_alloc_retries"}
        base = tether.torch.memory_stats()
        assert set(base) == keys
        torch.cuda.set_per_process_memory_fraction(0.10)
        a = torch.empty(int(0.06 * total), dtype=torch.uint8, device="cuda")   # below
        s = tether.torch.memory_stats(0)
        assert s["allocated_bytes.all.current"] >= int(0.06 * total)
        assert s["allocation.all.current"] == base["allocation.all.current"] + 1
        try:
            torch.empty(int(0.06 * total), dtype=torch.uint8, device="cuda")  # 12 % > 10 %
        except RuntimeError as e:  # torch.OutOfMemoryError is a RuntimeError too
            assert "out of memory" in str(e) and "memory fraction" in str(e), e
        else:
            raise AssertionError("no error beyond the memory fraction")
        assert tether.torch.memory_stats(0)["num_ooms"] == base["num_ooms"] + 1
        b = torch.empty(int(0.03 * total), dtype=torch.uint8, device="cuda")   # still below: works
        del a, b
        torch.cuda.synchronize()
        after = tether.torch.memory_stats(torch.device("cuda", 0))
        assert after["allocated_bytes.all.current"] == base["allocated_bytes.all.current"]
        assert after["allocated_bytes.all.peak"] >= int(0.09 * total)
        assert after["reserved_bytes.all.peak"] >= after["allocated_bytes.all.peak"]
        torch.cuda.set_per_process_memory_fraction(1.0)
        c = torch.empty(int(0.2 * total), dtype=torch.uint8, device="cuda")
    """)


def test_make_graphed_callables_trains_with_graph_pools(run_python):
    run(run_python, """
        stats = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0)))
        tether.torch.enable(stats)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x = torch.randn(256, 64, device="cuda")
        y = x[:, :1] * 2.0 - x[:, 1:2]
        graphed = torch.cuda.make_graphed_callables(model, (x,))
        from tether._ffi import ffi, lib
        d = ffi.new("tether_torch_device_stats_t*"); d.struct_size = ffi.sizeof(d[0])
        assert lib.tether_torch_get_device_stats(0, d) == 0
        assert d.graph_pools >= 1, "forward and backward graphs captured into a tether graph pool"
        losses = []
        for _ in range(200):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(graphed(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])
        with torch.no_grad():
            assert torch.allclose(graphed(x), model(x), atol=1e-5)
    """)


def test_two_graphs_share_one_pool_and_captured_memory_is_never_reused_outside(run_python):
    run(run_python, """
        tether.torch.enable(tether.PoolResource(tether.CudaResource(0)))
        from tether._ffi import ffi, lib
        def graph_pools():
            d = ffi.new("tether_torch_device_stats_t*"); d.struct_size = ffi.sizeof(d[0])
            assert lib.tether_torch_get_device_stats(0, d) == 0
            return d.graph_pools
        n = 4 * MiB
        static_in = torch.ones(n, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                (static_in * 3 + 1)
        torch.cuda.current_stream().wait_stream(s)
        g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1):
            tmp = static_in * 3          # freed inside the capture: still the graph's memory
            tmp_ptr = tmp.data_ptr()
            out1 = tmp + 1
            del tmp
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2, pool=g1.pool()):
            out2 = out1 + 1
        assert graph_pools() == 1, "g2 shares g1's pool"
        # Allocations outside any capture (the capture stream's later ones too) never get it.
        outside = [torch.empty(n, device="cuda") for _ in range(16)]
        with torch.cuda.stream(s):
            outside += [torch.empty(n, device="cuda") for _ in range(4)]
        assert tmp_ptr not in {t.data_ptr() for t in outside}
        for t in outside:
            t.fill_(-7.0)
        static_in.fill_(2.0)
        g1.replay()
        g2.replay()
        torch.cuda.synchronize()
        assert bool((out1 == 7.0).all()) and bool((out2 == 8.0).all())
        assert all(bool((t == -7.0).all()) for t in outside), "graph replay wrote outside memory"
        del g1, g2
        gc.collect()
        assert graph_pools() == 0
        before = tether.torch.stats().outstanding_bytes
        del out1, out2
        gc.collect()
        torch.cuda.synchronize()
        assert tether.torch.stats().outstanding_bytes == before - 2 * n * 4
    """)


IPC_SCRIPT = """
import sys
import torch
import torch.multiprocessing as mp
import tether, tether.torch

def child(q, done):
    t = q.get()
    done.put(float(t.sum().item()))
    del t

if __name__ == "__main__":
    which = sys.argv[1]
    resource = tether.CudaResource(0) if which == "cuda" else tether.PoolResource(tether.CudaResource(0))
    stats = tether.StatisticsAdaptor(resource)
    pool = tether.torch.mem_pool(stats)
    with torch.cuda.use_mem_pool(pool):
        pad = torch.zeros(3 << 20, device="cuda")      # so the shared tensor is not at offset 0
        t = torch.full((1 << 20,), 3.0, device="cuda")
    assert stats.statistics().current_bytes > 0
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(q, done))
    p.start()
    q.put(t)
    got = done.get(timeout=120)
    p.join(60)
    del t
    print("IPC", which, got, float(1 << 20) * 3.0)
"""


@pytest.mark.parametrize("which", ["cuda", "pool"])
def test_mem_pool_tensors_cross_processes_with_torch_multiprocessing(tmp_path, which):
    # mem_pool() keeps PyTorch's caching allocator and so its CUDA IPC (cudaIpcGetMemHandle on
    # the segment tether handed it, offset from the driver allocation's base): right both for
    # segments that are whole driver allocations (CudaResource) and for pieces of a pool's chunk.
    script = tmp_path / "ipc.py"
    script.write_text(IPC_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), which], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("IPC "))
    _, _, got, want = line.split()
    assert float(got) == float(want), proc.stdout
