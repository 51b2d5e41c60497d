"""cuda.core memory from tether: a cuda.core ``MemoryResource`` backed by a tether resource.

``tether.cuda_core.MemoryResource(pool).allocate(n, stream=s)`` returns a
cuda.core ``Buffer``; when cuda.core frees it (``close()`` or garbage
collection), the tether allocation goes back into the same tether resource,
on the stream cuda.core names. :func:`to_buffer` shows an existing
:class:`tether.Buffer` to cuda.core without copying.

Works with cuda.core as ``cuda.core`` (1.0 and later) and as
``cuda.core.experimental`` (older releases). Importing this module needs
cuda.core (``pip install tether[cuda]`` or ``pip install cuda-core``) and
raises ImportError without it; it changes nothing global.
"""

from __future__ import annotations

from typing import Any, SupportsInt, cast

try:
    try:
        from cuda.core import Buffer as _CoreBuffer, MemoryResource as _CoreMemoryResource
        from cuda.core import Stream as _CoreStream
    except ImportError:  # cuda.core before 1.0 lived in cuda.core.experimental
        from cuda.core.experimental import Buffer as _CoreBuffer, MemoryResource as _CoreMemoryResource
        from cuda.core.experimental import Stream as _CoreStream
except ImportError as e:  # pragma: no cover - exercised by the CPU tests with cuda.core hidden
    from ._hooks import missing_library
    raise missing_library("tether.cuda_core", "cuda.core", "cuda.core", "pip install cuda-core (or pip install tether[cuda])",
                          e) from e

from ._buffer import Buffer
from ._convert import Size, StreamLike, parse_size, stream_value
from ._hooks import LEGACY_STREAMS, free_on, own_reference
from ._ffi import lib
from ._resources import Resource, wrap_borrowed

__all__ = ["MemoryResource", "to_buffer"]


# Does this cuda.core's Buffer.from_handle take stream= (the deallocation stream, 1.0+)?
_FROM_HANDLE_STREAM = True


def _leaf_kind(resource: Resource) -> int:
    r = resource.upstream
    kind = resource._kind
    while r is not None:
        kind = r._kind
        up = r.upstream
        r.close()
        r = up
    return int(kind)


def _core_stream(stream: Any) -> Any:
    """A cuda.core Stream for from_handle(stream=...), or None for the default stream."""
    if stream is None or isinstance(stream, _CoreStream):
        return stream
    value = stream_value(stream)
    if value in LEGACY_STREAMS:
        return None
    from_handle = getattr(_CoreStream, "from_handle", None)
    return from_handle(value) if from_handle is not None else None


def _wrap(ptr: int, size: int, mr: Any, stream: Any) -> Any:
    """Buffer.from_handle(ptr, size, mr=mr), ordering the free on ``stream`` where cuda.core can."""
    global _FROM_HANDLE_STREAM
    cs = _core_stream(stream) if _FROM_HANDLE_STREAM else None
    if cs is not None:
        try:
            return _CoreBuffer.from_handle(ptr, size, mr=mr, stream=cs)
        except TypeError as e:
            if "stream" not in str(e):
                raise
            _FROM_HANDLE_STREAM = False  # an older cuda.core: it passes the stream to deallocate()
    return _CoreBuffer.from_handle(ptr, size, mr=mr)


# cuda.core ships no type information here, so its base class is Any to mypy.
class MemoryResource(_CoreMemoryResource):  # type: ignore[misc]
    """A cuda.core memory resource that allocates from the tether resource ``resource``.

    The object keeps its own reference to ``resource``, and every outstanding
    allocation holds one more (each is a :class:`tether.Buffer`, kept in a dict
    by address until cuda.core deallocates it), so the tether resource lives
    while any of its memory is in use.
    """

    def __init__(self, resource: Resource) -> None:
        if resource is None:
            raise TypeError("resource must be a tether resource, not None")
        self._resource = cast(Resource, own_reference(resource))  # not None: checked above
        self._buffers: dict[int, Buffer] = {}
        self._managed: bool = _leaf_kind(self._resource) == lib.TETHER_RESOURCE_KIND_MANAGED

    @property
    def resource(self) -> Resource:
        """The tether resource (a new wrapper with its own reference)."""
        return wrap_borrowed(self._resource._h)

    @property
    def outstanding(self) -> int:
        """How many allocations cuda.core has not deallocated yet."""
        return len(self._buffers)

    def allocate(self, size: Size, stream: StreamLike = None) -> Any:
        """A cuda.core ``Buffer`` of ``size`` bytes from the tether resource, ordered on
        ``stream`` (a cuda.core Stream, any object with ``__cuda_stream__``, an int,
        or None for the default stream). cuda.core frees it into the same tether
        resource when the Buffer is closed or collected. Size 0 gives a null Buffer
        that holds no tether memory."""
        n = size if size.__class__ is int and size >= 0 else parse_size(size)
        if n == 0:
            return _wrap(0, 0, self, stream)
        s = 0 if stream is None else stream_value(stream)
        buf = Buffer(n, resource=self._resource, stream=s)
        ptr = buf.ptr
        self._buffers[ptr] = buf
        try:
            return _wrap(ptr, n, self, stream)
        except BaseException:
            del self._buffers[ptr]
            buf.close()
            raise

    def deallocate(self, ptr: SupportsInt, size: Size, stream: StreamLike = None) -> None:
        """Give back memory from :meth:`allocate` (cuda.core calls this). The free is
        ordered on ``stream`` if given (None: the allocation's own stream).
        Raises ValueError for a pointer this resource did not hand out."""
        p = int(ptr)
        buf = self._buffers.pop(p, None)
        if buf is None:
            if p == 0:
                return  # a 0-byte buffer owns nothing
            raise ValueError(f"tether.cuda_core.MemoryResource: pointer 0x{p:x} was not allocated here "
                             "(or was already deallocated)")
        if stream is None:
            buf.close()
        else:
            free_on(buf, stream_value(stream))

    @property
    def is_device_accessible(self) -> bool:
        """True if kernels can access the memory (from the tether resource)."""
        return self._resource.device_accessible

    @property
    def is_host_accessible(self) -> bool:
        """True if host code can access the memory (from the tether resource)."""
        return self._resource.host_accessible

    @property
    def is_managed(self) -> bool:
        """True if the memory is CUDA managed memory (a ManagedResource at the end of the chain)."""
        return self._managed

    @property
    def device_id(self) -> int:
        """The tether resource's device; -1 (tether.HOST) for host memory."""
        return self._resource.device

    def __repr__(self) -> str:
        return f"<tether.cuda_core.MemoryResource over {self._resource!r}, {len(self._buffers)} outstanding>"


class _KeepAlive(_CoreMemoryResource):  # type: ignore[misc]
    """For cuda.core without Buffer.from_handle(owner=...): an mr whose deallocate()
    drops the tether Buffer it keeps (the memory frees when no one else holds it)."""

    def __init__(self, buf: Buffer, device_accessible: bool, host_accessible: bool, device: int) -> None:
        self._buf: Buffer | None = buf
        self._flags = (device_accessible, host_accessible, device)

    def allocate(self, size: Size, stream: StreamLike = None) -> Any:
        raise NotImplementedError("this memory resource only keeps a tether.Buffer alive for cuda.core")

    def deallocate(self, ptr: SupportsInt, size: Size, stream: StreamLike = None) -> None:
        buf, self._buf = self._buf, None
        if buf is not None:
            buf.close()

    @property
    def is_device_accessible(self) -> bool:
        return self._flags[0]

    @property
    def is_host_accessible(self) -> bool:
        return self._flags[1]

    @property
    def device_id(self) -> int:
        return self._flags[2]


def to_buffer(buf: Buffer) -> Any:
    """A cuda.core ``Buffer`` over the memory of the :class:`tether.Buffer` ``buf``, without copying.

    The cuda.core Buffer holds its own reference to the tether memory (closing or
    deleting ``buf`` later does not free it); the memory goes back to its tether
    resource, on ``buf``'s stream, once both are gone. Like any export, it makes
    ``buf.resize()`` refuse.
    """
    if not isinstance(buf, Buffer):
        raise TypeError(f"buf must be a tether.Buffer, not {type(buf).__name__}")
    info = buf._info()
    own = Buffer.from_handle(buf.handle)  # our own reference, for cuda.core
    own._exported = True  # pins the C buffer while cuda.core holds it, whoever closes buf first
    ptr, size = int(own.ptr), int(info.size)
    try:
        return _CoreBuffer.from_handle(ptr, size, owner=own)
    except TypeError as e:
        if "owner" not in str(e):
            own.close()
            raise
    # cuda.core before owner= existed: let an mr's deallocate() drop the reference.
    keeper = _KeepAlive(own, bool(info.device_accessible), bool(info.host_accessible), int(info.device))
    return _CoreBuffer.from_handle(ptr, size, mr=keeper)
