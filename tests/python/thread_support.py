"""run_threads: the one way the Python tests start a group of threads.

Every thread runs ``target(i)`` for its index ``i``; they start together (a
barrier, so the calls really overlap inside libtether), every one is joined,
and the first exception any of them raised is re-raised in the calling thread
with the others attached as notes, so a failing thread fails the test instead
of vanishing into ``threading.excepthook``.
"""

from __future__ import annotations

import threading
from typing import Callable

THREADS = 8


def run_threads(target: Callable[[int], object], n: int = THREADS) -> None:
    """Run ``target(0) .. target(n - 1)`` on ``n`` threads at once; re-raise the first failure."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n)

    def wrapped(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,), name=f"run_threads-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = errors[0]
        for other in errors[1:]:
            if hasattr(first, "add_note"):  # Python >= 3.11
                first.add_note(f"another thread also raised: {other!r}")
        raise first
