"""The ``tether`` command (also ``python -m tether``): inspect, benchmark and replay.

    tether info [--json]
    tether bench SPEC [SPEC ...] [--threads 1,4,8] [--ops N] [--repeat R] [--sizes random|SIZE,...] [--json]
    tether replay LOG --spec SPEC [--compare SPEC2] [--plot out.png] [--json]

Every measurement runs in libtether's replay engine (``tether/replay.h``): the
Python interpreter only prepares the operations, so the figures are the
allocators' own cost through the C ABI, comparable with C programs. Exit
status: 0 on success; 1 when ``replay`` saw an allocation that succeeded in the
log fail in the replay; 2 for bad arguments or a malformed log (the message
names the argument or the log's line).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, NoReturn, Sequence

from ._convert import SIZE_MAX, excerpt
from ._ffi import ffi, lib

EXIT_OK, EXIT_FAILED_ALLOCATION, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad argument or a malformed input file: reported, exit status 2."""


# ---- streams --------------------------------------------------------------------------

class _Streams:
    """Non-blocking CUDA streams for replay threads, from whichever stream API is
    importable (cuda.core, then CuPy). ``None`` entries mean stream 0."""

    def __init__(self, device: int, count: int) -> None:
        self.keep: list[Any] = []
        self.values: list[int] = []
        self.source = "none (every operation on stream 0)"
        if count <= 0 or device < 0:
            return
        try:
            from cuda.core import Device
            d = Device(device)
            d.set_current()
            for _ in range(count):
                s = d.create_stream()
                self.keep.append(s)
                self.values.append(int(s.handle))
            self.source = "cuda.core"
            return
        except Exception:  # noqa: BLE001 - try the next API
            self.keep.clear()
            self.values.clear()
        try:
            import cupy
            with cupy.cuda.Device(device):
                for _ in range(count):
                    s = cupy.cuda.Stream(non_blocking=True)
                    self.keep.append(s)
                    self.values.append(int(s.ptr))
            self.source = "cupy"
        except Exception:  # noqa: BLE001
            self.keep.clear()
            self.values.clear()


# ---- the engine -----------------------------------------------------------------------

@dataclass
class ReplayResult:
    """What one replay measured (``tether_replay_result_t``) plus the timeline."""
    spec: str
    elapsed_ns: int
    operations: int
    allocations: int
    deallocations: int
    failed_allocations: int
    skipped_deallocations: int
    peak_live_bytes: int
    peak_footprint_bytes: int
    failed_ops: list[int] = field(default_factory=list)
    timeline: list[tuple[int, int, int, int]] = field(default_factory=list)  # (ops, ns, live, footprint)

    @property
    def ns_per_pair(self) -> float:
        pairs = max(self.operations / 2, 1)
        return self.elapsed_ns / pairs

    @property
    def fragmentation(self) -> float:
        """Peak bytes held from upstream / peak live bytes (1.0 = no overhead); 0 if unknown."""
        if not self.peak_footprint_bytes or not self.peak_live_bytes:
            return 0.0
        return self.peak_footprint_bytes / self.peak_live_bytes


def _check(status: int) -> None:
    if status:
        from ._errors import check
        check(status)


def _with_footprint(spec: str) -> tuple[Any, Any, str]:
    """Build ``spec`` with a statistics adaptor right above its leaf (what the stack
    holds from upstream). Returns (outermost resource, that adaptor or None, the
    canonical spec of the stack as the user named it)."""
    from ._errors import NotSupportedError
    from ._spec import from_spec
    r = from_spec(spec)
    chain = [r]
    while (up := chain[-1].upstream) is not None:
        chain.append(up)
    named = True
    try:
        leaf = chain[-1].spec
        canonical = r.spec
    except NotSupportedError:  # a stack no spec names again: measured without the footprint
        named, leaf, canonical = False, "", spec
    for x in chain[1:]:
        x.close()
    if not named or len(chain) == 1 or canonical.count(leaf) != 1:
        return r, None, canonical  # a leaf alone (its footprint is its live bytes) or an ambiguous text
    r.close()
    r = from_spec(canonical.replace(leaf, f"statistics({leaf})", 1))
    chain = [r]
    while (up := chain[-1].upstream) is not None:
        chain.append(up)
    footprint = chain[-2]  # the statistics adaptor right above the leaf
    for x in chain[1:]:
        if x is not footprint:
            x.close()
    return r, footprint, canonical


def run_replay(spec: str, ops: Sequence[tuple[int, int, int, int, int]], slot_count: int, threads: int,
               stream_count: int = 0, samples: int = 0) -> ReplayResult:
    """Replay ``ops`` - (action, slot, size, thread, stream) tuples - against a new
    stack built from ``spec``; stream indices above 0 get their own CUDA stream when
    the stack is device memory and a stream API is importable (else stream 0)."""
    resource, footprint, canonical = _with_footprint(spec)
    try:
        n = len(ops)
        arr = ffi.new("tether_replay_op_t[]", max(n, 1))
        for i, (action, slot, size, thread, stream) in enumerate(ops):
            o = arr[i]
            o.action, o.slot, o.size, o.thread, o.stream = action, slot, size, thread, stream
        opts = ffi.new("tether_replay_options_t*")
        _check(lib.tether_replay_options_init(opts, ffi.sizeof("tether_replay_options_t")))
        opts.threads = threads
        opts.slot_count = slot_count
        streams = _Streams(resource.device if resource.device_accessible else -1, stream_count)
        if stream_count:
            values = [0] + (streams.values[1:] if len(streams.values) == stream_count else [0] * (stream_count - 1))
            c_streams = ffi.new("tether_stream_t[]", values)
            opts.streams = c_streams
            opts.stream_count = stream_count
        if footprint is not None:
            opts.footprint = footprint._h
        every = max(n // samples, 1) if samples else 0
        capacity = n // every + 1 if every else 1
        sample_buf = ffi.new("tether_replay_sample_t[]", capacity)
        if samples:
            opts.sample_every = every
            opts.samples = sample_buf
            opts.sample_capacity = capacity
        failed = ffi.new("uint64_t[]", max(n, 1))
        opts.failed_ops = failed
        opts.failed_capacity = n
        out = ffi.new("tether_replay_result_t*")
        out.struct_size = ffi.sizeof("tether_replay_result_t")
        _check(lib.tether_replay_run(resource._h, arr, n, opts, out))
        timeline = [(s.ops_done, s.time_ns, s.live_bytes, s.footprint_bytes)
                    for s in (sample_buf[i] for i in range(out.samples_written))]
        return ReplayResult(spec=canonical, elapsed_ns=out.elapsed_ns, operations=n,
                            allocations=out.allocations, deallocations=out.deallocations,
                            failed_allocations=out.failed_allocations,
                            skipped_deallocations=out.skipped_deallocations,
                            peak_live_bytes=out.peak_live_bytes, peak_footprint_bytes=out.peak_footprint_bytes,
                            failed_ops=sorted(failed[i] for i in range(out.failed_written)),
                            timeline=sorted(timeline))
    finally:
        if footprint is not None:
            footprint.close()
        resource.close()


# ---- patterns -------------------------------------------------------------------------

def random_pattern(ops: int, threads: int, sizes: Sequence[int] | None, max_live: int = 1000,
                   seed: int = 42) -> tuple[list[tuple[int, int, int, int, int]], int]:
    """The random pattern of the project's benchmarks, per thread: allocate with
    probability 0.73 (always below one live allocation, never above max_live),
    sizes log-uniform 256 B - 4 MiB (or drawn from ``sizes``), frees in random
    order. Thread t's operations use stream t. Returns (ops, slot count)."""
    rng = random.Random(seed)
    out: list[tuple[int, int, int, int, int]] = []
    slot_base = 0
    per_thread = max(ops // threads, 2)
    for t in range(threads):
        live: list[int] = []
        free_slots: list[int] = []
        next_slot = slot_base
        for _ in range(per_thread):
            if not live or (len(live) < max_live and rng.random() < 0.73):
                size = rng.choice(sizes) if sizes else int(2 ** rng.uniform(8, 22))
                slot = free_slots.pop() if free_slots else next_slot
                if slot == next_slot:
                    next_slot += 1
                live.append(slot)
                out.append((lib.TETHER_REPLAY_ALLOCATE, slot, size, t, t))
            else:
                slot = live.pop(rng.randrange(len(live)))
                free_slots.append(slot)
                out.append((lib.TETHER_REPLAY_DEALLOCATE, slot, 0, t, t))
        slot_base = next_slot
    # interleave threads' ops (each thread runs its own in order; the engine keeps that order)
    return out, slot_base


# ---- the log ----------------------------------------------------------------------------

@dataclass
class Trace:
    ops: list[tuple[int, int, int, int, int]]
    lines: list[int]              # log line number of each op
    slot_count: int
    threads: int
    streams: int
    logged_failures: int = 0      # allocations that failed in the log (not replayed)
    unknown_frees: int = 0        # frees of pointers allocated before the log began (not replayed)


_HEADER = ["time_ns", "thread", "action", "pointer", "size", "stream", "status"]
MAX_THREADS = 256


def read_log(path: str) -> Trace:
    """A logging adaptor's CSV (``LoggingAdaptor``) as replay operations; raises
    UsageError naming the line of anything malformed."""
    try:
        # surrogateescape: a byte that is not UTF-8 makes a malformed field
        # (reported with its line below), never a UnicodeDecodeError.
        f = open(path, newline="", encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise UsageError(f"LOG: cannot open {path!r}: {e.strerror}") from None
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise UsageError(f"{path}: empty file (expected the header line {','.join(_HEADER)})") from None
        except csv.Error as e:
            raise UsageError(f"{path}:1: {e}") from None
        if [h.strip() for h in header] != _HEADER:
            raise UsageError(f"{path}:1: not a tether log: the header is {excerpt(','.join(header))}, "
                             f"expected {','.join(_HEADER)!r}")
        threads: dict[str, int] = {}
        streams: dict[int, int] = {0: 0}
        live: dict[int, tuple[int, int]] = {}  # pointer -> (slot, size)
        free_slots: list[int] = []
        next_slot = 0
        t = Trace(ops=[], lines=[], slot_count=0, threads=0, streams=1)
        # Lines are written when each call ends, so two threads' lines can be out of
        # order (a free written after the allocation that reused its memory); the time
        # column is causal (a free is stamped when issued, an allocation when it
        # returned), so events are replayed in time order, ties in file order.
        try:
            rows: list[tuple[int, int, list[str]]] = []
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(_HEADER):
                    raise UsageError(f"{path}:{line}: expected {len(_HEADER)} fields, got {len(row)}")
                try:
                    stamp = int(row[0].strip())
                except ValueError:
                    raise UsageError(f"{path}:{line}: the time is not a number: {excerpt(row)}") from None
                rows.append((stamp, line, row))
        except csv.Error as e:
            raise UsageError(f"{path}:{reader.line_num}: {e}") from None
        rows.sort(key=lambda r: r[0])  # stable: ties keep file order
        try:
            for _stamp, line, row in rows:
                _, thread, action, pointer, size, stream, status = (x.strip() for x in row)
                try:
                    ptr = int(pointer, 16)
                    n = int(size)
                    s = int(stream)
                except ValueError:
                    raise UsageError(f"{path}:{line}: pointer, size or stream is not a number: {excerpt(row)}") from None
                for value, column in ((ptr, "pointer"), (n, "size"), (s, "stream")):
                    if not 0 <= value <= SIZE_MAX:
                        raise UsageError(f"{path}:{line}: the {column} {excerpt(value)} is outside [0, 2**64)")
                if thread not in threads:
                    if len(threads) >= MAX_THREADS:
                        raise UsageError(f"{path}:{line}: more than {MAX_THREADS} threads in the log")
                    threads[thread] = len(threads)
                if s not in streams:
                    streams[s] = len(streams)
                ti, si = threads[thread], streams[s]
                if action == "allocate":
                    if status != "TETHER_OK":
                        t.logged_failures += 1
                        continue
                    if ptr in live:
                        raise UsageError(f"{path}:{line}: pointer {pointer} allocated twice without a free")
                    slot = free_slots.pop() if free_slots else next_slot
                    if slot == next_slot:
                        next_slot += 1
                    live[ptr] = (slot, n)
                    t.ops.append((lib.TETHER_REPLAY_ALLOCATE, slot, n, ti, si))
                    t.lines.append(line)
                elif action == "free":
                    if status != "TETHER_OK":
                        continue  # a refused free changed nothing
                    if ptr not in live:
                        t.unknown_frees += 1
                        continue
                    slot, _ = live.pop(ptr)
                    free_slots.append(slot)
                    t.ops.append((lib.TETHER_REPLAY_DEALLOCATE, slot, 0, ti, si))
                    t.lines.append(line)
                else:
                    raise UsageError(f"{path}:{line}: unknown action {excerpt(action)} (allocate or free)")
        except csv.Error as e:
            raise UsageError(f"{path}:{reader.line_num}: {e}") from None
        t.slot_count = next_slot
        t.threads = max(len(threads), 1)
        t.streams = len(streams)
        return t


# ---- output helpers ------------------------------------------------------------------------

def _size(n: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.2f} {unit}"
    return f"{int(n)} B"


def _progress(done: int, total: int, label: str) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


# ---- commands --------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    import tether
    info: dict[str, Any] = {
        "package_version": tether.__version__,
        "library_version": ffi.string(lib.tether_version_string()).decode(),
        "abi_version": tether.abi_version(),
        "library": tether.get_library(),
        "include": tether.get_include(),
        "cmake_dir": tether.get_cmake_dir(),
    }
    cuda: dict[str, Any] = {"available": tether.cuda_available()}
    devices: list[dict[str, Any]] = []
    if cuda["available"]:
        cuda["driver_version"] = tether.cuda_driver_version()
        free, total = ffi.new("size_t*"), ffi.new("size_t*")
        for d in range(tether.cuda_device_count()):
            entry: dict[str, Any] = {"device": d}
            try:
                entry["name"] = tether.cuda_device_name(d)
            except tether.TetherError:
                pass
            if lib.tether_cuda_get_memory_info(d, free, total) == 0:
                entry["total_bytes"], entry["free_bytes"] = int(total[0]), int(free[0])
            devices.append(entry)
    else:
        cuda["reason"] = ffi.string(lib.tether_last_error_message()).decode("utf-8", "replace") or "no CUDA driver or device"
    cuda["devices"] = devices
    info["cuda"] = cuda
    slots = []
    for device in [tether.HOST] + [d["device"] for d in devices]:
        slot: dict[str, Any] = {"slot": "host" if device == tether.HOST else device}
        try:
            slot["locked"] = tether.is_current_resource_locked(device)
            r = tether.get_current_resource(device)
            slot["spec"] = r.spec
            r.close()
        except tether.TetherError as e:
            slot["error"] = str(e)
        slots.append(slot)
    info["table"] = slots
    info["environment"] = {k: v for k, v in sorted(os.environ.items())
                           if k.startswith("TETHER_RESOURCE") or k == "TETHER_HOOKS"}
    info["live_objects"] = tether.debug.live_objects()
    info["orphaned_resources"] = tether.debug.orphaned_resources()
    info["orphaned_bytes"] = tether.debug.orphaned_bytes()
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    print(f"tether {info['package_version']} (library {info['library_version']}, ABI {info['abi_version']})")
    print(f"  library:   {info['library']}")
    print(f"  include:   {info['include']}")
    print(f"  cmake:     {info['cmake_dir']}")
    if cuda["available"]:
        driver: int = cuda["driver_version"]
        print(f"CUDA driver {driver // 1000}.{driver % 1000 // 10}, {len(devices)} device(s)")
        for dev in devices:
            mem = (f"{_size(dev['total_bytes'])} total, {_size(dev['free_bytes'])} free"
                   if "total_bytes" in dev else "memory unknown")
            name = f"{dev['name']}, " if "name" in dev else ""
            print(f"  device {dev['device']}: {name}{mem}")
    else:
        print(f"CUDA: not available ({cuda['reason']})")
    print("current-resource table (unset slots show the default they build now):")
    for s in slots:
        what = s.get("spec", f"error: {s.get('error')}")
        lock = " [locked]" if s.get("locked") else ""
        print(f"  {str(s['slot']):>5}: {what}{lock}")
    for k, v in info["environment"].items():
        print(f"  env {k}={v}")
    print(f"live objects: {info['live_objects']}; orphans: {info['orphaned_resources']} "
          f"({info['orphaned_bytes']} bytes)")
    return EXIT_OK


def _parse_threads(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--threads: expected numbers like 1,4,8, got {text!r}") from None
    if not values or any(v < 1 or v > MAX_THREADS for v in values):
        raise UsageError(f"--threads: each count must be in 1..{MAX_THREADS}, got {text!r}")
    return values


def _parse_sizes(text: str) -> list[int] | None:
    if text == "random":
        return None
    from ._convert import parse_size
    try:
        sizes = [parse_size(x.strip(), "--sizes") for x in text.split(",") if x.strip()]
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    if not sizes or 0 in sizes:
        raise UsageError(f"--sizes: expected 'random' or sizes > 0 like 256,1MiB, got {text!r}")
    return sizes


def _check_spec(spec: str, what: str) -> None:
    from ._spec import from_spec
    from ._errors import TetherError
    try:
        from_spec(spec).close()
    except (TetherError, ValueError, TypeError) as e:
        raise UsageError(f"{what}: {e}") from None
    except OSError as e:  # argv that is not text
        raise UsageError(f"{what}: {excerpt(spec)}: {e}") from None


def cmd_bench(args: argparse.Namespace) -> int:
    threads = _parse_threads(args.threads)
    sizes = _parse_sizes(args.sizes)
    if args.ops < 2 or args.repeat < 1:
        raise UsageError("--ops must be at least 2 and --repeat at least 1")
    for s in args.spec:
        _check_spec(s, "SPEC")
    rows = []
    total = len(args.spec) * len(threads) * args.repeat
    done = 0
    for t in threads:
        ops, slots = random_pattern(args.ops, t, sizes, seed=args.seed)
        for s in args.spec:
            times, failures = [], 0
            for _ in range(args.repeat):
                r = run_replay(s, ops, slots, t, stream_count=t)
                times.append(r.ns_per_pair)
                failures = max(failures, r.failed_allocations)
                done += 1
                _progress(done, total, "bench")
            rows.append({"spec": s, "threads": t, "ns_per_pair": statistics.median(times),
                         "repeat": args.repeat, "ops": len(ops), "failed_allocations": failures})
    ref = {row["threads"]: row["ns_per_pair"] for row in rows if row["spec"] == args.spec[0]}
    one = {row["spec"]: row["ns_per_pair"] for row in rows if row["threads"] == threads[0]}
    for row in rows:
        row["vs_first_spec"] = row["ns_per_pair"] / ref[row["threads"]]
        row["vs_own_first_threads"] = row["ns_per_pair"] / one[row["spec"]]
    if args.json:
        print(json.dumps({"pattern": "random" if sizes is None else sizes, "rows": rows}, indent=2))
        return EXIT_OK
    pattern = "random 256 B-4 MiB" if sizes is None else ",".join(_size(x) for x in sizes)
    print(f"tether bench: {args.ops} operations per run ({pattern}, at most 1000 live), "
          f"median of {args.repeat}, aggregate ns per allocate+free pair")
    print(f"{'spec':<48} {'threads':>7} {'ns/pair':>10} {'vs 1st spec':>12} {'vs ' + str(threads[0]) + ' thr':>9}")
    for row in rows:
        print(f"{row['spec'][:48]:<48} {row['threads']:>7} {row['ns_per_pair']:>10.1f} "
              f"{row['vs_first_spec']:>11.3f}x {row['vs_own_first_threads']:>8.3f}x"
              + (f"  ({row['failed_allocations']} failed)" if row["failed_allocations"] else ""))
    return EXIT_OK


def _plot(path: str, results: list[ReplayResult]) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib (pip install 'tether[plot]')") from None
    fig, ax = plt.subplots(figsize=(9, 4.5))
    first = next((r for r in results if r.timeline), None)
    if first is not None:  # the trace's live bytes: the same for every stack
        ax.plot([x[0] for x in first.timeline], [x[2] / 2**20 for x in first.timeline], color="black",
                linewidth=1, label="live (the trace)")
    for r in results:
        if r.timeline and r.peak_footprint_bytes:
            ax.plot([x[0] for x in r.timeline], [x[3] / 2**20 for x in r.timeline], linestyle="--",
                    label=f"held from upstream: {r.spec}")
    ax.set_xlabel("operations replayed")
    ax.set_ylabel("MiB")
    ax.set_title("tether replay")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cmd_replay(args: argparse.Namespace) -> int:
    trace = read_log(args.log)
    specs = [args.spec] + ([args.compare] if args.compare else [])
    for s, what in zip(specs, ("--spec", "--compare")):
        _check_spec(s, what)
    from ._errors import TetherError
    results = []
    for s, what in zip(specs, ("--spec", "--compare")):
        try:
            results.append(run_replay(s, trace.ops, trace.slot_count, trace.threads, stream_count=trace.streams,
                                      samples=200))
        except (TetherError, ValueError, TypeError) as e:
            raise UsageError(f"{what}: {e}") from None
    failed_any = any(r.failed_allocations for r in results)
    if args.json:
        out = {"log": args.log, "operations": len(trace.ops), "threads": trace.threads, "streams": trace.streams,
               "logged_failures": trace.logged_failures, "unknown_frees": trace.unknown_frees,
               "results": []}
        for r in results:
            d = asdict(r)
            d["failed_lines"] = [trace.lines[i] for i in r.failed_ops]
            d["fragmentation"] = r.fragmentation
            del d["timeline"]
            out["results"].append(d)
        print(json.dumps(out, indent=2))
    else:
        print(f"tether replay: {args.log}: {len(trace.ops)} operations, {trace.threads} thread(s), "
              f"{trace.streams} stream(s)")
        if trace.logged_failures or trace.unknown_frees:
            print(f"  not replayed: {trace.logged_failures} allocation(s) that failed in the log, "
                  f"{trace.unknown_frees} free(s) of memory allocated before the log began")
        for r in results:
            frag = f", {r.fragmentation:.3f}x of peak live" if r.fragmentation else ""
            print(f"{r.spec}")
            print(f"  time {r.elapsed_ns / 1e6:.3f} ms ({r.ns_per_pair:.1f} ns per allocate+free pair)")
            print(f"  peak live {_size(r.peak_live_bytes)}; peak held from upstream "
                  f"{_size(r.peak_footprint_bytes) if r.peak_footprint_bytes else 'n/a'}{frag}")
            if r.failed_allocations:
                print(f"  FAILED: {r.failed_allocations} allocation(s) that succeeded in the log:")
                for i in r.failed_ops[:50]:
                    print(f"    {args.log}:{trace.lines[i]}: allocate {trace.ops[i][2]} bytes")
                if len(r.failed_ops) > 50:
                    print(f"    ... and {len(r.failed_ops) - 50} more")
    if args.plot:
        _plot(args.plot, results)
        if not args.json:
            print(f"plot: {args.plot}")
    return EXIT_FAILED_ALLOCATION if failed_any else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tether", description="Inspect, benchmark and replay tether memory resources.")
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, library path, devices, the current-resource table")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(run=cmd_info)
    bench = sub.add_parser("bench", help="time resource stacks on the random pattern (or fixed sizes)")
    bench.add_argument("spec", nargs="+", metavar="SPEC", help="resource specs, e.g. 'pool(host)'")
    bench.add_argument("--threads", default="1", help="thread counts, comma-separated (each on its own stream)")
    bench.add_argument("--ops", type=int, default=100_000, help="operations per run (split between threads)")
    bench.add_argument("--repeat", type=int, default=5, help="runs per configuration (the median is reported)")
    bench.add_argument("--sizes", default="random", help="'random' (256 B-4 MiB) or sizes like 256,1MiB")
    bench.add_argument("--seed", type=int, default=42, help="the pattern's random seed")
    bench.add_argument("--json", action="store_true", help="machine-readable output")
    bench.set_defaults(run=cmd_bench)
    replay = sub.add_parser("replay", help="replay a LoggingAdaptor's CSV against a resource stack")
    replay.add_argument("log", metavar="LOG", help="the CSV file a LoggingAdaptor wrote")
    replay.add_argument("--spec", required=True, help="the resource stack to replay against")
    replay.add_argument("--compare", help="a second stack, measured and plotted beside the first")
    replay.add_argument("--plot", metavar="PNG", help="draw live bytes and bytes held from upstream over time")
    replay.add_argument("--json", action="store_true", help="machine-readable output")
    replay.set_defaults(run=cmd_replay)
    return p


def main(argv: Iterable[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        return int(args.run(args))
    except UsageError as e:
        print(f"tether {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _entry() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
