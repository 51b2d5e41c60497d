"""LoggingAdaptor: one CSV line per allocate/free, to a file or a callable."""

from __future__ import annotations

import os
from typing import Callable, cast

from . import _callbacks
from ._errors import check
from ._ffi import ffi, lib
from ._resources import Resource, UpstreamAdaptor, _alias, create, register

#: The header line of every log (the columns of each line that follows).
LOG_HEADER = "time_ns,thread,action,pointer,size,stream,status"


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
    refused frees are logged too. The file is flushed by :py:meth:`flush` and
    when the C adaptor is destroyed.
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
            keep = ffi.new("char[]", os.fsencode(path))
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
        """Write out the lines the log file buffers (nothing to do for a callback)."""
        self._check(lib.tether_logging_adaptor_flush(self._live()))
