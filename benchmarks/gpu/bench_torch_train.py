"""Training a transformer encoder with a new sequence length every step, through
four CUDA allocators, compared in one run (issue #20, section 4).

A different sequence length every step is the pattern that fragments caching
allocators: each step frees and asks for blocks of sizes the last step did not
use. Configurations (each run in its own interpreter: PyTorch chooses its
allocator once, before the first CUDA allocation):

  caching   PyTorch's caching allocator (the reference of every ratio)
  async     PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  tether    tether.torch.enable(tether.PoolResource(tether.CudaResource(0))): a pool, default options
  rmm       rmm_torch_allocator over rmm.mr.PoolMemoryResource(CudaMemoryResource(), 256 MiB initial)

Sizes (batch 32, tokens from a vocabulary of 8192, next-token cross-entropy, AdamW):

  small     d_model 256, 4 heads, 4 layers, ffn 1024, sequence length 32..256
  medium    d_model 512, 8 heads, 6 layers, ffn 2048, sequence length 64..512

Every run uses the same seed, the same model initialisation (made on the CPU,
then moved) and the same data (per-step CPU generators) in deterministic mode,
so the per-step losses are comparable bit for bit: "identical" means every
step's loss equals the first caching run's exactly; otherwise the largest
difference and the first step that differs are printed. Each configuration is
repeated (--repeats, rounds), the order of configurations rotating from round
to round; a run's step time is the median over its timed steps (after
--warmup untimed ones), the table shows the median over its runs. "device
used" is total minus free from torch.cuda.mem_get_info() at the end of the
run, with the model, optimizer state and every allocator's cache still held
(the CUDA context and cuBLAS workspaces are in every row alike).

Attention runs on PyTorch's math path (matrix products and softmax): the
fused kernels' backward passes accumulate with atomics, so even two runs of one
allocator would differ in the last bits; with --repeats 2 or more the caching
row's own "losses identical" says whether the runs are reproducible at all.

A second table: the cost of ``t.record_stream(side); del t`` against ``del t``
alone for a 1 MiB tensor (median ns over repetitions), per allocator (caching,
tether, async), measured in the first round's first-size run after training.

Targets against the caching allocator (tether row): step time <= 1.0x, device
memory <= 1.05x, identical losses. Never fails on speed.

usage: python bench_torch_train.py [--sizes small,medium] [--configs caching,async,tether,rmm]
           [--steps 40] [--warmup 8] [--repeats 2] [--json FILE] [--selftest]
Exits 0 without a GPU or PyTorch (prints why). --selftest checks the
orchestration (order, medians, comparison, table) and, where PyTorch is
installed, one training step on the CPU; no GPU needed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Any

CONFIGS = ("caching", "async", "tether", "rmm")
RECORD_CONFIGS = ("caching", "tether", "async")
SIZES: dict[str, dict[str, int]] = {
    "small": {"d_model": 256, "nhead": 4, "layers": 4, "ffn": 1024, "batch": 32, "min_len": 32, "max_len": 256},
    "medium": {"d_model": 512, "nhead": 8, "layers": 6, "ffn": 2048, "batch": 32, "min_len": 64, "max_len": 512},
}
VOCAB = 8192
SEED = 1234
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MiB = 1 << 20


# ---- the worker: one configuration, one size, in this interpreter --------------------------------

def install_allocator(config: str) -> Any:
    """Make `config` PyTorch's allocator; returns what must stay alive."""
    import torch
    if config in ("caching", "async"):
        return None
    if config == "tether":
        import tether
        import tether.torch
        pool = tether.PoolResource(tether.CudaResource(0))
        tether.torch.enable(pool)
        return pool
    if config == "rmm":
        import rmm
        import rmm.mr
        from rmm.allocators.torch import rmm_torch_allocator
        mr = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=256 * MiB)
        rmm.mr.set_current_device_resource(mr)
        torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
        return mr
    raise ValueError(f"unknown configuration {config!r}")


def make_model(size: str, device: str) -> Any:
    import torch
    p = SIZES[size]
    torch.manual_seed(SEED)

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, p["d_model"])
            self.pos = torch.nn.Parameter(torch.randn(p["max_len"], p["d_model"]) * 0.02)
            layer = torch.nn.TransformerEncoderLayer(p["d_model"], p["nhead"], p["ffn"], dropout=0.1,
                                                     batch_first=True, norm_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, p["layers"], enable_nested_tensor=False)
            self.head = torch.nn.Linear(p["d_model"], VOCAB)

        def forward(self, tokens: Any) -> Any:
            h = self.embed(tokens) + self.pos[: tokens.shape[1]]
            return self.head(self.encoder(h))

    return Encoder().to(device)     # made on the CPU from the seed: the same weights in every run


def lengths(size: str, steps: int) -> list[int]:
    import torch
    p = SIZES[size]
    g = torch.Generator().manual_seed(SEED)
    return torch.randint(p["min_len"], p["max_len"] + 1, (steps,), generator=g).tolist()


def batch(size: str, step: int, length: int) -> Any:
    import torch
    g = torch.Generator().manual_seed(SEED + 1 + step)
    return torch.randint(0, VOCAB, (SIZES[size]["batch"], length + 1), generator=g)


def train(size: str, steps: int, warmup: int, device: str) -> dict[str, Any]:
    """Train `steps` steps; returns the per-step losses and the timed steps' seconds."""
    import torch
    model = make_model(size, device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    torch.manual_seed(SEED)                     # dropout's generator, the same in every run
    if device == "cuda":
        torch.cuda.manual_seed(SEED)
    losses: list[float] = []
    times: list[float] = []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for step, n in enumerate(lengths(size, steps)):
        data = batch(size, step, n).to(device)
        sync()
        t0 = time.perf_counter()
        logits = model(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()                     # synchronises: the step is done
        if step >= warmup:
            times.append(time.perf_counter() - t0)
        losses.append(value)
        del data, logits, loss
    return {"losses": losses, "times": times, "keep": (model, opt)}


def worker(config: str, size: str, steps: int, warmup: int, record: tuple[int, int] | None) -> dict[str, Any]:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    keep = install_allocator(config)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    # Attention as plain matrix products and softmax: the fused kernels' backward passes
    # (memory-efficient attention) accumulate with atomics, so two runs of one allocator
    # would already differ in the last bits. The math path also allocates more, and
    # sizes that change with every sequence length: what this benchmark is about.
    with sdpa_kernel(SDPBackend.MATH):
        r = train(size, steps, warmup, "cuda")
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    backend = torch.cuda.memory.get_allocator_backend()
    del r["keep"]
    out = {"config": config, "size": size, "backend": backend, "losses": r["losses"],
           "step_s": statistics.median(r["times"]) if r["times"] else float("nan"),
           "used_bytes": total - free}
    if record is not None:
        out["record_stream"] = record_stream_cost(*record)
    del keep
    return out


def record_stream_cost(iters: int, reps: int) -> dict[str, float]:
    """Median ns of (empty 1 MiB, del) and of (empty 1 MiB, record_stream(side), del)."""
    import torch
    side = torch.cuda.Stream()
    n = MiB

    def plain() -> None:
        for _ in range(iters):
            t = torch.empty(n, dtype=torch.uint8, device="cuda")
            del t

    def recorded() -> None:
        for _ in range(iters):
            t = torch.empty(n, dtype=torch.uint8, device="cuda")
            t.record_stream(side)
            del t

    out: dict[str, list[float]] = {"plain": [], "recorded": []}
    plain()
    recorded()
    torch.cuda.synchronize()
    for _ in range(reps):
        for name, fn in (("plain", plain), ("recorded", recorded)):
            t0 = time.perf_counter_ns()
            fn()
            out[name].append((time.perf_counter_ns() - t0) / iters)
            torch.cuda.synchronize()
    return {"plain_ns": statistics.median(out["plain"]), "recorded_ns": statistics.median(out["recorded"])}


# ---- the orchestration: subprocesses, rounds, the tables ----------------------------------------

def child_env(config: str) -> dict[str, str]:
    env = dict(os.environ, **NO_MULTICAST)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"   # deterministic cuBLAS, the same in every row
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    if config == "async":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(args: list[str], config: str, timeout: float) -> dict[str, Any] | str:
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), *args], capture_output=True, text=True,
                              timeout=timeout, env=child_env(config))
    except subprocess.TimeoutExpired:
        return f"not measured: timed out after {timeout:.0f} s"
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])   # type: ignore[no-any-return]
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return f"not measured (exit {proc.returncode}): {tail}"


def round_order(configs: list[str], round_index: int) -> list[str]:
    """Odd rounds run the even round before them backwards; each pair of rounds starts one
    configuration later, so no configuration is always first (cold machine) or always after
    the same neighbour."""
    k = (round_index // 2) % len(configs)
    order = configs[k:] + configs[:k]
    return order[::-1] if round_index % 2 else order


def compare_losses(ref: list[float] | None, losses: list[float]) -> str:
    if ref is None:
        return "n/a"
    if len(ref) != len(losses):
        return f"no ({len(losses)} steps vs {len(ref)})"
    diffs = [abs(a - b) for a, b in zip(ref, losses)]
    if all(a == b for a, b in zip(ref, losses)):
        return "yes"
    first = next(i for i, d in enumerate(diffs) if d != 0.0 or math.isnan(d))
    return f"no (max |d| {max(diffs):.3g}, first at step {first})"


def summarize(size: str, configs: list[str], runs: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """One row per configuration: medians over its runs, ratios to caching, loss agreement."""
    ok = {c: [r for r in runs.get(c, []) if isinstance(r, dict)] for c in configs}
    ref_runs = ok.get("caching") or []
    ref_losses = ref_runs[0]["losses"] if ref_runs else None
    ref_step = statistics.median(r["step_s"] for r in ref_runs) if ref_runs else float("nan")
    ref_used = statistics.median(r["used_bytes"] for r in ref_runs) if ref_runs else float("nan")
    rows = []
    for c in configs:
        if not ok[c]:
            errors = [r for r in runs.get(c, []) if isinstance(r, str)]
            rows.append({"size": size, "config": c, "error": errors[0] if errors else "not run"})
            continue
        step = statistics.median(r["step_s"] for r in ok[c])
        used = statistics.median(r["used_bytes"] for r in ok[c])
        verdicts = [compare_losses(ref_losses, r["losses"]) for r in ok[c]]
        same = "yes" if all(v == "yes" for v in verdicts) else next(v for v in verdicts if v != "yes")
        rows.append({"size": size, "config": c, "runs": len(ok[c]), "backend": ok[c][0]["backend"],
                     "step_ms": step * 1e3, "step_ratio": step / ref_step, "used_mib": used / MiB,
                     "used_ratio": used / ref_used, "losses_identical": same,
                     "final_loss": ok[c][0]["losses"][-1] if ok[c][0]["losses"] else float("nan")})
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'size':7} {'config':8} {'runs':>4} {'step ms':>9} {'vs caching':>10} {'used MiB':>10} "
          f"{'vs caching':>10}  losses identical")
    for r in rows:
        if "error" in r:
            print(f"{r['size']:7} {r['config']:8}  {r['error']}")
            continue
        print(f"{r['size']:7} {r['config']:8} {r['runs']:>4} {r['step_ms']:>9.2f} {r['step_ratio']:>9.3f}x "
              f"{r['used_mib']:>10.0f} {r['used_ratio']:>9.3f}x  {r['losses_identical']}")


def print_targets(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if r["config"] != "tether" or "error" in r:
            continue
        verdict = ("met" if r["step_ratio"] <= 1.0 and r["used_ratio"] <= 1.05 and r["losses_identical"] == "yes"
                   else "not met")
        print(f"target (issue 20) {r['size']}: tether step {r['step_ratio']:.3f}x <= 1.0x, "
              f"memory {r['used_ratio']:.3f}x <= 1.05x, losses identical {r['losses_identical']}: {verdict}")


def print_record_stream(results: list[Any]) -> None:
    print("record_stream + free of a 1 MiB tensor (median ns per iteration; 'cost' = recorded - plain)")
    print(f"{'config':8} {'alloc+free':>11} {'alloc+record_stream+free':>25} {'cost':>9}")
    for r in results:
        if isinstance(r, str):
            print(f"  {r}")
            continue
        print(f"{r['config']:8} {r['plain_ns']:>11.0f} {r['recorded_ns']:>25.0f} {r['recorded_ns'] - r['plain_ns']:>9.0f}")


def selftest() -> int:
    """The orchestration on synthetic results; one CPU training step where PyTorch is installed."""
    assert round_order(list(CONFIGS), 0) == ["caching", "async", "tether", "rmm"]
    assert round_order(list(CONFIGS), 1) == ["rmm", "tether", "async", "caching"]
    firsts = {round_order(list(CONFIGS), r)[0] for r in range(8)}
    assert firsts == set(CONFIGS), firsts
    assert compare_losses([1.0, 2.0], [1.0, 2.0]) == "yes"
    assert compare_losses([1.0, 2.0], [1.0, 2.5]).startswith("no (max |d| 0.5, first at step 1")
    fake = {
        "caching": [{"step_s": 0.010, "used_bytes": 1000 * MiB, "losses": [9.0, 8.5], "backend": "native"},
                    {"step_s": 0.012, "used_bytes": 1000 * MiB, "losses": [9.0, 8.5], "backend": "native"}],
        "tether": [{"step_s": 0.011, "used_bytes": 1100 * MiB, "losses": [9.0, 8.5], "backend": "pluggable"}],
        "rmm": ["not measured (exit 1): ModuleNotFoundError: No module named 'rmm'"],
    }
    rows = summarize("small", ["caching", "tether", "rmm"], fake)
    assert rows[0]["step_ratio"] == 1.0 and rows[0]["losses_identical"] == "yes", rows[0]
    assert abs(rows[1]["step_ratio"] - 1.0) < 1e-9 and abs(rows[1]["used_ratio"] - 1.1) < 1e-9, rows[1]
    assert "error" in rows[2], rows[2]
    print_table(rows)
    print_targets(rows)
    print_record_stream([{"config": "caching", "plain_ns": 2000.0, "recorded_ns": 3500.0}, "not measured: x"])
    try:
        import torch  # noqa: F401
    except ImportError:
        print("selftest: orchestration ok; PyTorch is not installed, no training step run")
        return 0
    a = train("small", 2, 0, "cpu")
    b = train("small", 2, 0, "cpu")
    assert len(a["losses"]) == 2 and all(math.isfinite(x) for x in a["losses"]), a["losses"]
    assert a["losses"] == b["losses"], (a["losses"], b["losses"])
    print(f"selftest: orchestration ok; two CPU steps of 'small', losses {a['losses']} (identical twice)")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--steps", type=int, default=40, help="training steps per run (default 40)")
    ap.add_argument("--warmup", type=int, default=8, help="untimed steps at the start of each run (default 8)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each configuration (rounds; default 2)")
    ap.add_argument("--record-iters", type=int, default=20000)
    ap.add_argument("--record-reps", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=120, help="seconds per run (default 120)")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("CONFIG", "SIZE"), help=argparse.SUPPRESS)
    ap.add_argument("--record", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if a.worker:
        record = (a.record_iters, a.record_reps) if a.record else None
        print("RESULT " + json.dumps(worker(a.worker[0], a.worker[1], a.steps, a.warmup, record)))
        return 0

    try:
        import torch
    except ImportError:
        print("bench_torch_train: PyTorch is not installed; skipped")
        return 0
    if not torch.cuda.is_available():           # does not initialise PyTorch's allocator
        print("bench_torch_train: no CUDA device; skipped")
        return 0
    configs = [c for c in a.configs.split(",") if c]
    sizes = [s for s in a.sizes.split(",") if s]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r} (choose from {', '.join(CONFIGS)})")
    for s in sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s!r} (choose from {', '.join(SIZES)})")
    if "caching" not in configs:
        configs.insert(0, "caching")             # the reference
    t_start = time.perf_counter()
    print(f"bench_torch_train: {a.steps} steps ({a.warmup} untimed), {a.repeats} round(s), "
          f"sizes {', '.join(sizes)}, torch {torch.__version__}")
    all_rows = []
    rs: list[Any] = []
    for size in sizes:
        runs: dict[str, list[Any]] = {c: [] for c in configs}
        for rnd in range(a.repeats):
            for c in round_order(configs, rnd):
                # the first round of the first size also measures record_stream, after its training
                extra = ["--record", "--record-iters", str(a.record_iters), "--record-reps", str(a.record_reps)] \
                    if rnd == 0 and size == sizes[0] and c in RECORD_CONFIGS else []
                r = run_child(["--worker", c, size, "--steps", str(a.steps), "--warmup", str(a.warmup), *extra],
                              c, a.timeout)
                runs[c].append(r)
                if extra:
                    rs.append({"config": c, **r["record_stream"]} if isinstance(r, dict) else r)
                desc = r if isinstance(r, str) else f"{r['step_s'] * 1e3:.2f} ms/step, {r['used_bytes'] / MiB:.0f} MiB"
                print(f"  round {rnd + 1} {size:6} {c:8} {desc}", flush=True)
        rows = summarize(size, configs, runs)
        losses = {c: [r["losses"] for r in runs[c] if isinstance(r, dict)][:1] for c in configs}
        for c in configs:
            if losses[c]:
                shown = ", ".join(f"{x:.6f}" for x in losses[c][0][:3])
                print(f"  losses {size} {c}: {shown}, ... last {losses[c][0][-1]:.9g}")
        all_rows.extend(rows)
    print("bench_torch_train: median step time over runs (each the median of its timed steps), device used at the end")
    print_table(all_rows)
    print_targets(all_rows)
    print_record_stream(rs)
    print(f"bench_torch_train: {time.perf_counter() - t_start:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"train": all_rows, "record_stream": [r for r in rs if isinstance(r, dict)]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
