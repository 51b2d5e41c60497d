"""Spilling: a memory resource written in Python, a byte budget, and a
failure callback that moves cached data out of the way when the budget runs out.

    python spilling.py

* ``CallbackResource`` turns two Python functions into a tether resource - here
  a "device" of NumPy arrays with a 4 MiB budget;
* ``LoggingAdaptor`` records every allocate and free as a CSV line;
* ``FailureCallbackAdaptor`` calls ``spill`` when an allocation does not fit:
  it copies the oldest cached buffer to host bytes, frees it, and asks for a
  retry - so the program never sees the out-of-memory.
"""

from __future__ import annotations

import collections

import numpy as np

import tether

MiB = 1 << 20


class BudgetHeap:
    """A pretend device: NumPy arrays, at most `budget` bytes live."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.arrays: dict[int, np.ndarray] = {}

    def allocate(self, size: int, alignment: int, stream: int) -> int:
        if self.used + size > self.budget:
            raise MemoryError(f"{size} bytes do not fit in the {self.budget >> 20} MiB budget")
        a = np.empty(size + alignment, dtype=np.uint8)
        ptr = (a.ctypes.data + alignment - 1) // alignment * alignment
        self.arrays[ptr] = a
        self.used += size
        return ptr

    def deallocate(self, ptr: int, size: int, alignment: int, stream: int) -> None:
        del self.arrays[ptr]
        self.used -= size


def main() -> None:
    heap = BudgetHeap(4 * MiB)
    log_lines: list[str] = []
    cache: collections.OrderedDict[str, tether.Buffer] = collections.OrderedDict()
    spilled: dict[str, bytes] = {}

    def spill(size: int) -> bool:
        if not cache:
            return False  # nothing left to move: let the allocation fail
        key, buf = cache.popitem(last=False)
        spilled[key] = bytes(buf.memoryview())  # "copy to host", then free the device copy
        print(f"spilled {key} ({buf.size >> 20} MiB) to make room for {size >> 20} MiB")
        buf.close()
        return True

    device = tether.CallbackResource(heap.allocate, heap.deallocate)
    logged = tether.LoggingAdaptor(device, callback=log_lines.append)
    mr = tether.FailureCallbackAdaptor(logged, spill)

    for i in range(6):  # 6 x 1 MiB into a 4 MiB budget
        buf = tether.Buffer(MiB, resource=mr)
        np.asarray(buf)[:] = i
        cache[f"block{i}"] = buf

    assert sorted(spilled) == ["block0", "block1"]
    assert spilled["block0"] == bytes(MiB)  # the spilled data is intact
    print(f"{len(cache)} blocks on the device, {len(spilled)} spilled, {heap.used >> 20} MiB in use")
    failures = [line for line in log_lines[1:] if not line.endswith(",TETHER_OK")]
    print(f"{len(log_lines) - 1} events logged, {len(failures)} out-of-memory before spilling")

    for buf in cache.values():
        buf.close()
    for r in (mr, logged, device):
        r.close()
    print(f"bytes still in use: {heap.used}")


if __name__ == "__main__":
    main()
