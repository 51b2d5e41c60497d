"""LoggingAdaptor: one CSV line per allocate/free, to a file or a callable."""

from __future__ import annotations

import os
import warnings
from typing import Callable, cast

from . import _callbacks
from ._convert import c_string
from ._errors import TetherError, check
from ._ffi import ffi, lib
from ._handle import Handle
from ._resources import Resource, UpstreamAdaptor, _alias, create, query_struct, register, struct_tuple

#: The header line of every log (the columns of each line that follows).
LOG_HEADER = "time_ns,thread,action,pointer,size,stream,status"


class LoggingInfo(struct_tuple("tether_logging_info_t")):  # type: ignore[misc]
    """What a LoggingAdaptor wrote to its file (``tether_logging_info_t``): ``lines`` logged
    (the header included), ``lost_lines`` that a failed write dropped, and ``error``, the errno
    of a failure no successful flush has cleared yet (0 if none)."""

    __slots__ = ()


@register(lib.TETHER_RESOURCE_KIND_LOGGING)
class LoggingAdaptor(UpstreamAdaptor):
    """Forwards to ``upstream`` (kept alive) and logs every allocate and free
    (``tether_logging_adaptor_create``).

    * ``upstream`` - the resource to forward to. RMM spelling: ``upstream_mr``.
    * ``path`` - a file to write the log to (created, or truncated if it
      exists); ``str`` or path-like. RMM spelling: ``log_file_name``.
    * ``callback`` - a callable given each line (a ``str`` without newline).
      It runs on the allocating thread, possibly several at once; an exception
      in it is reported through ``sys.unraisablehook`` and the allocation goes on.

    Give ``path``, ``callback`` or both. The log starts with the header
    :py:data:`tether.LOG_HEADER` (``time_ns,thread,action,pointer,size,stream,status``);
    see :doc:`/resources/logging` for the columns. Failed allocations and
    refused frees are logged too. The file is flushed by :py:meth:`flush`,
    :py:meth:`close` and when the C adaptor is destroyed.

    Write errors (a full disk, ``/dev/full``) never pass in silence: the lines
    a failed write carried are lost and counted (:py:meth:`logging_info`),
    and every later :py:meth:`flush` and :py:meth:`close` raises
    :py:exc:`tether.InternalError` until a flush writes again; a finalizer
    warns (``RuntimeWarning``) instead. See :doc:`/resources/logging`.
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, path: str | os.PathLike[str] | None = None,
                 callback: Callable[[str], object] | None = None, *, upstream_mr: Resource | None = None,
                 log_file_name: str | os.PathLike[str] | None = None) -> None:
        path = cast("str | os.PathLike[str] | None", _alias(path, log_file_name, "path", "log_file_name"))
        up = self._upstream_handle(upstream, upstream_mr)
        if path is None and callback is None:
            raise TypeError("LoggingAdaptor() needs a path or a callback (or both)")
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        opts = ffi.new("tether_logging_options_t*")
        check(lib.tether_logging_options_init(opts, ffi.sizeof("tether_logging_options_t")))
        keep = None
        if path is not None:
            keep = ffi.new("char[]", c_string(path, "path", path=True))
            opts.path = keep
        context = None
        if callback is not None:
            context = _callbacks.register(callback)
            opts.callback = _callbacks.LOG
            opts.user = context
            opts.destroy = _callbacks.DESTROY
        try:
            self._init_from(create(lib.tether_logging_adaptor_create, up, opts))
        except BaseException:
            if context is not None:
                _callbacks.unregister(context)  # on failure the C side never calls destroy
            raise

    def flush(self) -> None:
        """Write out the lines the log file buffers (nothing to do for a callback).

        Raises :py:exc:`tether.InternalError` naming the path, the reason and
        the lines lost so far if a write failed, now or earlier, until a flush
        writes pending lines again.
        """
        self._check(lib.tether_logging_adaptor_flush(self._live()))

    def logging_info(self) -> LoggingInfo:
        """How many lines were logged to the file and how many of them were lost."""
        info: LoggingInfo = LoggingInfo.from_struct(
            query_struct("tether_logging_info_t", lib.tether_logging_adaptor_get_info, self))
        return info

    def _final_flush(self) -> TetherError | None:
        """Flush before this object's reference goes: the error, if the log lost lines."""
        h = getattr(self, "_h", None)
        if h is None:
            return None
        try:
            check(lib.tether_logging_adaptor_flush(h))
        except TetherError as e:
            return e
        return None

    def close(self) -> None:
        """Flush the log and give this object's reference back (idempotent).

        Raises :py:exc:`tether.InternalError` (after giving the reference
        back) if the log lost lines; other holders of the adaptor (a pool over
        it, another wrapper) keep it alive, and the C adaptor flushes again
        when it is destroyed.
        """
        error = self._final_flush()
        Handle.close(self)
        if error is not None:
            raise error

    def __del__(self) -> None:
        try:
            error = self._final_flush()
            if error is not None:
                warnings.warn(f"tether.LoggingAdaptor finalized with lost log lines: {error}", RuntimeWarning,
                              stacklevel=2)
        except BaseException:  # noqa: BLE001 - a finalizer never raises (interpreter shutdown included)
            pass
        Handle.close(self)
