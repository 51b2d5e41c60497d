"""Memory resources: thin wrappers of tether_resource_t handles.

A resource is created by its class (``HostResource()``, ``PoolResource(upstream)``
...). Handles that come back from the library - the current resource, an
upstream, a buffer's resource - are wrapped in the class that matches their
kind (``Resource.from_handle``), each wrapper holding its own reference.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, NamedTuple, TypeVar, cast

from ._convert import HOST, Size as Size, StreamLike as StreamLike, alignment_value, handle_value, optional_size, parse_size, stream_value
from ._errors import InvalidHandleError, check, closed_error, stale_handle_error
from ._ffi import ffi, lib
from ._handle import Handle

# Keep the GIL where libtether's quick path serves the call (python/ffibuild.py).
_allocate = lib._tether_py_gil_allocate
_deallocate = lib._tether_py_gil_deallocate
_last_status = lib._tether_py_last_status
# `alignment is _ZERO` is the fast paths' test for the default alignment: CPython
# keeps one 0 object, so it holds for every int 0; anything else (False, 0.0, a
# numpy zero) takes the checked path.
_ZERO = 0


def _constants(prefix: str) -> dict[str, int]:
    """The cdef's integer constants whose names start with ``prefix``, prefix removed."""
    found = {name[len(prefix):]: getattr(lib, name) for name in dir(lib) if name.startswith(prefix)}
    return dict(sorted(found.items(), key=lambda item: item[1]))


class ResourceKind(enum.IntEnum):
    """What a resource is (``tether_resource_kind_t``).

    One member per ``TETHER_RESOURCE_KIND_*`` constant of the headers (derived
    from them, not listed here). A kind this package does not know yet (a
    newer libtether, a resource made in C) is still an int-compatible
    ResourceKind, named ``UNKNOWN_<value>``, rather than an error.
    """

    _ignore_ = ["_name", "_value"]
    for _name, _value in _constants("TETHER_RESOURCE_KIND_").items():
        vars()[_name] = _value

    @classmethod
    def _missing_(cls, value: object) -> "ResourceKind | None":
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        member = int.__new__(cls, value)
        member._name_ = f"UNKNOWN_{value}"
        member._value_ = value
        return cls._value2member_map_.setdefault(value, member)  # type: ignore[return-value]


def struct_fields(ctype: str) -> tuple[str, ...]:
    """The field names of a C struct of the cdef, without the leading ``struct_size``."""
    return tuple(name for name, _ in ffi.typeof(ctype).fields if name != "struct_size")


def struct_tuple(ctype: str) -> type[tuple[Any, ...]]:
    """A NamedTuple class whose fields are those of the C struct ``ctype`` (in order).

    Subclass it to give it a name and a docstring; ``from_struct(cdata)`` fills
    it from a struct the library wrote. A field added to the C struct appears
    in Python with the next build, with no list to edit here. Integer fields
    arrive as ints; a pointer or string field arrives as cdata, so a subclass
    with such fields overrides ``from_struct`` to convert them.
    """
    fields = struct_fields(ctype)
    base: Any = NamedTuple(f"_{ctype}", [(name, int) for name in fields])  # type: ignore[misc]

    def from_struct(cls: Any, cdata: Any) -> Any:
        return cls._make(getattr(cdata, name) for name in fields)

    return type(f"_{ctype}_base", (base,), {"__slots__": (), "from_struct": classmethod(from_struct),
                                            "_ctype": ctype})


def query_struct(ctype: str, fn: Callable[[Any, Any], int], owner: Handle) -> Any:
    """Call a ``tether_*_get_*(handle, ctype* out)`` query of ``owner`` and return the struct
    (struct_size set first, the status checked through ``owner._check``)."""
    out = ffi.new(ctype + "*")
    out.struct_size = ffi.sizeof(ctype)
    owner._check(fn(owner._live(), out))
    return out


def new_options(ctype: str, init: Callable[[Any, int], int], device: int = HOST, /, **sizes: object) -> Any:
    """A ``ctype`` options struct initialised by the library (``init(&o, sizeof o)``),
    then each keyword set as a size (None keeps the library's default; ints or
    strings like "64 MiB", or "80%" of ``device``'s memory: see parse_size). A
    keyword that is no field of the struct is a bug here (KeyError), not a user
    error."""
    opts = ffi.new(ctype + "*")
    check(init(opts, ffi.sizeof(ctype)))
    fields = struct_fields(ctype)
    for name, value in sizes.items():
        if name not in fields:
            raise KeyError(f"{ctype} has no field {name}")
        if value is not None:
            setattr(opts, name, optional_size(value, name, device))
    return opts


def handle_device(handle: Any) -> int:
    """The device of a live resource handle's memory (HOST for host memory): what a percentage size of
    a resource over it refers to."""
    return int(_properties(handle).device)


class Statistics(struct_tuple("tether_statistics_t")):  # type: ignore[misc]
    """Counters of a StatisticsAdaptor (``tether_statistics_t``; fields as in the C struct)."""

    __slots__ = ()


class PoolInfo(struct_tuple("tether_pool_info_t")):  # type: ignore[misc]
    """What a PoolResource holds (``tether_pool_info_t``; fields as in the C struct)."""

    __slots__ = ()


_CLASSES: dict[int, type[Resource]] = {}
_C = TypeVar("_C", bound="type[Resource]")


def _register(kind: int) -> Callable[[_C], _C]:
    def deco(cls: _C) -> _C:
        _CLASSES[kind] = cls
        return cls
    return deco


def _properties(h: Any) -> Any:
    props = ffi.new("tether_resource_properties_t*")
    props.struct_size = ffi.sizeof("tether_resource_properties_t")
    check(lib.tether_resource_get_properties(h, props))
    return props


def wrap_owned(raw: Any) -> "Resource":
    """Wrap a +1 resource handle (cdata) in the class of its kind; takes the reference.

    On failure the reference is given back, so nothing leaks.
    """
    try:
        props = _properties(raw)
    except BaseException:
        lib.tether_resource_release(raw)
        raise
    cls = _CLASSES.get(props.kind, Resource)
    obj = cls.__new__(cls)
    obj._h = raw
    obj._kind = props.kind
    obj._device = props.device
    obj._device_accessible = bool(props.device_accessible)
    obj._host_accessible = bool(props.host_accessible)
    return obj


def wrap_borrowed(raw: Any) -> "Resource":
    """Retain a borrowed resource handle (cdata) and wrap it."""
    if lib.tether_resource_retain(raw):  # touches no error state: the message is made here
        raise stale_handle_error("tether_resource_retain", raw, "resource")
    return wrap_owned(raw)


def handle_of(resource: object, what: str = "resource") -> Any:
    """The live cdata handle of a Resource argument (TypeError / InvalidHandleError otherwise).

    Never returns NULL: in the C ABI a NULL resource often means "the current
    one" or "the default", which a closed object must not silently become.
    """
    if not isinstance(resource, Resource):
        raise TypeError(f"{what} must be a tether resource, not {type(resource).__name__}")
    h = resource._h
    if h is None:
        raise closed_error(resource)
    return h


def create(fn: Callable[..., int], *args: Any) -> "Resource":
    """Call a tether_*_create(..., &out) function and wrap its +1 result."""
    out = ffi.new("tether_resource_t**")
    check(fn(*args, out))
    return wrap_owned(out[0])


class Resource(Handle):
    """A tether memory resource (base class of every resource type).

    Resources compare equal (``==``) as ``tether_resource_is_equal`` says
    (always for two wrappers of the same handle; for two resources of one kind
    and device that hand out the same sort of memory). Equality is for
    comparison only: memory is freed into the resource it came from, and any
    other resource refuses it (``ValueError``). ``hash`` is consistent with ``==``.
    """

    __slots__ = ("_kind", "_device", "_device_accessible", "_host_accessible")
    _kind: int
    _device: int
    _device_accessible: bool
    _host_accessible: bool
    _release = lib.tether_resource_release

    def __init__(self) -> None:
        raise TypeError("tether.Resource is abstract; create a HostResource, PoolResource, ... "
                        "or wrap a C handle with Resource.from_handle()")

    def _init_from(self, created: "Resource") -> None:
        # Subclass __init__ builds a temporary wrapper with create(), then moves its state here.
        self._kind, self._device = created._kind, created._device
        self._device_accessible, self._host_accessible = created._device_accessible, created._host_accessible
        self._h, created._h = created._h, None

    @classmethod
    def _from_handle(cls, owned_cdata: Any) -> "Resource":
        """Wrap a +1 ``tether_resource_t*`` cdata from the library (no __init__), by kind."""
        return wrap_owned(owned_cdata)

    @classmethod
    def from_handle(cls, handle: int, *, owned: bool = False) -> "Resource":
        """Wrap a C ``tether_resource_t*`` given as an int (e.g. from an extension module).

        owned=False (default): the handle is borrowed; the new object takes its own
        reference. owned=True: the object takes over the caller's reference.
        The result is an instance of the class matching the resource's kind.
        """
        raw = ffi.cast("tether_resource_t*", handle_value(handle))
        if not raw:
            raise InvalidHandleError("resource handle is NULL", lib.TETHER_ERROR_INVALID_HANDLE)
        obj = wrap_owned(raw) if owned else wrap_borrowed(raw)
        if not isinstance(obj, cls):
            obj.close()
            raise TypeError(f"handle is a {type(obj).__name__}, not a {cls.__name__}")
        return obj

    # ---- properties (fixed for the resource's lifetime) ----------------------

    @property
    def kind(self) -> ResourceKind:
        """What the resource is (ResourceKind)."""
        self._live()
        return ResourceKind(self._kind)

    @property
    def device(self) -> int:
        """The device whose memory this is, or tether.HOST (-1) for host memory."""
        self._live()
        return self._device

    @property
    def device_accessible(self) -> bool:
        """True if kernels on ``device`` may access the memory."""
        self._live()
        return self._device_accessible

    @property
    def host_accessible(self) -> bool:
        """True if host code may access the memory."""
        self._live()
        return self._host_accessible

    @property
    def name(self) -> str:
        """A short name: "host", "pool", "statistics", ..."""
        return str(ffi.string(lib.tether_resource_get_name(self._live())).decode("utf-8", "replace"))

    @property
    def spec(self) -> str:
        """A spec naming this resource's whole stack (``tether.from_spec(r.spec)`` rebuilds it).

        Raises :py:exc:`tether.NotSupportedError` for a stack no spec can name
        (a CallbackResource or FailureCallbackAdaptor in it, a LoggingAdaptor
        with a callback, a bin given as a resource, nested deeper than specs
        may be, a path that is not UTF-8): see the "Resource specs" page.
        ``str(resource)`` gives the same text when there is one.
        """
        from ._spec import spec_of
        h = self._live()
        try:
            return spec_of(h)
        except BaseException:
            if self._h is None:
                raise closed_error(self) from None
            raise

    def __str__(self) -> str:
        """The spec, or the repr() when no spec can name the stack (never raises)."""
        if getattr(self, "_h", None) is None:
            return repr(self)
        try:
            return self.spec
        except Exception:  # noqa: BLE001 - str() and repr() never raise
            return repr(self)

    @property
    def upstream(self) -> "Resource | None":
        """The resource this one draws from (a new wrapper with its own reference), or None."""
        out = ffi.new("tether_resource_t**")
        self._check(lib.tether_resource_get_upstream(self._live(), out))
        return wrap_borrowed(out[0]) if out[0] else None

    # ---- allocation -----------------------------------------------------------

    def allocate(self, size: Size, alignment: int = 0, stream: StreamLike = None) -> int:
        """Allocate ``size`` bytes (int or "64 KiB"), return the address as an int.

        alignment: a power of two; 0 means 256 bytes. stream: None (default
        stream), an int or an object with ``__cuda_stream__``. size 0 returns 0.
        The memory belongs to the caller until given back with deallocate() on
        this resource with the same size and alignment; prefer tether.Buffer,
        which frees itself.
        """
        # The hot path: plain ints, no out-parameter allocation (see python/src/tether_py.h),
        # and the argument checks written out here (a helper call costs ~80 ns).
        h = self._h
        if alignment is _ZERO and stream is None and size.__class__ is int and size >= 0 and h is not None:
            try:  # the common call: an int size, defaults for the rest
                p: int = _allocate(h, size, 0, 0)
            except OverflowError:
                raise ValueError(f"size {size} does not fit in size_t") from None
            if not p:
                self._check(_last_status())  # OK (nothing raised) for size 0
            return p
        n = size if size.__class__ is int and size >= 0 else parse_size(size)
        a = alignment if alignment.__class__ is int and alignment >= 0 else alignment_value(alignment)
        s = 0 if stream is None else stream_value(stream)
        if h is None:
            raise closed_error(self)
        try:
            p = _allocate(h, n, a, s)
        except OverflowError:
            raise ValueError(f"size {n} or alignment {a} does not fit in size_t") from None
        if not p:
            status = _last_status()
            if status:
                self._check(status)
        return p

    def deallocate(self, ptr: int, size: Size, alignment: int = 0, stream: StreamLike = None) -> None:
        """Give back memory from allocate() of this resource (same size and alignment).

        Raises InvalidArgumentError if the resource can tell the pointer is not
        its own or the size differs (the memory is then left untouched).
        """
        h = self._h
        if alignment is _ZERO and stream is None and size.__class__ is int and size >= 0 and h is not None:
            n, a, s = size, 0, 0  # the common call: an int size, defaults for the rest
        else:
            n = size if size.__class__ is int and size >= 0 else parse_size(size)
            a = alignment if alignment.__class__ is int and alignment >= 0 else alignment_value(alignment)
            s = 0 if stream is None else stream_value(stream)
            if h is None:
                raise closed_error(self)
        try:
            status = _deallocate(h, ptr, n, a, s)
        except OverflowError:
            raise ValueError(f"ptr {ptr!r} is not an address (0 <= ptr < 2**64)") from None
        except TypeError:
            raise TypeError(f"ptr must be an int address (from allocate()), not {type(ptr).__name__}") from None
        if status:
            self._check(status)

    def trim(self) -> None:
        """Return memory held but unused to the upstream (a pool gives back wholly free chunks)."""
        self._check(lib.tether_resource_trim(self._live()))

    # ---- identity ---------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Resource):
            return NotImplemented
        a, b = getattr(self, "_h", None), getattr(other, "_h", None)
        if a is None or b is None:
            return False  # a closed object equals only itself
        if a == b:
            return True
        out = ffi.new("int*")
        status = lib.tether_resource_is_equal(a, b, out)
        return status == 0 and bool(out[0])

    def __hash__(self) -> int:
        # Equal resources share kind and device (is_equal holds only within a kind).
        return hash((self._kind, self._device))

    def __repr__(self) -> str:
        h = getattr(self, "_h", None)
        if h is None:
            return f"<tether.{type(self).__name__} (closed)>"
        where = "host" if self._device == lib.TETHER_DEVICE_HOST else f"device {self._device}"
        try:
            name = self.name
        except Exception:  # noqa: BLE001 - closed by another thread meanwhile: repr never raises
            name = "?"
        return (f"<tether.{type(self).__name__} '{name}' {where} "
                f"handle=0x{int(ffi.cast('uintptr_t', h)):x}>")


class UpstreamAdaptor(Resource):
    """Base class of every resource built over an upstream resource (pool, adaptors).

    Subclasses take the upstream as their first argument, ``upstream``, or by
    RMM's keyword ``upstream_mr``, and turn it into a C handle with
    ``self._upstream_handle(upstream, upstream_mr)``: the "needs an upstream"
    and "not both" errors live only there. The resource keeps its upstream
    alive (the library retains it); ``.upstream`` returns it.
    """

    __slots__ = ()

    def _upstream_handle(self, upstream: "Resource | None", upstream_mr: "Resource | None") -> Any:
        """The live handle of the upstream argument (TypeError if missing, doubled or not a resource)."""
        upstream = _alias(upstream, upstream_mr, "upstream", "upstream_mr")
        if upstream is None:
            name = type(self).__name__
            raise TypeError(f"{name}() needs an upstream resource, e.g. {name}(tether.HostResource())")
        return handle_of(upstream, "upstream")

    @property
    def upstream(self) -> Resource:
        """The resource this one draws from (a new wrapper with its own reference)."""
        up = Resource.upstream.fget(self)  # type: ignore[attr-defined]
        if up is None:  # pragma: no cover - the library never makes one without an upstream
            raise InvalidHandleError(f"{type(self).__name__} has no upstream", lib.TETHER_ERROR_INTERNAL)
        return up  # type: ignore[no-any-return]


@_register(lib.TETHER_RESOURCE_KIND_POOL)
class PoolResource(UpstreamAdaptor):
    """A coalescing pool over an upstream resource (``tether_pool_resource_create``).

    Arguments (sizes are ints or strings like "64 MiB"):

    * ``upstream`` - the resource to draw chunks from; the pool keeps it alive.
      RMM spelling: ``upstream_mr``.
    * ``initial_size`` - bytes taken from upstream at creation (default 0).
      RMM spelling: ``initial_pool_size``.
    * ``maximum_size`` - the pool never holds more than this (default: no limit).
      RMM spelling: ``maximum_pool_size``.
    * ``growth_size`` - smallest chunk requested when the pool grows (default 1 MiB).
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, initial_size: Size | None = None,
                 maximum_size: Size | None = None, growth_size: Size | None = None, *,
                 upstream_mr: Resource | None = None, initial_pool_size: Size | None = None,
                 maximum_pool_size: Size | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        opts = new_options("tether_pool_options_t", lib.tether_pool_options_init, handle_device(up),
                           initial_size=_alias(initial_size, initial_pool_size, "initial_size", "initial_pool_size"),
                           maximum_size=_alias(maximum_size, maximum_pool_size, "maximum_size", "maximum_pool_size"),
                           growth_size=growth_size)
        self._init_from(create(lib.tether_pool_resource_create, up, opts))

    def pool_info(self) -> PoolInfo:
        """What the pool holds from its upstream now."""
        return cast(PoolInfo, PoolInfo.from_struct(
            query_struct("tether_pool_info_t", lib.tether_resource_get_pool_info, self)))


@_register(lib.TETHER_RESOURCE_KIND_STATISTICS)
class StatisticsAdaptor(UpstreamAdaptor):
    """Forwards to ``upstream`` (kept alive) and counts bytes and allocations.

    RMM spelling of the argument: ``upstream_mr``.
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, *, upstream_mr: Resource | None = None) -> None:
        self._init_from(create(lib.tether_statistics_adaptor_create, self._upstream_handle(upstream, upstream_mr)))

    def statistics(self) -> Statistics:
        """The counters now (a snapshot)."""
        return cast(Statistics, Statistics.from_struct(
            query_struct("tether_statistics_t", lib.tether_resource_get_statistics, self)))

    def reset_peak(self) -> None:
        """Reset peak_bytes and peak_count to the current values."""
        self._check(lib.tether_resource_reset_peak_statistics(self._live()))

    def push_counters(self) -> Statistics:
        """Push a new, zeroed counter set; return the figures of the set that was on top.

        While the new set is on top, allocations and frees through the adaptor
        change only it, and statistics() reads it (as RMM's
        ``StatisticsResourceAdaptor.push_counters``). The returned figures are
        read just before the push. Pair every push with pop_counters(); the
        ``tether.statistics`` module does this for scopes and functions.
        """
        before = self.statistics()
        self._check(lib.tether_statistics_adaptor_push_counters(self._live()))
        return before

    def pop_counters(self) -> Statistics:
        """Pop the top counter set, return its figures, and fold it into the set below.

        The fold is RMM's: ``below.peak = max(below.peak, below.current +
        popped.peak)``, ``below.current += popped.current``, ``below.total +=
        popped.total``. A set's current figures count what was allocated while
        it was on top minus every free made meanwhile (older memory included),
        so they may be negative; they are reported as 0 then and folded exactly.
        Raises ValueError (InvalidArgumentError) if nothing was pushed.
        """
        return cast(Statistics, Statistics.from_struct(
            query_struct("tether_statistics_t", lib.tether_statistics_adaptor_pop_counters, self)))


_T = TypeVar("_T")


def _alias(value: _T | None, alias: _T | None, name: str, alias_name: str) -> _T | None:
    """The value of an argument that has an RMM alias: either spelling, not both (TypeError)."""
    if alias is None:
        return value
    if value is not None:
        raise TypeError(f"pass either {name}= or {alias_name}=, not both")
    return alias


def register(kind: int) -> Callable[[_C], _C]:
    """Class decorator: wrap handles of ``kind`` in this class (every resource module uses it)."""
    return _register(kind)
