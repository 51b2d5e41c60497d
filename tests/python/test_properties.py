"""Property tests (hypothesis): every public function's arguments, generated.

Each case calls one public function with valid arguments except one, drawn
from everything a caller could pass: sizes as ints and strings (huge,
negative, fractional, non-ASCII digits, whitespace), devices, alignments,
streams and stream objects, handles as ints, live and closed tether objects,
wrong types. Every call must either succeed or raise TetherError /
ValueError / TypeError (BufferError where the API documents it) - never
AttributeError, OverflowError, IndexError, a cffi message or a crash - a
Python-side ValueError/TypeError must name the argument, and after each case
the census (tether.debug.live_objects()) is back where it began.

Reproducible in CI: derandomize=True, no example database, a fixed number of
examples per function, no deadline (CI machines are slow and shared).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tether
from tether._ffi import lib

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])

ALLOWED = (tether.TetherError, ValueError, TypeError)
CFFI_WORDS = ("ctype", "cdata", "initializer for", "an integer is required", "tuple index",
              "cannot be interpreted as an integer", "object is not subscriptable")


# ---- generated values ----------------------------------------------------------

@dataclass(frozen=True)
class Live:
    """A tether object (or another odd object) built fresh for the case."""
    what: str


class StreamProtocol:
    def __init__(self, proto):
        self._proto = proto

    def __cuda_stream__(self):
        return self._proto


class TorchLikeStream:
    cuda_stream = 7


def huge_or_boundary_ints():
    return st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**32, 2**33, 2**62, 2**63 - 1, 2**63,
                            2**64 - 1, 2**64, 2**70, -(2**64), -(2**70), -1, -2, -3])


INTS = st.one_of(st.integers(-3, 300), huge_or_boundary_ints(), st.integers())
SIZE_STRINGS = st.one_of(
    st.sampled_from(["64 KiB", " 1 MiB ", "1.5 KiB", "0.5 B", "1e3", "١٢", "٣ KiB", "𝟙𝟚", "12\u00a0MiB",
                     "4 GiB", "16 EiB", "-1", "1" + " " * 300 + "B", "\t8\n", "NaN", "", " ", ".", "1.",
                     ".5 KiB", "18446744073709551615", "18446744073709551616", "99999999999 PiB",
                     "1" * 80, "0x10", "1_000", "+5", "5 kib", "5 KIB", "5 Ki B"]),
    st.from_regex(r"\s{0,3}[0-9]{0,22}(\.[0-9]{0,4})?\s{0,2}(B|KiB|MiB|GiB|TiB|PiB|kB|MB|GB|TB|PB|kib|xb)?\s{0,2}",
                  fullmatch=True),
    st.text(max_size=8),
)
WRONG = st.one_of(
    st.none(), st.booleans(), st.floats(), st.binary(max_size=3), st.lists(st.integers(0, 3), max_size=2),
    st.tuples(), st.tuples(st.integers(0, 3)), st.tuples(st.integers(-1, 20), st.integers(-3, 3)),
    st.tuples(st.text(max_size=1), st.integers(0, 1)), st.complex_numbers(max_magnitude=4),
    st.sampled_from([Live("buffer"), Live("closed_buffer"), Live("resource"), Live("pool"),
                     Live("closed_resource"), Live("object"), Live("stream"), Live("bad_stream"),
                     Live("short_stream"), Live("torch_stream"), Live("dict")]),
)
ANY = st.one_of(INTS, SIZE_STRINGS, WRONG)
DEVICES = st.one_of(st.sampled_from([None, tether.HOST, tether.CURRENT_DEVICE, 0, 1, 7]), INTS, WRONG)


def _size_or_none(value):
    try:
        return tether.parse_size(value)
    except ALLOWED:
        return None


def not_a_real_allocation(value) -> bool:
    """Sizes between 64 MiB and 2**62 could succeed (overcommit) and be slow: left out."""
    n = _size_or_none(value)
    return n is None or n <= 1 << 26 or n >= 1 << 62


# ---- the per-case world ----------------------------------------------------------

@dataclass
class World:
    host: tether.HostResource
    pool: tether.PoolResource
    buf: tether.Buffer
    made: list = field(default_factory=list)  # everything to close at the end

    def value(self, v):
        if not isinstance(v, Live):
            return v
        w = v.what
        if w == "buffer":
            return self.buf
        if w == "resource":
            return self.host
        if w == "pool":
            return self.pool
        if w == "closed_buffer":
            b = tether.Buffer(8, resource=self.host)
            b.close()
            return b
        if w == "closed_resource":
            r = tether.HostResource()
            r.close()
            return r
        if w == "stream":
            return StreamProtocol((0, 5))
        if w == "bad_stream":
            return StreamProtocol((0, "x"))
        if w == "short_stream":
            return StreamProtocol(5)
        if w == "torch_stream":
            return TorchLikeStream()
        if w == "dict":
            return {"size": 1}
        return object()

    def keep(self, obj):
        self.made.append(obj)
        return obj

    def close(self):
        for obj in reversed(self.made):
            close = getattr(obj, "close", None)
            if close is not None:
                close()
        self.buf.close()
        self.pool.close()
        self.host.close()


def world() -> World:
    host = tether.HostResource()
    pool = tether.PoolResource(host, initial_size="4 KiB")
    buf = tether.Buffer(64, resource=host)
    buf.copy_from_host(bytes(range(64)))
    return World(host, pool, buf)


def census_back_to(before: int) -> bool:
    """True once the census is back at ``before``; a full collection (slow) only when needed."""
    if tether.debug.live_objects() == before:
        return True
    gc.collect()
    return tether.debug.live_objects() == before


def attempt(fn, arg_name, words, extra=()):
    """Call fn(); an allowed failure must have a message, no cffi wording, and - when
    Python raised it (not the library) - name the argument."""
    try:
        return True, fn()
    except ALLOWED + extra as e:
        assert not isinstance(e, (OverflowError, AttributeError, IndexError, KeyError)), repr(e)
        msg = str(e)
        assert msg, f"{type(e).__name__} with an empty message"
        assert not any(w in msg for w in CFFI_WORDS), f"cffi wording leaked: {type(e).__name__}: {msg}"
        if not isinstance(e, (tether.TetherError, BufferError)):
            assert any(w in msg for w in words), \
                f"{type(e).__name__}: {msg!r} does not name the argument {arg_name!r} ({words})"
        return False, e


# ---- the functions and their arguments -----------------------------------------------
# Each spec: name -> (defaults, call(world, **args) -> result or None, cleanup(world, args, result),
#                     {argument: words its error message must contain}, size-like arguments, extra allowed).

def _close(_w, _a, r):
    if r is not None and hasattr(r, "close"):
        r.close()


def _noop(_w, _a, _r):
    pass


def _dealloc(w, a, p):
    if p:
        w.host.deallocate(p, a["size"], a["alignment"])


def _from_handle_cleanup(kind):
    def cleanup(_w, a, obj):
        if obj is None:
            return
        if a.get("owned"):  # it adopted a reference that was not ours: give one back first
            (lib.tether_buffer_retain if kind == "buffer" else lib.tether_resource_retain)(obj._h)
        obj.close()
    return cleanup


def _slot(a) -> int:
    """The slot a set/push addressed (device=None: the resource's own, as the API resolves it)."""
    if a["device"] is not None:
        return a["device"]
    return a["resource"].device if a["resource"] is not None else tether.CURRENT_DEVICE


def _restore_set(w, a, prev):
    slot = _slot(a)
    again = tether.set_current_resource(prev, slot)
    if again is not None:
        again.close()
    if prev is not None:
        prev.close()


def _unset_if(w, a, installed):
    if installed:
        slot = _slot(a)
        r = tether.set_current_resource(None, slot)
        if r is not None:
            r.close()


def _pop(w, a, _r):
    tether.pop_current_resource(_slot(a))


def _using(w, resource, device):
    with tether.using(resource, device):
        pass


SPECS = {
    "parse_size": ({"value": 1}, lambda w, value: tether.parse_size(value), _noop,
                   {"value": ("size",)}, ("value",)),
    "Buffer": ({"size": 16, "resource": Live("resource"), "stream": None},
               lambda w, size, resource, stream: tether.Buffer(size, resource=resource, stream=stream), _close,
               {"size": ("size",), "resource": ("resource",), "stream": ("stream",)}, ("size",)),
    "Buffer(device)": ({"size": 16, "device": tether.HOST},
                       lambda w, size, device: tether.Buffer(size, device=device), _close,
                       {"size": ("size",), "device": ("device",)}, ("size",)),
    "Buffer.resize": ({"new_size": 32}, lambda w, new_size: w.buf.resize(new_size), _noop,
                      {"new_size": ("new_size",)}, ("new_size",)),
    "Buffer.copy_from_host": ({"src": b"abc", "offset": 0},
                              lambda w, src, offset: w.buf.copy_from_host(src, offset), _noop,
                              {"src": ("src",), "offset": ("offset",)}, ()),
    "Buffer.copy_to_host": ({"out": None, "offset": 0, "size": None},
                            lambda w, out, offset, size: w.buf.copy_to_host(out, offset, size), _noop,
                            {"out": ("out",), "offset": ("offset",), "size": ("size",)}, ()),
    "Buffer.copy_from": ({"src": Live("buffer"), "size": None}, lambda w, src, size: w.buf.copy_from(src, size),
                         _noop, {"src": ("src",), "size": ("size",)}, ()),
    "Buffer.set_stream": ({"stream": 0}, lambda w, stream: w.buf.set_stream(stream), _noop,
                          {"stream": ("stream",)}, ()),
    "Buffer.__dlpack__": ({"stream": None, "max_version": None, "dl_device": None, "copy": None},
                          lambda w, **k: w.buf.__dlpack__(**k), _noop,
                          {"stream": ("stream",), "max_version": ("max_version",), "dl_device": ("dl_device",),
                           "copy": ("copy",)}, (), (BufferError,)),
    "Buffer.from_handle": ({"handle": 1, "owned": False},
                           lambda w, handle, owned: tether.Buffer.from_handle(handle, owned=owned),
                           _from_handle_cleanup("buffer"), {"handle": ("handle",), "owned": ("owned",)}, ()),
    "Resource.from_handle": ({"handle": 1, "owned": False},
                             lambda w, handle, owned: tether.Resource.from_handle(handle, owned=owned),
                             _from_handle_cleanup("resource"), {"handle": ("handle",), "owned": ("owned",)}, ()),
    "HostResource.allocate": ({"size": 64, "alignment": 0, "stream": None},
                              lambda w, size, alignment, stream: w.host.allocate(size, alignment, stream),
                              _dealloc, {"size": ("size",), "alignment": ("alignment",), "stream": ("stream",)},
                              ("size",)),
    "PoolResource.deallocate": ({"ptr": "real", "size": 64, "alignment": 0, "stream": None},
                                None, None,
                                {"ptr": ("ptr",), "size": ("size",), "alignment": ("alignment",),
                                 "stream": ("stream",)}, ()),
    "PoolResource": ({"upstream": Live("resource"), "initial_size": None, "maximum_size": None,
                      "growth_size": None},
                     lambda w, **k: tether.PoolResource(**k), _close,
                     {"upstream": ("upstream",), "initial_size": ("initial_size",),
                      "maximum_size": ("maximum_size",), "growth_size": ("growth_size",)},
                     ("initial_size", "growth_size")),
    "PoolResource(RMM names)": ({"upstream_mr": Live("resource"), "initial_pool_size": None,
                                 "maximum_pool_size": None},
                                lambda w, **k: tether.PoolResource(**k), _close,
                                {"upstream_mr": ("upstream",), "initial_pool_size": ("initial",),
                                 "maximum_pool_size": ("maximum",)}, ("initial_pool_size",)),
    "StatisticsAdaptor": ({"upstream": Live("resource")}, lambda w, upstream: tether.StatisticsAdaptor(upstream),
                          _close, {"upstream": ("upstream",)}, ()),
    "CudaResource": ({"device": 0}, lambda w, device: tether.CudaResource(device), _close,
                     {"device": ("device",)}, ()),
    "ManagedResource": ({"device": 0}, lambda w, device: tether.ManagedResource(device), _close,
                        {"device": ("device",)}, ()),
    "PinnedHostResource": ({"device": 0}, lambda w, device: tether.PinnedHostResource(device), _close,
                           {"device": ("device",)}, ()),
    "AsyncResource": ({"device": 0, "initial_pool_size": None, "release_threshold": None,
                       "maximum_pool_size": None, "use_default_pool": False, "ipc_handle_type": None},
                      lambda w, **k: tether.AsyncResource(**k), _close,
                      {"device": ("device",), "initial_pool_size": ("initial_pool_size",),
                       "release_threshold": ("release_threshold",), "maximum_pool_size": ("maximum_pool_size",),
                       "use_default_pool": ("use_default_pool",), "ipc_handle_type": ("ipc_handle_type",)},
                      ("initial_pool_size", "release_threshold")),
    "get_current_resource": ({"device": tether.HOST}, lambda w, device: tether.get_current_resource(device),
                             _close, {"device": ("device",)}, ()),
    "is_current_resource_locked": ({"device": tether.HOST},
                                   lambda w, device: tether.is_current_resource_locked(device), _noop,
                                   {"device": ("device",)}, ()),
    "pop_current_resource": ({"device": tether.HOST}, lambda w, device: tether.pop_current_resource(device),
                             _noop, {"device": ("device",)}, ()),
    "set_current_resource": ({"resource": Live("resource"), "device": None},
                             lambda w, resource, device: tether.set_current_resource(resource, device),
                             _restore_set, {"resource": ("resource",), "device": ("device",)}, ()),
    "set_current_resource_if_unset": ({"resource": Live("resource"), "device": None},
                                      lambda w, resource, device: tether.set_current_resource_if_unset(resource,
                                                                                                      device),
                                      _unset_if, {"resource": ("resource",), "device": ("device",)}, ()),
    "push_current_resource": ({"resource": Live("resource"), "device": None},
                              lambda w, resource, device: tether.push_current_resource(resource, device), _pop,
                              {"resource": ("resource",), "device": ("device",)}, ()),
    "using": ({"resource": Live("resource"), "device": None}, _using, _noop,
              {"resource": ("resource",), "device": ("device",)}, ()),
    "lock_current_resource": ({"device": 10**6}, lambda w, device: tether.lock_current_resource(device), _noop,
                              {"device": ("device",)}, ()),
    "debug.live_objects": ({"kind": None}, lambda w, kind: tether.debug.live_objects(kind), _noop,
                           {"kind": ("kind",)}, ()),
}


def _pool_deallocate_case(w, args):
    """deallocate on a pool (it keeps a table of what it handed out, so any int is safe to pass)."""
    real = w.pool.allocate(64)
    a = dict(args)
    if a["ptr"] == "real":
        a["ptr"] = real
    freed = False
    try:
        ok, _ = attempt(lambda: w.pool.deallocate(a["ptr"], a["size"], a["alignment"], a["stream"]),
                        "ptr/size/alignment/stream", ("ptr", "size", "alignment", "stream"))
        freed = ok and a["ptr"] == real
    finally:
        if not freed:
            w.pool.deallocate(real, 64)


def _may_lock_a_real_slot(device) -> bool:
    if device is None or isinstance(device, bool):
        return True
    return isinstance(device, int) and -2 <= device < 1024


@pytest.mark.parametrize("name", list(SPECS))
@SETTINGS
@given(data=st.data())
def test_every_argument(name, data):
    defaults, call, cleanup, words, sizes, *extra = SPECS[name]
    extra = extra[0] if extra else ()
    arg = data.draw(st.sampled_from(sorted(defaults)), label="argument")
    strategy = DEVICES if arg == "device" else ANY
    raw = data.draw(strategy, label=arg)
    if arg in sizes:
        assume(not_a_real_allocation(raw))
    if name == "lock_current_resource":
        assume(not _may_lock_a_real_slot(raw))  # locking is irreversible: only values no slot has
    if name == "Buffer.__dlpack__" and arg == "copy":
        assume(not isinstance(raw, Live))

    before = tether.debug.live_objects()
    w = world()
    try:
        args = {k: w.value(v) for k, v in defaults.items()}
        args[arg] = w.value(raw)
        if name == "PoolResource.deallocate":
            _pool_deallocate_case(w, args)
        else:
            ok, result = attempt(lambda: call(w, **args), arg, words[arg], extra)
            if ok:
                cleanup(w, args, result)
            result = None  # a DLPack capsule, say, pins the buffer until it dies
        # The world is still usable after whatever happened.
        assert w.buf.size >= 0
        with tether.Buffer(8, resource=w.pool) as b:
            b.copy_from_host(b"12345678")
            assert b.tobytes() == b"12345678"
    finally:
        w.close()
        del w, args
    assert census_back_to(before), f"{name}({arg}={raw!r}) changed the census"


def test_no_argument_functions():
    assert isinstance(tether.cuda_available(), bool)
    for fn in (tether.cuda_device_count, tether.cuda_driver_version):
        ok, _ = attempt(fn, "-", ("-",))
    assert tether.abi_version() >= 0
    for fn in (tether.get_include, tether.get_cmake_dir, tether.get_library):
        assert isinstance(fn(), str)
    for fn in (tether.debug.orphaned_resources, tether.debug.orphaned_bytes):
        assert fn() >= 0


@SETTINGS
@given(value=ANY)
def test_set_leak_report_takes_any_truth_value(value):
    if isinstance(value, Live):
        value = object()
    tether.debug.set_leak_report(value)
    tether.debug.set_leak_report(False)


@SETTINGS
@given(handle=st.one_of(INTS, WRONG), kind=st.sampled_from(["buffer", "resource"]))
def test_resource_methods_on_any_handle_value(handle, kind):
    """A handle value from anywhere: refused cleanly or (very unlikely) a live one, wrapped and given back."""
    assume(not isinstance(handle, Live))
    cls = tether.Buffer if kind == "buffer" else tether.Resource
    before = tether.debug.live_objects()
    ok, obj = attempt(lambda: cls.from_handle(handle), "handle", ("handle",))
    if ok:
        obj.close()
    obj = None
    assert census_back_to(before)
