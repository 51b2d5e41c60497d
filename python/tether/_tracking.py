"""TrackingAdaptor: outstanding allocations and a leak report (``tether/tracking.h``)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from . import _kinds
from ._convert import bool_value
from ._errors import InvalidArgumentError, check
from ._ffi import ffi, lib
from ._resources import Resource, UpstreamAdaptor, create, register


class TrackingRecord(NamedTuple):
    """One outstanding allocation of a TrackingAdaptor (``tether_tracking_record_t``)."""
    #: The address (an int).
    ptr: int
    #: Bytes requested.
    size: int
    #: The stream the allocation was ordered on (an int; 0 is the default stream).
    stream: int
    #: The allocating thread's native id (``threading.get_native_id()`` on that thread).
    thread: int
    #: The captured call stack, one frame per line, innermost first; None without stack capture.
    stack: str | None
    #: Alignment requested.
    alignment: int
    #: Allocation order: 1 for the adaptor's first allocation, then 2, ...
    sequence: int


def _read_text(call: Callable[[Any, int, Any], int]) -> str:
    """Run a text call of tracking.h with the needed-size rule until the text fits."""
    needed = ffi.new("size_t*")
    capacity = 1024
    while True:
        buf = ffi.new("char[]", capacity)
        check(call(buf, capacity, needed))
        if needed[0] <= capacity:
            text: bytes = ffi.string(buf)
            return text.decode("utf-8", "replace")
        capacity = int(needed[0]) + 256  # it may grow before the next call


@register(lib.TETHER_RESOURCE_KIND_TRACKING)
class TrackingAdaptor(UpstreamAdaptor):
    """Records every allocation made through it until it is freed.

    Arguments:

    * ``upstream`` - the resource to draw from; the adaptor keeps it alive.
      RMM spelling: ``upstream_mr``.
    * ``capture_stacks`` - also capture each allocation's call stack (a
      ``backtrace()`` per allocation; the frames are native code: Python
      frames show up as the interpreter's). Default False: tracking then costs
      one short critical section per call.

    Read the records with outstanding(), or a text report with report().
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, capture_stacks: bool = _kinds.TRACKING_CAPTURE_STACKS, *,
                 upstream_mr: Resource | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        stacks = bool_value(capture_stacks, "capture_stacks")
        opts = ffi.new("tether_tracking_options_t*")
        check(lib.tether_tracking_options_init(opts, ffi.sizeof("tether_tracking_options_t")))
        opts.capture_stacks = stacks
        self._init_from(create(lib.tether_tracking_adaptor_create, up, opts))

    def outstanding(self) -> list[TrackingRecord]:
        """The allocations made through this adaptor and not yet freed, oldest first.

        A snapshot: allocations and frees on other threads while it is taken
        may or may not be in it.
        """
        h = self._live()
        count = ffi.new("size_t*")
        self._check(lib.tether_tracking_adaptor_get_outstanding(h, ffi.NULL, 0, count))
        while True:
            capacity = int(count[0]) + 16
            recs = ffi.new("tether_tracking_record_t[]", capacity)
            recs[0].struct_size = ffi.sizeof("tether_tracking_record_t")
            self._check(lib.tether_tracking_adaptor_get_outstanding(h, recs, capacity, count))
            if count[0] <= capacity:
                break
        out = []
        for i in range(int(count[0])):
            r = recs[i]
            ptr = int(ffi.cast("uintptr_t", r.ptr))
            stack = self._stack(r.ptr) if r.stack_depth else None
            out.append(TrackingRecord(ptr, int(r.size), int(r.stream), int(r.thread_id), stack,
                                      int(r.alignment), int(r.sequence)))
        return out

    def _stack(self, ptr: Any) -> str:
        h = self._live()
        try:
            return _read_text(lambda buf, cap, needed: lib.tether_tracking_adaptor_get_stack(h, ptr, buf, cap, needed))
        except InvalidArgumentError:
            return ""  # freed by another thread since the snapshot

    def report(self) -> str:
        """A leak report: one line per outstanding allocation (with its stack, if captured).

        The format is the one of ``tether_tracking_adaptor_report`` (see the
        docs): a summary line, then ``#<sequence> ptr=0x... size=N
        alignment=N stream=0x... thread=N`` per allocation, oldest first.
        """
        h = self._live()
        return _read_text(lambda buf, cap, needed: lib.tether_tracking_adaptor_report(h, buf, cap, needed))

    def get_allocated_bytes(self) -> int:
        """Bytes outstanding through this adaptor (RMM's TrackingResourceAdaptor spelling)."""
        return sum(r.size for r in self.outstanding())

    def get_outstanding_allocations_str(self) -> str:
        """RMM spelling of report()."""
        return self.report()
