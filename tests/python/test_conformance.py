"""The conformance suite from Python: behaviour every resource and adaptor owes
its users, run over every configuration in conformance_factories.FACTORIES
(host ones always; CUDA ones marked ``gpu``, skipped without a device).

The same checks run over the C ABI in tests/capi/conformance. Add a resource
in conformance_factories.py, not here. Every test also runs under conftest's
census fixture: whatever it created is gone when it ends.
"""

from __future__ import annotations

import ctypes
import queue
import random
import threading
from typing import Iterator

import pytest

import tether
from tether import _kinds
from thread_support import run_threads
from conformance_factories import (CACHING_KINDS, FACTORIES, GiB, KiB, MiB, Driver, Factory, caches_upstream_memory,
                                   make_or_skip)

MAX_ALIGNMENT = 1 << 30


def _params() -> list:
    return [pytest.param(name, marks=[pytest.mark.gpu] if f.gpu else [], id=name)
            for name, f in FACTORIES.items()]


class Subject:
    """The resource under test, its factory, and host access to its memory."""

    def __init__(self, name: str, factory: Factory) -> None:
        self.name = name
        self.factory = factory
        self.r = make_or_skip(factory)
        self.host = self.r.host_accessible
        self.device = not self.host and self.r.device_accessible

    def can_serve(self, n: int) -> bool:
        return ((self.factory.capacity == 0 or n <= self.factory.capacity // 2)
                and (self.factory.max_request == 0 or n <= self.factory.max_request))

    @staticmethod
    def windows(n: int) -> list[tuple[int, int]]:
        """The byte ranges checked in n bytes: all up to 256 KiB, else head, middle and tail."""
        w = 64 * KiB
        return [(0, n)] if n <= 4 * w else [(0, w), (n // 2, 4 * KiB), (n - w, w)]

    def fill(self, p: int, byte: int, n: int) -> None:
        for off, length in self.windows(n):
            if self.host:
                ctypes.memset(p + off, byte, length)
            elif self.device:
                Driver.get().memset(p + off, byte, length)

    def holds(self, p: int, byte: int, n: int) -> bool:
        for off, length in self.windows(n):
            if self.host:
                got = ctypes.string_at(p + off, length)
            elif self.device:
                got = Driver.get().read(p + off, length)
            else:
                return True
            if got != bytes([byte]) * length:
                return False
        return True


@pytest.fixture(params=_params())
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    s = Subject(request.param, FACTORIES[request.param])
    before = orphans()
    yield s
    # Everything the test allocated is back, first as the stack stands: a stack that caches
    # nothing must balance with no trim, and a pool's books are checked while it still holds
    # its chunks. A stack that caches upstream memory gives it back on trim: checked again.
    links = chain(s.r)
    try:
        assert_balanced(links, trimmed=False)
        if caches_upstream_memory(links):
            s.r.trim()
            assert_balanced(links, trimmed=True)
    finally:
        close_all(links[1:])
        s.r.close()
    assert orphans() == before, "a resource was released with allocations outstanding"


def assert_balanced(links: list[tether.Resource], trimmed: bool) -> None:
    """Nothing outstanding in any link above the first pool; just under a pool, exactly the
    pool's chunks. Before a trim the check stops at a caching link that reports no pool
    figures (arena, binning, fixed-size): what it holds is invisible until it is trimmed."""
    when = "after trim" if trimmed else "with no trim"
    above: tether.Resource | None = None
    for link in links:
        if isinstance(above, tether.PoolResource):
            held = above.pool_info()
            if isinstance(link, tether.StatisticsAdaptor):
                st = link.statistics()
                assert (st.current_bytes, st.current_count) == (held.pool_size, held.chunk_count), \
                    f"{when}: {link!r} under {held}: {st}"
            if isinstance(link, tether.PoolResource):
                info = link.pool_info()
                assert info.pool_size - info.free_bytes == held.pool_size, f"{when}: {link!r} under {held}: {info}"
            return  # further down: the upstream's own business
        if not trimmed and link.kind in CACHING_KINDS and not isinstance(link, tether.PoolResource):
            return
        if isinstance(link, tether.StatisticsAdaptor):
            st = link.statistics()
            assert (st.current_bytes, st.current_count) == (0, 0), f"{when}: {link!r}: {st}"
        if isinstance(link, tether.PoolResource):
            info = link.pool_info()
            assert info.free_bytes == info.pool_size, f"{when}: {link!r} still lends {info}"
        above = link


def orphans() -> tuple[int, int]:
    return tether.debug.orphaned_resources(), tether.debug.orphaned_bytes()


def chain(r: tether.Resource) -> list[tether.Resource]:
    """r and its upstreams, top first (new wrappers for the upstreams: close them)."""
    out = [r]
    while (up := out[-1].upstream) is not None:
        out.append(up)
    return out


def close_all(resources: list[tether.Resource]) -> None:
    for r in resources:
        r.close()


def counters(r: tether.Resource) -> list:
    """What every statistics adaptor and pool in the stack says, top first."""
    links = chain(r)
    try:
        return [(link.kind, link.statistics() if isinstance(link, tether.StatisticsAdaptor) else None,
                 link.pool_info() if isinstance(link, tether.PoolResource) else None) for link in links]
    finally:
        close_all(links[1:])


# ---- the checks ---------------------------------------------------------------------------

def test_describes_itself(subject: Subject) -> None:
    r = subject.r
    assert int(r.kind) >= 1  # open-ended: new kinds are appended
    assert r.name and r.name.replace("_", "").isalpha() and r.name.islower()
    assert r.name in repr(r)
    assert r.host_accessible or r.device_accessible
    if r.device == tether.HOST:
        assert r.host_accessible
    else:
        assert 0 <= r.device < tether.cuda_device_count() and r.device_accessible
    assert r == r and hash(r) == hash(r)
    if isinstance(r, tether.UpstreamAdaptor):  # every adaptor names what it stands on
        up = r.upstream
        assert up is not None
        up.close()
    links = chain(r)
    try:
        assert len(links) < 64
        for a, b in zip(links, links[1:]):
            assert a.handle != b.handle and b.name
    finally:
        close_all(links[1:])
    r.trim()


def test_zero_size(subject: Subject) -> None:
    before = counters(subject.r)
    for alignment in (0, 1, 4096):
        assert subject.r.allocate(0, alignment=alignment) == 0
    subject.r.deallocate(0, 0)
    assert counters(subject.r) == before


def test_sizes_from_one_byte_to_one_gib(subject: Subject) -> None:
    sizes = sorted({4 ** k for k in range(16)} | {3, 255, 257, 4095, 4097, 65537, MiB + 1})
    small = []
    for i, n in enumerate(sizes):
        if not subject.can_serve(n):
            continue
        p = subject.r.allocate(n)
        assert p and p % 256 == 0, n  # default alignment
        byte = i % 250 + 1
        subject.fill(p, byte, n)
        assert subject.holds(p, byte, n), n
        if n <= MiB:
            small.append((p, n, byte))
        else:
            subject.r.deallocate(p, n)
    for p, n, byte in small:
        assert subject.holds(p, byte, n), n
        subject.r.deallocate(p, n)
    assert len({p for p, _, _ in small}) == len(small)


def test_every_alignment(subject: Subject) -> None:
    live = []
    for alignment in [1 << k for k in range(17)] + [MAX_ALIGNMENT]:
        if not subject.can_serve(2 * alignment):
            continue  # a bounded configuration cannot hold it
        for n in (1, 100, 5000):
            p = subject.r.allocate(n, alignment=alignment)
            assert p % alignment == 0, (n, alignment)
            subject.fill(p, n % 251, n)
            live.append((p, n, alignment))
    for p, n, alignment in live:
        assert subject.holds(p, n % 251, n)
        subject.r.deallocate(p, n, alignment=alignment)


def test_bad_alignment(subject: Subject) -> None:
    before = counters(subject.r)
    for alignment in (3, 6, 100, 255, MAX_ALIGNMENT + 1, 2 * MAX_ALIGNMENT):
        with pytest.raises(tether.InvalidArgumentError, match="alignment"):
            subject.r.allocate(100, alignment=alignment)
    assert counters(subject.r) == before


def test_many_live_allocations(subject: Subject) -> None:
    rng = random.Random(99)
    live = [(subject.r.allocate(n), n) for n in (rng.randrange(1, 700) for _ in range(2000))]
    spans = sorted(live)
    for (p, n), (q, _) in zip(spans, spans[1:]):
        assert p + n <= q, "allocations overlap"
    if subject.host:
        for i, (p, n) in enumerate(live):
            ctypes.memset(p, i % 251, n)
        for i, (p, n) in enumerate(live):
            assert ctypes.string_at(p, n) == bytes([i % 251]) * n
    rng.shuffle(live)
    for p, n in live:
        subject.r.deallocate(p, n)


def test_random_allocate_and_free(subject: Subject) -> None:
    rng = random.Random(20261203)  # seeded: a failure reproduces
    largest = 2 * MiB if subject.can_serve(8 * MiB) else 64 * KiB
    live: list[tuple[int, int, int, int]] = []
    for op in range(1500):
        if not live or (len(live) < 64 and rng.random() < 0.6):
            n = rng.randrange(1, max(2, largest >> rng.randrange(16)))
            a = rng.choice([0, 1, 8, 64, 256, 4096])
            p = subject.r.allocate(n, alignment=a)
            assert p % (a or 256) == 0
            byte = op % 250 + 1
            subject.fill(p, byte, n)
            live.append((p, n, a, byte))
        else:
            p, n, a, byte = live.pop(rng.randrange(len(live)))
            assert subject.holds(p, byte, n), f"op {op}"
            subject.r.deallocate(p, n, alignment=a)
    for p, n, a, byte in live:
        assert subject.holds(p, byte, n)
        subject.r.deallocate(p, n, alignment=a)


def test_allocate_on_one_thread_free_on_another(subject: Subject) -> None:
    q: queue.Queue = queue.Queue()
    errors: list[BaseException] = []

    def produce(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(300):
                n = rng.randrange(1, 4096)
                p = subject.r.allocate(n)
                subject.fill(p, seed + 1, n)
                q.put((p, n, seed + 1))
        except BaseException as e:  # reported below
            errors.append(e)

    def consume() -> None:
        try:
            while (item := q.get()) is not None:
                p, n, byte = item
                assert subject.holds(p, byte, n)
                subject.r.deallocate(p, n)
        except BaseException as e:  # reported below
            errors.append(e)

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(3)]
    consumers = [threading.Thread(target=consume) for _ in range(3)]
    for t in producers + consumers:
        t.start()
    for t in producers:
        t.join()
    for _ in consumers:
        q.put(None)
    for t in consumers:
        t.join()
    assert errors == []


def test_concurrent_threads(subject: Subject) -> None:

    def work(i: int) -> None:
        seed = i + 1
        rng = random.Random(seed)
        live = []
        for _ in range(400):
            if live and rng.random() < 0.45:
                p, n = live.pop(rng.randrange(len(live)))
                assert subject.holds(p, seed, n)
                subject.r.deallocate(p, n)
            else:
                n = rng.randrange(1, 8192)
                p = subject.r.allocate(n)
                subject.fill(p, seed, n)
                live.append((p, n))
        for p, n in live:
            subject.r.deallocate(p, n)

    run_threads(work, 8)


def test_statistics_adaptor_over_it_agrees(subject: Subject) -> None:
    sizes = [1, 7, 255, 256, 257, 1000, 4096, 65536, MiB, 3 * MiB]
    sizes = [n for n in sizes if subject.can_serve(4 * n)]
    with tether.StatisticsAdaptor(subject.r) as stats:
        allocs = [(stats.allocate(n), n) for n in sizes]
        s = stats.statistics()
        assert s.current_bytes == s.total_bytes == s.peak_bytes == sum(sizes)
        assert s.current_count == s.total_count == s.peak_count == len(sizes)
        with pytest.raises(tether.OutOfMemoryError):  # refused: not counted
            stats.allocate(1 << 62)
        with pytest.raises(tether.InvalidArgumentError):
            stats.deallocate(allocs[0][0] + 256, 1)
        assert stats.statistics() == s
        for p, n in allocs[:3]:
            stats.deallocate(p, n)
        s = stats.statistics()
        assert s.current_bytes == sum(sizes[3:]) and s.peak_bytes == sum(sizes)
        assert s.current_count == len(sizes) - 3 and s.total_count == len(sizes)
        stats.reset_peak()
        s = stats.statistics()
        assert s.peak_bytes == s.current_bytes and s.peak_count == s.current_count
        for p, n in allocs[3:]:
            stats.deallocate(p, n)
        s = stats.statistics()
        assert (s.current_bytes, s.current_count) == (0, 0)
        assert (s.total_bytes, s.total_count) == (sum(sizes), len(sizes))


@pytest.mark.parametrize("adaptor_first", [False, True], ids=["upstreams_first", "adaptor_first"])
def test_handles_released_in_any_order(subject: Subject, adaptor_first: bool) -> None:
    top = subject.factory.make()
    links = chain(top)  # our own wrappers of every link
    for link in links:  # memory from every link, given back through it
        link.deallocate(link.allocate(1000), 1000)
    p = top.allocate(5000)
    subject.fill(p, 0x42, 5000)
    if adaptor_first:
        top.deallocate(p, 5000)
        top.close()
        for link in links[1:]:  # still usable on their own
            link.deallocate(link.allocate(64), 64)
            link.close()
    else:
        close_all(links[1:])
        assert subject.holds(p, 0x42, 5000)  # the adaptor keeps what it stands on
        with tether.Buffer(70000, resource=top) as buf:
            buf.copy_from_host(b"\x43" * 70000)
            assert buf.tobytes() == b"\x43" * 70000
        top.deallocate(p, 5000)
        top.close()
    # conftest's census fixture checks that nothing is left alive.


def test_out_of_memory_leaves_it_usable_and_unchanged(subject: Subject) -> None:
    r = subject.r
    before_p = r.allocate(1000)
    subject.fill(before_p, 0x5A, 1000)
    before = counters(r)
    for huge in (2**64 - 1, 2**63, 2**64 - 256, 1 << 50):
        for alignment in (0, 4096):
            with pytest.raises(tether.OutOfMemoryError):
                r.allocate(huge, alignment=alignment)
    with pytest.raises(tether.OutOfMemoryError):
        tether.Buffer(2**64 - 1, resource=r)
    assert counters(r) == before
    cap = subject.factory.capacity
    if cap:
        with pytest.raises(tether.OutOfMemoryError):
            r.allocate(cap + 1)
        assert counters(r) == before
        full = []
        block = cap // 8
        for _ in range(16):
            try:
                full.append(r.allocate(block))
            except tether.OutOfMemoryError:
                break
        assert 4 <= len(full) <= 8, f"held {len(full)} blocks of {block} B within a capacity of {cap} B"
        at_full = counters(r)
        with pytest.raises(tether.OutOfMemoryError):
            r.allocate(block)
        assert counters(r) == at_full
        for p in full:
            r.deallocate(p, block)
    if subject.factory.max_request:  # one byte above the largest request it serves
        with pytest.raises(tether.OutOfMemoryError):
            r.allocate(subject.factory.max_request + 1)
        assert counters(r) == before
    after = r.allocate(64 * KiB)  # still usable, what it held intact
    subject.fill(after, 0x33, 64 * KiB)
    assert subject.holds(before_p, 0x5A, 1000) and subject.holds(after, 0x33, 64 * KiB)
    r.deallocate(after, 64 * KiB)
    r.deallocate(before_p, 1000)


def test_foreign_and_double_frees_are_rejected(subject: Subject) -> None:
    r = subject.r
    p = r.allocate(8 * KiB)
    subject.fill(p, 0x22, 8 * KiB)

    def refused(ptr: int, size: int, alignment: int = 0, names: str | None = None) -> None:
        before = counters(r)
        with pytest.raises(tether.InvalidArgumentError) as e:
            r.deallocate(ptr, size, alignment=alignment)
        needle = names if names is not None else f"{ptr:x}"
        assert needle in str(e.value), str(e.value)
        assert counters(r) == before

    foreign = ctypes.create_string_buffer(64 * KiB)
    addr = ctypes.addressof(foreign)
    refused(addr + 4096 + (256 - addr % 256), 100)
    assert foreign.raw == bytes(64 * KiB), "a refused free wrote to memory that was not its"
    refused(p + 256, 1000)
    refused(p, 8 * KiB - 1)
    refused(p, 8 * KiB + 1)
    refused(p, 8 * KiB, alignment=4096)
    refused(p, 0, names="size")
    links = chain(r)
    try:
        if len(links) > 1:
            up = links[1]
            u = up.allocate(4096)
            refused(u, 4096)  # the upstream's memory
            before = counters(r)
            with pytest.raises(tether.InvalidArgumentError):
                up.deallocate(p, 8 * KiB)  # its memory freed into the upstream
            assert counters(r) == before
            up.deallocate(u, 4096)
    finally:
        close_all(links[1:])
    if not subject.factory.twins_share_frees:
        with subject.factory.make() as twin:
            t = twin.allocate(8 * KiB)
            refused(t, 8 * KiB)
            twin.deallocate(t, 8 * KiB)
    assert subject.holds(p, 0x22, 8 * KiB), "a refused free damaged the allocation"
    r.deallocate(p, 8 * KiB)
    with pytest.raises(tether.InvalidArgumentError):
        r.deallocate(p, 8 * KiB)  # double free


def test_memory_is_reachable_where_the_properties_say(subject: Subject) -> None:
    r = subject.r
    n = 64 * KiB
    p = r.allocate(n)
    try:
        if r.host_accessible:
            data = bytes(i * 7 % 256 for i in range(n))
            ctypes.memmove(p, data, n)
            assert ctypes.string_at(p, n) == data
        if r.device_accessible:
            Driver.get().memset(p, 0x6B, n)
            back = ctypes.string_at(p, n) if r.host_accessible else Driver.get().read(p, n)
            assert back == b"\x6b" * n
    finally:
        r.deallocate(p, n)


def test_buffers(subject: Subject) -> None:
    with tether.Buffer(1000, resource=subject.r) as buf:
        assert buf.resource == subject.r and buf.size == 1000
        assert (buf.host_accessible, buf.device_accessible) == (subject.r.host_accessible,
                                                                subject.r.device_accessible)
        buf.copy_from_host(b"x" * 1000)
        assert buf.tobytes() == b"x" * 1000
        buf.resize(300)
        assert buf.tobytes() == b"x" * 300
    n = GiB if subject.can_serve(GiB) and not subject.factory.gpu else 8 * MiB
    if subject.can_serve(n):
        with tether.Buffer(n, resource=subject.r) as big:
            big.copy_from_host(b"tether", offset=n - 6)
            assert big.copy_to_host(offset=n - 6, size=6) == bytearray(b"tether")


# Kinds that need a CUDA device (their entries are gpu=True; they cannot be built here).
# Kinds whose memory only a CUDA device gives (the registry's "memory", capi/kinds.json).
CUDA_ONLY_KINDS = {k.name.upper() for k in _kinds.KINDS
                   if k.memory in _kinds.GPU_MEMORY}
# Kinds that are no allocator (the registry's "allocator"): IPC is the mapping behind one imported
# buffer (tether.import_ipc), whose only allocation is that mapping (tests/python/test_gpu_ipc.py covers it).
NOT_ALLOCATOR_KINDS = {k.name.upper() for k in _kinds.KINDS if not k.allocator}


def test_every_host_capable_kind_has_a_conformance_factory() -> None:
    # A new resource type that forgets its entry in conformance_factories.FACTORIES fails here
    # instead of going untested. (Kinds come from the library's headers.)
    covered = set()
    for f in FACTORIES.values():
        if not f.gpu:
            with f.make() as r:
                covered.add(r.kind)
    missing = [k.name for k in tether.ResourceKind
               if k.name not in CUDA_ONLY_KINDS | NOT_ALLOCATOR_KINDS and k not in covered]
    assert not missing, f"add an entry to conformance_factories.FACTORIES for the kinds {missing}"


@pytest.mark.gpu
def test_every_kind_has_a_conformance_factory() -> None:
    covered = set()
    for f in FACTORIES.values():
        try:
            r = f.make()
        except tether.NotSupportedError:
            # This GPU lacks what the kind needs (its conformance tests skip, saying why);
            # a registry entry still shows the kind has one.
            if f.kind is not None:
                covered.add(tether.ResourceKind[f.kind.upper()])
            continue
        with r:
            covered.add(r.kind)
    missing = [k.name for k in tether.ResourceKind if k.name not in NOT_ALLOCATOR_KINDS and k not in covered]
    assert not missing, f"add an entry to conformance_factories.FACTORIES for the kinds {missing}"
