"""torch.distributed's NCCL backend on tensors that PyTorch allocated through tether.

One process, world size 1 (one GPU is enough): ``all_reduce`` and
``broadcast`` in a loop on tensors from ``tether.torch.enable`` over a pool,
with the results checked, and a statistics adaptor under the pool proving
that the tensors came from tether. NCCL runs on its own stream and tells the
allocator so: with ``TORCH_NCCL_AVOID_RECORD_STREAMS=0`` through
``Tensor.record_stream`` on every input, with ``=1`` by stashing the inputs
until the work is waited for. Both are run: an input is dropped while a
collective that reads it is still queued behind large ones on NCCL's stream,
and its memory is overwritten at once on the current stream; the collective's
output must still hold the input's values.

Each scenario runs in a fresh interpreter (PyTorch chooses its allocator once,
before the first CUDA allocation) with NVLink multicast off.
"""

from __future__ import annotations

import textwrap

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="PyTorch is not installed")

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

SCENARIO = """
import gc, os, sys
import torch
import torch.distributed as dist
import tether, tether.torch

pool = tether.PoolResource(tether.CudaResource(0))
stats = tether.StatisticsAdaptor(pool)
tether.torch.enable(stats)
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="file://" + STORE, rank=0, world_size=1)
assert dist.get_backend() == "nccl"
MiB = 1 << 20

def pattern(n, i):
    return (torch.arange(n, device="cuda", dtype=torch.float32) * 0.5 + i) % 1000.0

before = stats.statistics().total_count
for i in range(60):
    n = 1000 + 7919 * i                       # a new size every step
    t = pattern(n, i)
    expected = t.clone()
    held = stats.statistics().current_bytes
    assert held >= 2 * n * 4, (held, n)       # t and expected live in the tether pool
    dist.all_reduce(t, op=dist.ReduceOp.SUM)  # world size 1: the sum is the tensor itself
    assert torch.equal(t, expected), i
    w = dist.all_reduce(t, op=dist.ReduceOp.MAX, async_op=True)
    w.wait()
    assert torch.equal(t, expected), i
    b = torch.empty_like(t) if i % 2 else t.clone()
    if i % 2:
        b.copy_(expected)
    w = dist.broadcast(b, src=0, async_op=bool(i % 3))
    if w is not None:
        w.wait()
    assert torch.equal(b, expected), i
    del t, b, expected
grew = stats.statistics().total_count - before
assert grew >= 60 * 3, grew                   # every step allocated through tether

# The input dropped while its collective waits behind large ones on NCCL's stream.
big_in = torch.ones(256 * MiB // 4, device="cuda")
big_out = torch.empty(big_in.numel(), device="cuda")
bad = 0
for i in range(20):
    queued = [dist.all_gather_into_tensor(big_out, big_in, async_op=True) for _ in range(6)]
    inp = pattern(1 << 20, i)
    out = torch.empty_like(inp)
    work = dist.all_gather_into_tensor(out, inp, async_op=True)
    expected = pattern(1 << 20, i)
    del inp                                   # freed on the current stream while NCCL will read it
    scribble = [torch.full((1 << 20,), -1.0, device="cuda") for _ in range(4)]
    work.wait()
    for q in queued:
        q.wait()
    torch.cuda.synchronize()
    if not torch.equal(out, expected):
        bad += 1
    del out, scribble, expected
assert bad == 0, f"{bad} of 20 collectives read an input whose memory was handed out again"

s = stats.statistics()
t_stats = tether.torch.stats()
assert t_stats.outstanding_bytes == s.current_bytes, (t_stats, s)
assert t_stats.failures == 0 and t_stats.unknown_frees == 0, t_stats
dist.destroy_process_group()
print(f"NCCL OK: {s.total_count} allocations through tether ({s.total_bytes} bytes), peak {s.peak_bytes}")
"""


@pytest.mark.parametrize("avoid_record_streams", ["0", "1"])
def test_nccl_collectives_on_tether_tensors(run_python, tmp_path, avoid_record_streams):
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_nccl_available()):
        pytest.skip("this PyTorch has no NCCL backend")
    code = f"STORE = {str(tmp_path / 'store')!r}\n" + textwrap.dedent(SCENARIO)
    env = dict(NO_MULTICAST, MASTER_ADDR="127.0.0.1", TORCH_NCCL_AVOID_RECORD_STREAMS=avoid_record_streams)
    proc = run_python(code, env=env, timeout=300)
    assert proc.returncode == 0 and "NCCL OK" in proc.stdout, proc.stdout + proc.stderr
