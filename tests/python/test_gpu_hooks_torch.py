"""PyTorch allocates through tether (tether.torch), on a real GPU.

PyTorch lets a process choose its global allocator once, so every scenario
runs in a fresh interpreter: allocations land in the tether resource
(statistics prove it), results are right, frees go to their origin after the
current resource changed, each thread's ``tether.using()`` routes its own
tensors, and out of memory becomes an exception with the pool still working.
"""

from __future__ import annotations

import textwrap

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("torch", reason="PyTorch is not installed")

PRELUDE = """
import gc, threading
import torch
import tether, tether.torch
MiB = 1 << 20
def settle():
    gc.collect()
    torch.cuda.synchronize()
"""


def run(run_python, body: str) -> None:
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(body) + "\nprint('SCENARIO OK')\n"
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0 and "SCENARIO OK" in proc.stdout, proc.stdout + proc.stderr


def test_training_step_allocates_from_the_tether_pool_and_gives_everything_back(run_python):
    run(run_python, """
        pool = tether.PoolResource(tether.CudaResource(0), initial_size="64 MiB")
        stats = tether.StatisticsAdaptor(pool)
        tether.torch.enable(stats)
        assert torch.cuda.memory.get_allocator_backend() == "pluggable"

        torch.manual_seed(0)
        def step(model, opt, x, y):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()                   # on PyTorch's autograd thread: a bound hook serves it too
            opt.step()
            return loss.item()

        def make():
            return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).cuda()

        # One throwaway step of the same shapes makes what PyTorch keeps for good: cuBLAS and
        # cuBLASLt workspaces, per thread (backward runs on the autograd thread) and shape class.
        m = make()
        step(m, torch.optim.SGD(m.parameters(), lr=0.05), torch.randn(512, 64, device="cuda"),
             torch.randn(512, 1, device="cuda"))
        del m
        settle()
        kept = stats.statistics().current_bytes
        assert 0 <= kept <= 512 * MiB, kept

        model = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x = torch.randn(512, 64, device="cuda")
        y = x[:, :1] * 2.0 - x[:, 1:2]
        losses = [step(model, opt, x, y) for _ in range(200)]
        assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])
        s = stats.statistics()
        assert s.current_bytes >= kept + 512 * 64 * 4, s   # x alone lives in the pool
        assert s.total_count > 1000, s                       # every step allocated through tether
        assert tether.torch.stats().outstanding_bytes == s.current_bytes

        del model, opt, x, y
        settle()
        assert stats.statistics().current_bytes == kept, (stats.statistics(), kept)
        t = tether.torch.stats()
        assert t.outstanding_bytes == kept and t.failures == 0 and t.unknown_frees == 0, t

        try:
            tether.torch.enable(stats)
        except RuntimeError as e:
            assert "already initialised" in str(e), e
        else:
            raise AssertionError("a second enable() must fail clearly")
        try:
            tether.torch.mem_pool(stats)
        except RuntimeError as e:
            assert "enable()" in str(e), e
        else:
            raise AssertionError("mem_pool() cannot work once the global allocator is pluggable")
    """)


def test_resource_none_follows_the_table_and_frees_go_to_their_origin(run_python):
    run(run_python, """
        tether.torch.enable()              # the current resource at each allocation
        a = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0)))
        b = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0)))
        tether.set_current_resource(a, 0)
        t = torch.full((MiB,), 7, dtype=torch.uint8, device="cuda")
        assert a.statistics().current_bytes == MiB
        tether.set_current_resource(b, 0)  # swapped while t is alive
        u = torch.ones(1000, device="cuda")
        assert b.statistics().current_bytes == 4000
        assert int(t.sum().item()) == 7 * MiB
        del t
        settle()
        assert a.statistics().current_bytes == 0, "t was freed into a, where it came from"
        assert b.statistics().current_bytes == 4000   # t.sum()'s temporaries came from b and went back
        a.close()                          # the application lets go of a: u is b's anyway
        del u
        settle()
        assert b.statistics().current_bytes == 0
        assert tether.torch.stats().outstanding_count == 0
    """)


def test_using_in_two_threads_routes_each_threads_tensors_to_its_own_pool(run_python):
    run(run_python, """
        tether.torch.enable()
        process_default = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0)))
        tether.set_current_resource(process_default, 0)
        pools = [tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0))) for _ in range(2)]
        barrier = threading.Barrier(2)
        errors = []
        kept = [None, None]

        def work(i):
            try:
                torch.cuda.set_device(0)
                with tether.using(pools[i]):
                    barrier.wait()              # both blocks are open at once
                    ts = [torch.empty((i + 1) * MiB, dtype=torch.uint8, device="cuda") for _ in range(5)]
                    barrier.wait()
                kept[i] = ts
                outside = torch.empty(4096, dtype=torch.uint8, device="cuda")  # after the block: the process slot
                del outside
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for th in threads: th.start()
        for th in threads: th.join()
        assert not errors, errors
        for i in range(2):
            s = pools[i].statistics()
            assert s.current_bytes == 5 * (i + 1) * MiB and s.total_count == 5, (i, s)
        assert process_default.statistics().total_count == 2   # the two 'outside' tensors
        cur = tether.get_current_resource(0)
        assert cur == process_default, "using() blocks left the process slot alone"
        cur.close()
        kept.clear()
        settle()
        assert all(p.statistics().current_bytes == 0 for p in pools)
    """)


def test_out_of_memory_raises_and_the_pool_keeps_working(run_python):
    run(run_python, """
        small = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0), maximum_size="64 MiB"))
        tether.torch.enable(small)
        keep = torch.ones(MiB, device="cuda")
        try:
            torch.empty(128 * MiB, dtype=torch.uint8, device="cuda")
        except RuntimeError as e:
            assert "out of memory" in str(e), e
        else:
            raise AssertionError("no exception for 128 MiB from a 64 MiB pool")
        assert tether.torch.stats().failures == 1
        assert small.statistics().current_bytes == 4 * MiB
        more = torch.ones(MiB, device="cuda") * 2
        assert float((keep + more).sum().item()) == 3.0 * MiB
    """)


def test_mem_pool_routes_a_block_and_out_of_memory_is_torch_oom(run_python):
    run(run_python, """
        stats = tether.StatisticsAdaptor(tether.PoolResource(tether.CudaResource(0), maximum_size="256 MiB"))
        pool = tether.torch.mem_pool(stats)
        before = torch.empty(1024, device="cuda")          # PyTorch's own allocator
        assert stats.statistics().total_count == 0
        with torch.cuda.use_mem_pool(pool):
            t = torch.arange(MiB, device="cuda", dtype=torch.float32)
            assert stats.statistics().current_bytes >= 4 * MiB   # a segment from tether holds t
            try:
                torch.empty(1024 * MiB, dtype=torch.uint8, device="cuda")
            except torch.OutOfMemoryError:
                pass
            else:
                raise AssertionError("no torch.OutOfMemoryError beyond maximum_size")
            u = torch.ones(MiB, device="cuda")
        assert float((t + u).sum().item()) == float(MiB) * (MiB - 1) / 2 + MiB
        outside = torch.empty(MiB, device="cuda")
        n = stats.statistics().total_count
        del outside
        assert stats.statistics().total_count == n
    """)
