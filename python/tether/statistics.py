"""Allocation statistics by scope and by call site, over a StatisticsAdaptor.

The counter stack of :class:`tether.StatisticsAdaptor` (``push_counters()`` /
``pop_counters()``) made convenient, after ``rmm.statistics``:

* :func:`enable_statistics` wraps the current resource of a slot in a
  StatisticsAdaptor (once); :func:`get_statistics`, :func:`push_statistics`
  and :func:`pop_statistics` work on the current resource when it is one;
* :func:`statistics` is a context manager that counts what its block allocates;
* :func:`profiler` is a decorator and a context manager that adds, per
  function or block name, the calls, bytes and allocations to a
  :class:`ProfilerRecords` table (``print(tether.statistics.default_profiler_records)``).

Every function takes ``adaptor=`` (a StatisticsAdaptor to use) or ``device=``
(the current-resource slot to look in: None is the current CUDA device, as for
``tether.get_current_resource``; ``tether.HOST`` the host slot).

>>> import tether, tether.statistics as ts
>>> stats = tether.StatisticsAdaptor(tether.HostResource())
>>> with ts.profiler(name="load", adaptor=stats):
...     p = stats.allocate("1 MiB")
...     stats.deallocate(p, "1 MiB")
>>> ts.default_profiler_records.records["load"].memory_total
1048576
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, TypeVar

from ._convert import DeviceLike
from ._current import get_current_resource, set_current_resource
from ._resources import Statistics, StatisticsAdaptor

__all__ = [
    "enable_statistics", "get_statistics", "push_statistics", "pop_statistics", "statistics",
    "ProfilerRecords", "MemoryRecord", "profiler",
]

F = TypeVar("F", bound=Callable[..., Any])


def _adaptor(adaptor: StatisticsAdaptor | None, device: DeviceLike | None) -> StatisticsAdaptor | None:
    """The given adaptor, or a new wrapper of the current resource of ``device`` if that is a
    StatisticsAdaptor (the caller closes it: see _scoped), else None."""
    if adaptor is not None:
        if not isinstance(adaptor, StatisticsAdaptor):
            raise TypeError(f"adaptor must be a tether.StatisticsAdaptor, not {type(adaptor).__name__}")
        return adaptor
    current = get_current_resource(device)
    if isinstance(current, StatisticsAdaptor):
        return current
    current.close()
    return None


@contextlib.contextmanager
def _scoped(adaptor: StatisticsAdaptor | None, device: DeviceLike | None) -> Iterator[StatisticsAdaptor | None]:
    """_adaptor(), closing the wrapper it made (never the caller's adaptor) afterwards."""
    a = _adaptor(adaptor, device)
    try:
        yield a
    finally:
        if a is not None and a is not adaptor:
            a.close()


def enable_statistics(device: DeviceLike | None = None) -> StatisticsAdaptor:
    """Make the current resource of ``device`` a StatisticsAdaptor; return it.

    If it already is one, nothing changes. Otherwise the current resource is
    wrapped in a new StatisticsAdaptor, which is installed in its place
    (``tether.set_current_resource``); the previous resource stays alive as
    its upstream.
    """
    current = get_current_resource(device)
    if isinstance(current, StatisticsAdaptor):
        return current
    with current:
        adaptor = StatisticsAdaptor(current)
    previous = set_current_resource(adaptor, device)
    if previous is not None:
        previous.close()
    return adaptor


def get_statistics(device: DeviceLike | None = None, *, adaptor: StatisticsAdaptor | None = None) -> Statistics | None:
    """The counters of the adaptor's top set, or None if statistics are not enabled."""
    with _scoped(adaptor, device) as a:
        return None if a is None else a.statistics()


def push_statistics(device: DeviceLike | None = None, *, adaptor: StatisticsAdaptor | None = None) -> Statistics | None:
    """Push a new counter set (see StatisticsAdaptor.push_counters); None if not enabled."""
    with _scoped(adaptor, device) as a:
        return None if a is None else a.push_counters()


def pop_statistics(device: DeviceLike | None = None, *, adaptor: StatisticsAdaptor | None = None) -> Statistics | None:
    """Pop the top counter set and return it (see StatisticsAdaptor.pop_counters); None if not enabled."""
    with _scoped(adaptor, device) as a:
        return None if a is None else a.pop_counters()


@contextlib.contextmanager
def statistics(device: DeviceLike | None = None, *,
               adaptor: StatisticsAdaptor | None = None) -> Iterator[StatisticsAdaptor]:
    """Count what the block allocates; yields the StatisticsAdaptor.

    With an adaptor (given, or current for ``device``) a counter set is pushed
    on entry and popped on exit. Otherwise the current resource of ``device``
    is wrapped in a StatisticsAdaptor for the block and restored afterwards.
    Read the figures inside the block with ``adaptor.statistics()``.
    """
    with _scoped(adaptor, device) as a:
        if a is not None:
            a.push_counters()
            try:
                yield a
            finally:
                a.pop_counters()
            return
    previous = get_current_resource(device)
    with previous:
        wrapped = StatisticsAdaptor(previous)
        set_current_resource(wrapped, device)
        try:
            yield wrapped
        finally:
            replaced = set_current_resource(previous, device)
            if replaced is not None:
                replaced.close()
            wrapped.close()


@dataclass
class MemoryRecord:
    """What a profiled function or block allocated, over all its calls."""

    #: Times the function or block ran.
    num_calls: int = 0
    #: Bytes allocated, all calls together.
    memory_total: int = 0
    #: The most bytes live at once within one call (the highest of the calls).
    memory_peak: int = 0
    #: Allocations made, all calls together.
    count_total: int = 0

    def add(self, s: Statistics) -> None:
        """Add one call's counters."""
        self.num_calls += 1
        self.memory_total += s.total_bytes
        self.memory_peak = max(self.memory_peak, s.peak_bytes)
        self.count_total += s.total_count


class ProfilerRecords:
    """A thread-safe table of MemoryRecord by name, filled by :func:`profiler`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, MemoryRecord] = {}

    def add(self, name: str, data: Statistics) -> None:
        """Add one call's counters to the record ``name``."""
        with self._lock:
            self._records.setdefault(name, MemoryRecord()).add(data)

    @property
    def records(self) -> dict[str, MemoryRecord]:
        """A copy of the table: name -> MemoryRecord."""
        with self._lock:
            return {k: MemoryRecord(v.num_calls, v.memory_total, v.memory_peak, v.count_total)
                    for k, v in self._records.items()}

    def clear(self) -> None:
        """Forget every record."""
        with self._lock:
            self._records.clear()

    def report(self, ordered_by: Literal["num_calls", "memory_peak", "memory_total",
                                         "count_total"] = "memory_peak") -> str:
        """The table as text, largest first by ``ordered_by``; bytes as exact integers."""
        if ordered_by not in ("num_calls", "memory_peak", "memory_total", "count_total"):
            raise ValueError(f"ordered_by must be one of num_calls, memory_peak, memory_total, count_total, "
                             f"not {ordered_by!r}")
        rows = sorted(self.records.items(), key=lambda kv: getattr(kv[1], ordered_by), reverse=True)
        lines = ["Memory profile (tether.statistics)", f"Ordered by: {ordered_by}; memory in bytes", ""]
        if not rows:
            return "\n".join(lines + ["No records (was the profiled code run with statistics enabled?)"])
        lines.append(f"{'ncalls':>8} {'memory_peak':>15} {'memory_total':>15} {'allocations':>12}  name")
        for name, r in rows:
            lines.append(f"{r.num_calls:8,d} {r.memory_peak:15,d} {r.memory_total:15,d} {r.count_total:12,d}  {name}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.records!r})"


#: The table :func:`profiler` writes to unless given ``records=``.
default_profiler_records = ProfilerRecords()


def _call_site_name(func: Callable[..., Any]) -> str:
    """``file:line(qualname)`` of a function, as rmm.statistics names its records."""
    f = inspect.unwrap(func)
    try:
        _, line = inspect.getsourcelines(f)
        path = inspect.getfile(f)
    except (OSError, TypeError):
        return getattr(f, "__qualname__", repr(f))
    return f"{path}:{line}({getattr(f, '__qualname__', '?')})"


class profiler:  # noqa: N801 - used as a decorator and a context manager, like rmm.statistics.profiler
    """Record, per name, the calls, bytes and allocations of a function or block.

    As a decorator (``@profiler()`` or ``@profiler(name=...)``; the default
    name is ``file:line(function)``) and as a context manager (``with
    profiler(name="load"):``; a name is required). Each call pushes a counter
    set on the StatisticsAdaptor (``adaptor=``, or the current resource of
    ``device`` - a no-op if that is not a StatisticsAdaptor), runs, pops the
    set and adds it to ``records`` (default: ``default_profiler_records``).
    Nested profiled calls are counted in their own record and in every
    enclosing one. Counter sets are per adaptor, not per thread: profile one
    thread's work at a time, or give each thread its own adaptor.
    """

    def __init__(self, *, name: str = "", records: ProfilerRecords | None = None,
                 adaptor: StatisticsAdaptor | None = None, device: DeviceLike | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if adaptor is not None and not isinstance(adaptor, StatisticsAdaptor):
            raise TypeError(f"adaptor must be a tether.StatisticsAdaptor, not {type(adaptor).__name__}")
        self._name = name
        self._records = default_profiler_records if records is None else records
        self._adaptor = adaptor
        self._device = device
        self._active: list[StatisticsAdaptor | None] = []

    def _begin(self) -> StatisticsAdaptor | None:
        a = _adaptor(self._adaptor, self._device)
        if a is not None:
            a.push_counters()
        return a

    def _end(self, a: StatisticsAdaptor | None, name: str) -> None:
        if a is None:
            return
        try:
            self._records.add(name, a.pop_counters())
        finally:
            if a is not self._adaptor:
                a.close()

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise TypeError(f"profiler() decorates a function, not {type(func).__name__}")
        name = self._name or _call_site_name(func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            a = self._begin()
            try:
                return func(*args, **kwargs)
            finally:
                self._end(a, name)

        return wrapper  # type: ignore[return-value]

    def __enter__(self) -> profiler:
        if not self._name:
            raise ValueError("profiler used as a context manager needs a name: with profiler(name='...'):")
        self._active.append(self._begin())
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self._end(self._active.pop(), self._name)
        return False
