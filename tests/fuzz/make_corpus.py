#!/usr/bin/env python3
"""Write the seed corpus of tests/fuzz/fuzz_capi.cpp into tests/fuzz/corpus/.

Each seed is a short op stream: one op byte (the Op enum of fuzz_capi.cpp, in
the same order as OPS below) followed by the argument bytes that op reads.
Between them the seeds reach every op, hostile ones included; libFuzzer grows
the corpus from here. Rerun after changing the op encoding:

    python3 tests/fuzz/make_corpus.py        (replaces corpus/seed-*)
"""
import pathlib
import struct

OPS = ["HOST", "POOL", "STATS", "RETAIN", "RELEASE", "ALLOC", "FREE", "BUF_CREATE", "BUF_REF",
       "BUF_RESIZE", "BUF_WRITE", "BUF_READ", "BUF_COPY", "GET", "SET", "SET_IF_UNSET", "PUSH",
       "POP", "LOCK", "QUERY", "FORGED", "STALE", "FOREIGN", "DOUBLE", "CROSS", "SPEC"]
OP = {name: i for i, name in enumerate(OPS)}


def u16(v):
    return list(struct.pack("<H", v))


def u64(v):
    return list(struct.pack("<Q", v))


def prog(*steps):
    out = []
    for name, *args in steps:
        out.append(OP[name])
        for a in args:
            out.extend(a if isinstance(a, list) else [a])
    return bytes(out)


host = ("HOST",)
# POOL upstream-pick, option bits, then initial (x1 KiB), max (x64 B), growth (x4 KiB) as they are read
pool = ("POOL", 0, 0x00)                       # default options
pool_opts = ("POOL", 0, 0x11, 4, 8)            # initial 4 KiB, growth 32 KiB
pool_max = ("POOL", 0, 0x05, 2, u16(64))       # initial 2 KiB, maximum 4 KiB
pool_tiny = ("POOL", 0, 0x04, u16(2))          # maximum 128 B: never allocates
pool_bad = ("POOL", 0, 0x05, 8, u16(4))        # initial > maximum: INVALID_ARGUMENT
stats = ("STATS", 0)


def alloc(res=0, size=64, align=0, tag=0x11):
    return ("ALLOC", res, u16(size), align, tag)


SEEDS = {
    "host-alloc-free": [host, alloc(), alloc(0, 300, 5), ("FREE", 0), ("FREE", 0), ("QUERY", 0, 0)],
    "host-retain-release": [host, ("RETAIN", 0), ("RELEASE", 0), ("RELEASE", 0), ("QUERY", 0, 0)],
    "alloc-bad-alignment": [host, alloc(0, 64, 250)],
    "alloc-zero": [host, alloc(0, 0)],
    "alloc-huge": [host, alloc(0, 0xFFFF), alloc(0, 0xC001)],
    "alloc-aligned": [host, alloc(0, 1000, 15), alloc(0, 3, 1), ("FREE", 1)],
    "pool-default": [host, pool, ("ALLOC", 1, u16(5000), 0, 7), ("QUERY", 1, 1)],
    "pool-options": [host, pool_opts, alloc(1, 100), alloc(1, 200), ("FREE", 0), ("QUERY", 1, 1)],
    "pool-maximum": [host, pool_max, alloc(1, 0x4000 | 900), alloc(1, 0x4000 | 900), ("QUERY", 1, 0)],
    "pool-tiny-maximum": [host, pool_tiny, alloc(1, 16)],
    "pool-initial-over-maximum": [host, pool_bad],
    "pool-over-pool": [host, pool, ("POOL", 1, 0x00), alloc(2, 128), ("QUERY", 2, 1)],
    "release-upstream-first": [host, pool, ("RELEASE", 0), alloc(0, 64), ("RELEASE", 0)],
    "stats": [host, stats, alloc(1, 64), alloc(1, 32), ("FREE", 0), ("QUERY", 1, 0)],
    "stats-over-pool": [host, pool, ("STATS", 1), alloc(2, 512), ("QUERY", 2, 0)],
    "pool-over-stats": [host, stats, ("POOL", 1, 0x00), alloc(2, 512), ("QUERY", 1, 0)],
    "buffer": [host, ("BUF_CREATE", 1, u16(100)), ("BUF_READ", 0, u16(0), u16(100)), ("BUF_REF", 0)],
    "buffer-default": [("BUF_CREATE", 0, u16(64)), ("BUF_WRITE", 0, u16(8), 16, 0xAB), ("BUF_READ", 0, u16(0), u16(64))],
    "buffer-retain": [host, ("BUF_CREATE", 1, u16(10)), ("BUF_REF", 1), ("BUF_REF", 0), ("BUF_REF", 0)],
    "buffer-resize": [host, ("BUF_CREATE", 1, u16(100)), ("BUF_RESIZE", 0, u16(300)), ("BUF_READ", 0, u16(0), u16(300)),
                      ("BUF_RESIZE", 0, u16(0))],
    "buffer-range": [host, ("BUF_CREATE", 1, u16(16)), ("BUF_WRITE", 0, u16(10), 10, 1), ("BUF_READ", 0, u16(17), u16(0))],
    "buffer-copy": [host, ("BUF_CREATE", 1, u16(64)), ("BUF_CREATE", 1, u16(32)), ("BUF_COPY", 0, 1, u16(8), u16(0), u16(32)),
                    ("BUF_COPY", 0, 0, u16(4), u16(0), u16(40)), ("BUF_READ", 0, u16(0), u16(64))],
    "buffer-of-pool": [host, pool, ("BUF_CREATE", 3, u16(1000)), ("RELEASE", 1), ("RELEASE", 0), ("BUF_RESIZE", 0, u16(2000))],
    "table-get": [("GET",)],
    "table-set": [host, ("SET", 0x03), ("GET",), ("SET", 0x02), ("GET",)],
    "table-set-release": [host, ("SET", 0x01), ("RELEASE", 0), ("BUF_CREATE", 0, u16(8)), ("SET", 0x00)],
    "table-set-if-unset": [host, host, ("SET_IF_UNSET", 0), ("SET_IF_UNSET", 1), ("GET",)],
    "table-push-pop": [host, ("PUSH", 0), ("GET",), ("BUF_CREATE", 0, u16(8)), ("POP",), ("POP",)],
    "table-lock": [host, ("PUSH", 0), ("LOCK", 0x4C, 0)],
    "forged": [host, ("FORGED", 0x00, u64(0x12345678)), ("FORGED", 0x09, u64(0)), ("FORGED", 0x12, u64(7)),
               ("FORGED", 0x1B, u64(1)), ("FORGED", 0x24, u64(0xDEADBEEF)), ("FORGED", 0x2D, u64(3))],
    "forged-wrong-type": [host, ("BUF_CREATE", 1, u16(8)), ("FORGED", 0x03, u64(0)), ("FORGED", 0x07, u64(0))],
    "stale": [host, ("RELEASE", 0), ("STALE", 0x00, 0), ("STALE", 0x02, 0), ("STALE", 0x04, 0), ("STALE", 0x06, 0)],
    "stale-buffer": [host, ("BUF_CREATE", 1, u16(8)), ("BUF_REF", 0), ("STALE", 0x01, 0), ("STALE", 0x03, 0)],
    "foreign-host": [host, ("FOREIGN", 0, 0, u16(64), 0), ("FOREIGN", 0, 2, u16(64), 0), ("FOREIGN", 0, 3, u16(64), 0)],
    "foreign-pool": [host, pool, ("FOREIGN", 1, 1, u16(64), 0), ("FOREIGN", 1, 5, u16(64), 0)],
    "foreign-interior": [host, alloc(0, 256), ("FOREIGN", 0, 4, u16(64), 0)],
    "double-free-host": [host, alloc(0, 0x4000 | 4000), ("DOUBLE", 0)],
    "double-free-pool": [host, pool, alloc(1, 64), ("DOUBLE", 0)],
    "cross-host-host": [host, host, alloc(0, 64), ("CROSS", 0, 1)],
    "cross-stats-upstream": [host, stats, alloc(0, 64), ("CROSS", 0, 1), alloc(1, 64), ("CROSS", 1, 0)],
    "cross-pool-chunk-into-upstream": [host, ("POOL", 0, 0x01, 16), alloc(1, 0x4000 | 4096), ("CROSS", 0, 0)],
    "cross-pool-over-pool": [host, pool, ("POOL", 1, 0x00), alloc(2, 64), ("CROSS", 0, 1)],
    # SPEC: a token count, then token indices (kTokens in fuzz_capi.cpp) or 0x80|char
    "spec-stack": [("SPEC", 8, 1, 0, 2, 8, 11, 18, 7, 7)],            # statistics(pool(host,initial_size=64MiB))
    "spec-errors": [("SPEC", 5, 0, 2, 8, 22, 7), ("SPEC", 3, 0, 0x80 | ord("h"), 7), ("SPEC", 2, 3, 7)],
}


def main():
    d = pathlib.Path(__file__).resolve().parent / "corpus"
    d.mkdir(exist_ok=True)
    for old in d.glob("seed-*"):
        old.unlink()
    for name, steps in SEEDS.items():
        (d / f"seed-{name}").write_bytes(prog(*steps))
    print(f"make_corpus: {len(SEEDS)} seeds in {d}")


if __name__ == "__main__":
    main()
