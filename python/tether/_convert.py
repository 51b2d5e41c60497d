"""Argument conversion shared by every wrapper: the one place where Python values
become C values (sizes, streams, devices, addresses, C strings).

Every check of a value crossing into C lives here, so each argument of each
class is refused the same way: TypeError for the wrong type (bool is never an
int here), ValueError naming the argument for a value the C type cannot hold
(an int outside its range, a string with NUL or that cannot be encoded). cffi
would otherwise raise OverflowError, wrap ints modulo 2**64, or cut strings at
their first NUL.
"""

from __future__ import annotations

import operator
import os
from typing import Protocol, SupportsIndex, Union, cast

from ._errors import error_for
from ._ffi import ffi, lib

SIZE_MAX = (1 << 64) - 1
UINTPTR_BITS = 8 * ffi.sizeof("uintptr_t")
UINTPTR_MAX = (1 << UINTPTR_BITS) - 1

#: The host slot of the current-resource table (``TETHER_DEVICE_HOST``).
HOST: int = lib.TETHER_DEVICE_HOST
#: "The calling thread's current CUDA device" (``TETHER_DEVICE_CURRENT``).
CURRENT_DEVICE: int = lib.TETHER_DEVICE_CURRENT
UINT32_MAX = (1 << 32) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
# Messages quote at most this many characters of a user's value.
MAX_QUOTED = 200


def excerpt(value: object) -> str:
    """``repr(value)`` cut to MAX_QUOTED characters (what messages quote of user input)."""
    text = repr(value)
    if len(text) <= MAX_QUOTED:
        return text
    return f"{text[:MAX_QUOTED]}... ({len(text)} characters)"


def int_value(value: object, what: str, lo: int, hi: int, kind: str = "an int", must: str = "must be") -> int:
    """An integer argument for a C integer holding [lo, hi].

    Anything with ``__index__`` (an int, a NumPy integer) except bool; TypeError
    for other types, ValueError naming ``what`` and the value outside the range.
    """
    if isinstance(value, bool):
        raise TypeError(f"{what} {must} {kind}, not bool")
    try:
        n = operator.index(cast(SupportsIndex, value))
    except TypeError:
        raise TypeError(f"{what} {must} {kind}, not {type(value).__name__}") from None
    if not lo <= n <= hi:
        raise ValueError(f"{what} {must} {kind} between {lo} and {hi}, not {excerpt(n)}")
    return n


def bool_value(value: object, what: str) -> int:
    """A bool argument as the C ABI's int flag (0 or 1); TypeError for anything else
    (a string "false" would be true)."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    return 1 if value else 0


def u32_value(value: object, what: str) -> int:
    """An int argument for a uint32_t field."""
    return int_value(value, what, 0, UINT32_MAX)


def address_value(value: object, what: str) -> int:
    """An address (a ``void*``) returned by Python code (``what``: the callable, e.g.
    "the allocate callback f"): an int in [0, 2**64); TypeError otherwise,
    ValueError naming ``what`` and the value outside the range."""
    return int_value(value, what, 0, UINTPTR_MAX, "an int address", must="must return")


def c_string(value: object, what: str, *, path: bool = False) -> bytes:
    """The bytes of a C string argument: a str, bytes or (with ``path``) an
    os.PathLike. Text is encoded as UTF-8, paths as the file system does
    (os.fsencode). ValueError naming ``what`` for a NUL character (C would cut
    the string there: another file, another spec) or text that cannot be encoded."""
    raw: object = value
    if path and isinstance(value, os.PathLike):
        raw = os.fspath(value)
    if isinstance(raw, str):
        try:
            data = os.fsencode(raw) if path else raw.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{what}: cannot encode {excerpt(raw)} ({e.reason})") from None
    elif isinstance(raw, bytes):
        data = raw
    else:
        kinds = "a str, bytes or path-like object" if path else "a str"
        raise TypeError(f"{what} must be {kinds}, not {type(value).__name__}")
    if b"\0" in data:
        raise ValueError(f"{what} must not contain NUL characters (got {excerpt(raw)})")
    return data



class CudaStreamProtocol(Protocol):
    """An object exporting the CUDA stream protocol (cuda.core, CuPy, ...): ``(version, handle)``."""

    def __cuda_stream__(self) -> tuple[int, int]: ...


class HasCudaStream(Protocol):
    """An object with an int ``cuda_stream`` attribute (``torch.cuda.Stream``)."""

    @property
    def cuda_stream(self) -> int: ...


# The public type aliases (exported as tether.Size, tether.StreamLike, tether.DeviceLike and
# documented on docs/python_types.rst).
#: A byte count: an int or a string such as ``"64 MiB"`` (see :func:`parse_size`).
Size = Union[int, str]
#: A stream argument: None (stream 0), a CUstream value, or a stream object.
StreamLike = Union[None, int, CudaStreamProtocol, HasCudaStream]
#: A device argument: a CUDA device id, ``HOST`` or ``CURRENT_DEVICE``; any integer
#: (an int, a NumPy integer: whatever has ``__index__``), never a bool.
DeviceLike = Union[int, SupportsIndex]
#: A CUDA device id (or ``HOST`` / ``CURRENT_DEVICE``), as the C ABI takes it.
Device = int

def parse_size(value: object, what: str = "size", device: int = HOST) -> int:
    """A byte count from an int or a string such as ``"64 MiB"``, ``"1.5GiB"``, ``"100 MB"``, ``"80%"``.

    Strings are read by the library (``tether_parse_size``), in the grammar of a
    spec's sizes, so Python, C and specs accept the same text: binary units
    (KiB, MiB, GiB, TiB, PiB) are powers of 1024, decimal units (kB, MB, GB, TB,
    PB) powers of 1000; units are case-insensitive, the space is optional and a
    bare number is bytes. A percentage is a share of ``device``'s total memory,
    rounded down (``CURRENT_DEVICE``: the calling thread's device); with the
    default ``HOST`` a percentage is refused. The result must be a whole number
    of bytes in [0, 2**64). Raises ValueError naming ``what`` (negative,
    fractional, unknown unit, too large, more than 64 characters), TypeError
    (not an int or str), or NoDeviceError (a percentage without a GPU).
    """
    if isinstance(value, str):
        text = c_string(value, what)
        out = ffi.new("size_t*")
        status = lib.tether_parse_size(text, device, out)
        if status != lib.TETHER_OK:
            message = ffi.string(lib.tether_last_error_message()).decode("utf-8", "replace")
            raise error_for(status, f"{what}: {message.removeprefix('tether_parse_size: ')}")
        return int(out[0])
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int or a string like '64 MiB', not bool")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{what}: {value!r} is not a whole number of bytes")
        n = int(value)
    else:
        try:
            n = operator.index(cast(SupportsIndex, value))
        except TypeError:
            raise TypeError(f"{what} must be an int or a string like '64 MiB', not {type(value).__name__}") from None
    if n < 0:
        raise ValueError(f"{what} must not be negative (got {n})")
    if n > SIZE_MAX:
        raise ValueError(f"{what} {n} does not fit in size_t")
    return n


def percent_device(device: object) -> int:
    """The device a percentage size of a device resource refers to: ``device``'s id, or
    CURRENT_DEVICE for None (resolved by the library only if a percentage is given)."""
    return CURRENT_DEVICE if device is None else device_value(device)


def optional_size(value: object, what: str, device: int = HOST) -> int:
    """parse_size(), with None meaning 0 (the C default)."""
    return 0 if value is None else parse_size(value, what, device)


def stream_value(stream: object) -> int:
    """The tether_stream_t for a stream argument.

    None is the default stream (0); an int is a CUstream / cudaStream_t value;
    any object with ``__cuda_stream__`` (the CUDA stream protocol of cuda.core,
    CuPy and others: it returns ``(version, handle)``) gives its handle; an
    object with an int ``cuda_stream`` attribute (PyTorch) gives that.
    """
    if stream is None:
        return 0
    value: int
    if isinstance(stream, int) and not isinstance(stream, bool):
        value = stream
    elif hasattr(stream, "__cuda_stream__"):
        proto = cast(CudaStreamProtocol, stream).__cuda_stream__()
        try:
            _version, handle = proto
        except (TypeError, ValueError):
            raise TypeError(f"__cuda_stream__() of {type(stream).__name__} returned {proto!r}, "
                            "expected a (version, handle) tuple") from None
        try:
            value = operator.index(handle)
        except TypeError:
            raise TypeError(f"__cuda_stream__() of {type(stream).__name__} returned a handle of type "
                            f"{type(handle).__name__}, expected an int") from None
    elif isinstance(getattr(stream, "cuda_stream", None), int):
        value = cast(HasCudaStream, stream).cuda_stream
    else:
        raise TypeError(f"stream must be None, an int or an object with __cuda_stream__, "
                        f"not {type(stream).__name__}")
    if not 0 <= value <= UINTPTR_MAX:
        raise ValueError(f"stream: {excerpt(value)} is not a CUstream value (0 <= stream < 2**{UINTPTR_BITS})")
    return value


def device_value(device: object) -> int:
    """The device argument of the C ABI: None is TETHER_DEVICE_CURRENT."""
    if device is None:
        return CURRENT_DEVICE
    return int_value(device, "device", INT32_MIN, INT32_MAX,
                     "an int (a CUDA device id, tether.HOST or tether.CURRENT_DEVICE)")


#: Size in bytes of a CUDA IPC handle (``TETHER_IPC_HANDLE_SIZE``): what
#: :py:meth:`tether.Buffer.export_ipc` returns and :py:func:`tether.import_ipc` takes.
IPC_HANDLE_SIZE: int = lib.TETHER_IPC_HANDLE_SIZE


def ipc_handle_value(data: object, what: str = "data") -> bytes:
    """The bytes of an IPC handle: any bytes-like object of exactly IPC_HANDLE_SIZE bytes.

    TypeError for a str or a non-bytes-like object, ValueError naming ``what``
    for the wrong length. The content is checked by the library.
    """
    if isinstance(data, str):
        raise TypeError(f"{what} must be bytes (from Buffer.export_ipc()), not str")
    try:
        raw = bytes(memoryview(cast(bytes, data)))
    except TypeError:
        raise TypeError(f"{what} must be bytes (from Buffer.export_ipc()), not {type(data).__name__}") from None
    if len(raw) != IPC_HANDLE_SIZE:
        raise ValueError(f"{what} must be {IPC_HANDLE_SIZE} bytes (a tether IPC handle from Buffer.export_ipc()), "
                         f"not {len(raw)}")
    return raw


def handle_value(handle: object, what: str = "handle") -> int:
    """A C handle given as an int: an address, 0 <= handle < 2**64 (0 is NULL, refused by the caller)."""
    return int_value(handle, what, 0, UINTPTR_MAX, "an int (a C handle value)")


def pool_value(pool: object, what: str = "pool") -> int:
    """A CUDA memory pool handle (CUmemoryPool / cudaMemPool_t) given as an int, as an object
    with a ``handle`` attribute (cuda.core's DeviceMemoryResource), or as a cuda.bindings
    handle object (``int()`` of it is the address); 0 is refused: None means "the current pool"."""
    value = getattr(pool, "handle", pool)
    if not hasattr(value, "__index__") and hasattr(value, "__int__") and not isinstance(value, (float, str, bytes)):
        value = int(value)  # cuda.bindings' CUmemoryPool and cudaMemPool_t
    n = int_value(value, what, 0, UINTPTR_MAX, "a CUDA memory pool handle (an int, or an object with .handle)")
    if n == 0:
        raise ValueError(f"{what} must not be 0 (NULL); pass None for the device's current pool")
    return n


def alignment_value(alignment: object) -> int:
    """An alignment in bytes: 0 means TETHER_DEFAULT_ALIGNMENT (256); else a power of two."""
    return int_value(alignment, "alignment", 0, SIZE_MAX, "an int (0 or a power of two)")


def count_value(value: object, what: str) -> int:
    """A non-negative count (a size_t the library takes up to 2**63 - 1)."""
    return int_value(value, what, 0, 2**63 - 1)
