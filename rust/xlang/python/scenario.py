"""Python half of the Rust <-> Python proof that both languages share one table.

    python scenario.py PATH/TO/libtether_xlang_python.so

Loads the Rust cdylib (src/lib.rs) with ctypes into a process that imported
the tether Python package, and checks, for every order in which the two
languages can drop what they hold (5 release steps: 120 orders):

1. Rust creates a pool and installs it as the current host resource;
   Python's tether.get_current_resource(tether.HOST) is that very pool, and a
   Python Buffer from the current resource comes from it;
2. Rust makes a buffer (filled with 7s) and hands it over; Python reads it
   and frees it;
3. Python installs a StatisticsAdaptor; Rust sees it as current and keeps a
   buffer from it, which Python's statistics count;
4. the five release steps run in the given order, each checked as it goes:
   nothing anyone still holds stops working;
5. the census (tether.debug.live_objects(), read by Python and by Rust) is
   back to where it was before step 1.

Exits 0 and prints one summary line, or raises AssertionError naming the order.
"""

from __future__ import annotations

import ctypes
import itertools
import sys

import tether
from tether import debug

FUNCTIONS = ["xlang_install_pool", "xlang_make_buffer", "xlang_current_host_handle",
             "xlang_keep_buffer_from_current", "xlang_drop_pool", "xlang_drop_buffers",
             "xlang_restore_host_slot", "xlang_live_objects"]


def load(path: str) -> ctypes.CDLL:
    xl = ctypes.CDLL(path)
    for name in FUNCTIONS:
        getattr(xl, name).restype = ctypes.c_size_t
    xl.xlang_make_buffer.argtypes = [ctypes.c_size_t, ctypes.c_uint8]
    xl.xlang_keep_buffer_from_current.argtypes = [ctypes.c_size_t]
    xl.xlang_last_error.restype = ctypes.c_char_p
    return xl


def call(xl: ctypes.CDLL, name: str, *args: int) -> int:
    value: int = getattr(xl, name)(*args)
    if value == 0:
        raise AssertionError(f"{name} failed in Rust: {xl.xlang_last_error().decode()}")
    return value


def scenario(xl: ctypes.CDLL, order: tuple[str, ...]) -> None:
    tether.get_current_resource(tether.HOST).close()  # the slot's default exists before we count
    baseline = debug.live_objects()
    assert xl.xlang_live_objects() == baseline, "Rust and Python read different censuses"

    # 1. Rust installs a pool; Python sees that very pool and allocates from it.
    pool_handle = call(xl, "xlang_install_pool")
    cur = tether.get_current_resource(tether.HOST)
    assert cur.handle == pool_handle and cur.kind == tether.ResourceKind.POOL, cur
    pb = tether.Buffer(100, device=tether.HOST)
    assert pb.resource.handle == pool_handle
    assert cur.pool_info().free_bytes < cur.pool_info().pool_size

    # 2. A Rust-made buffer, freed by Python.
    rb = tether.Buffer.from_handle(call(xl, "xlang_make_buffer", 64, 7), owned=True)
    assert rb.tobytes() == b"\x07" * 64 and rb.resource.handle == pool_handle
    rb.close()

    # 3. Python installs a statistics adaptor; Rust sees it and allocates from it.
    stats = tether.StatisticsAdaptor(tether.HostResource())
    was = tether.set_current_resource(stats, tether.HOST)
    assert was is not None and was.handle == pool_handle
    assert xl.xlang_current_host_handle() == stats.handle
    assert call(xl, "xlang_keep_buffer_from_current", 48) == stats.handle
    assert stats.statistics().current_count == 1 and stats.statistics().current_bytes == 48

    # 4. Release in the given order; what is still held keeps working.
    held = {"py_pool", "rust_pool", "rust_buffers", "py_stats", "table"}

    def step(name: str) -> None:
        if name == "py_pool":  # every Python reference to the Rust pool, and the buffer from it
            assert len(pb.tobytes()) == 100
            for obj in (cur, was, pb):
                obj.close()
        elif name == "rust_pool":
            call(xl, "xlang_drop_pool")
        elif name == "rust_buffers":
            call(xl, "xlang_drop_buffers")
        elif name == "py_stats":
            if "rust_buffers" in held:
                assert stats.statistics().current_count == 1
            stats.close()
        elif name == "table":  # Rust puts the original default back
            call(xl, "xlang_restore_host_slot")
        held.discard(name)
        if "py_pool" in held:  # the pool is alive while Python holds it, whoever dropped theirs
            assert cur.name == "pool" and len(pb.tobytes()) == 100
        assert debug.live_objects() > baseline or not held

    for name in order:
        step(name)

    # 5. Everything both languages made is gone; the census agrees in both.
    after = debug.live_objects()
    assert after == baseline, f"order {order}: census {after}, expected {baseline}"
    assert xl.xlang_live_objects() == baseline
    assert tether.get_current_resource(tether.HOST).kind == tether.ResourceKind.HOST


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    xl = load(argv[1])
    orders = list(itertools.permutations(["py_pool", "rust_pool", "rust_buffers", "py_stats", "table"]))
    for order in orders:
        scenario(xl, order)
    print(f"rust<->python: one table, {len(orders)} release orders, census back to "
          f"{debug.live_objects()} live handles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
