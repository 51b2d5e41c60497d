"""PyTorch, CuPy and Numba share one tether pool on the GPU.

1. one stream-ordered pool on device 0, and one statistics adaptor over it per
   library, so each library's share can be seen;
2. each library's hook installed (tether.torch, tether.cupy, tether.numba);
3. real work in each: a small PyTorch training step (a regression that must
   converge), a CuPy reduction, a Numba kernel; results checked;
4. what each library holds while its data is alive, then everything dropped:
   every adaptor back to 0 bytes - every free went back to where it came from.

Needs a CUDA GPU, PyTorch, CuPy and numba-cuda.
"""

from __future__ import annotations

import gc
import sys

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda's kernel compiler still overloads np.row_stack,
    np.row_stack = np.vstack      # which NumPy 2.5 removed; without this no Numba kernel compiles

import tether
import tether.cupy
import tether.numba
import tether.torch

MiB = 1 << 20


def mib(n: int) -> str:
    return f"{n / MiB:8.2f} MiB"


def main() -> int:
    if not tether.cuda_available():
        print("this example needs a CUDA GPU")
        return 0
    pool = tether.PoolResource(tether.AsyncResource(0), initial_size="256 MiB")
    per_library = {name: tether.StatisticsAdaptor(pool) for name in ("torch", "cupy", "numba")}

    # Hooks first: PyTorch and Numba let a process choose their allocator once.
    tether.torch.enable(per_library["torch"])
    tether.cupy.enable(per_library["cupy"])
    tether.numba.enable(per_library["numba"])

    import cupy
    import torch
    from numba import cuda

    def make_model():
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()

    # PyTorch keeps some memory for good once it has run matrix products: cuBLAS and cuBLASLt
    # workspaces, per thread (backward runs on PyTorch's autograd thread) and per kind of
    # product. A throwaway forward and backward pass of the same shapes shows how much.
    throwaway = make_model()
    throwaway(torch.randn(4096, 16, device="cuda")).sum().backward()
    del throwaway
    gc.collect()
    torch.cuda.synchronize()
    torch_kept = per_library["torch"].statistics().current_bytes

    # PyTorch: fit y = 2 x0 - x1 with a small MLP.
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(4096, 16, device="cuda")
    y = 2 * x[:, :1] - x[:, 1:2]
    first = last = None
    for _ in range(300):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    last = loss.item()
    assert last < 0.05 * first, (first, last)
    print(f"torch: loss {first:.4f} -> {last:.5f}")

    # CuPy: a reduction whose answer is known.
    n = 10_000_000
    a = cupy.arange(n, dtype=cupy.float64)
    total = float(a.sum())
    assert total == n * (n - 1) / 2, total
    print(f"cupy : sum(0..{n - 1}) = {total:.0f}")

    # Numba: saxpy in a kernel of our own.
    @cuda.jit
    def saxpy(alpha, xs, ys, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = alpha * xs[i] + ys[i]

    m = 1 << 20
    xs = cuda.to_device(np.arange(m, dtype=np.float32))
    ys = cuda.to_device(np.ones(m, dtype=np.float32))
    out = cuda.device_array(m, dtype=np.float32)
    saxpy[(m + 255) // 256, 256](np.float32(3.0), xs, ys, out)
    got = out.copy_to_host()
    assert np.array_equal(got, 3.0 * np.arange(m, dtype=np.float32) + 1.0)
    print(f"numba: saxpy over {m} floats correct")

    print("held in the shared pool, per library:")
    for name, stats in per_library.items():
        s = stats.statistics()
        print(f"  {name:6} {mib(s.current_bytes)} now, {mib(s.peak_bytes)} at peak, {s.total_count} allocations")
        assert s.total_count > 0, f"{name} did not allocate through tether"
    print(f"pool: {mib(pool.pool_info().pool_size)} from the device")

    del model, opt, x, y, loss, a, xs, ys, out
    gc.collect()
    cuda.current_context().deallocations.clear()  # Numba frees in batches; flush them now
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    left = {name: stats.statistics().current_bytes for name, stats in per_library.items()}
    left["torch"] -= torch_kept
    print("after dropping everything:", ", ".join(f"{k} {v} bytes" for k, v in left.items()),
          f"(besides PyTorch's {mib(torch_kept).strip()} of cuBLAS workspaces)")
    assert all(v == 0 for v in left.values()), left
    assert tether.torch.stats().outstanding_bytes == torch_kept
    print("all frees returned to their origin")
    tether.cupy.disable()
    return 0


if __name__ == "__main__":
    sys.exit(main())
