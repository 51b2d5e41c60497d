"""Record an application's allocations with a LoggingAdaptor, then replay the log
against other resource stacks with the ``tether replay`` command.

    python record_and_replay.py [--device N] [--out DIR]

Two threads, each on its own stream (on a GPU), allocate and free buffers of
random sizes through one logged pool. The log is then replayed against the pool
it was recorded on and against a plain (unpooled) resource, and ``--plot`` draws
bytes live and bytes held from upstream over the replay. Runs on the host
without a GPU.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading

import tether


def streams(device: int, n: int) -> list[object]:
    """n CUDA streams (cuda.core or CuPy), or default streams on the host."""
    if device == tether.HOST:
        return [None] * n
    try:
        from cuda.core import Device
        d = Device(device)
        d.set_current()
        return [d.create_stream() for _ in range(n)]
    except Exception:  # noqa: BLE001
        import cupy
        with cupy.cuda.Device(device):
            return [cupy.cuda.Stream(non_blocking=True) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=tether.HOST, help="CUDA device (default: host memory)")
    ap.add_argument("--out", default=None, help="directory for log.csv and replay.png (default: a temporary one)")
    ap.add_argument("--allocations", type=int, default=4000, help="allocations per thread")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="tether-replay-")
    os.makedirs(out, exist_ok=True)
    log_path = os.path.join(out, "log.csv")

    leaf = "host" if args.device == tether.HOST else f"cuda(device={args.device})"
    pool = tether.from_spec(f"pool({leaf})")
    logged = tether.LoggingAdaptor(pool, path=log_path)
    pool.close()
    ss = streams(args.device, 2)

    def work(seed: int, stream: object) -> None:
        rng = random.Random(seed)
        live: list[tether.Buffer] = []
        for _ in range(args.allocations):
            if live and (len(live) > 200 or rng.random() < 0.4):
                live.pop(rng.randrange(len(live))).close()
            else:
                live.append(tether.Buffer(int(2 ** rng.uniform(8, 20)), resource=logged, stream=stream))
        for b in live:
            b.close()

    threads = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate(ss)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logged.flush()
    logged.close()
    with open(log_path) as f:
        lines = sum(1 for _ in f) - 1
    print(f"recorded {lines} events from 2 threads into {log_path}")

    cmd = [sys.executable, "-m", "tether", "replay", log_path, "--spec", f"pool({leaf})", "--compare", leaf]
    try:
        import matplotlib  # noqa: F401
        cmd += ["--plot", os.path.join(out, "replay.png")]
    except ImportError:
        print("(matplotlib is not installed: no plot)")
    print("$ tether replay " + " ".join(cmd[4:]))
    sys.stdout.flush()
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
