"""Resource specs: a resource stack named by one string (``tether/spec.h``).

``from_spec("statistics(pool(cuda(), initial_size=80%))")`` builds the stack in
libtether - the same parser C, C++ and the ``TETHER_RESOURCE*`` environment
variables use - and ``Resource.spec`` writes any stack back as a spec.
The grammar and every resource's parameters: the "Resource specs" page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import check
from ._ffi import ffi, lib

if TYPE_CHECKING:
    from ._resources import Resource


def from_spec(spec: str) -> "Resource":
    """Build the resource stack that ``spec`` names, e.g. ``"pool(host, initial_size=64MiB)"``.

    Returns the outermost resource (it keeps its upstreams alive). Raises
    ``InvalidArgumentError`` (a ``ValueError``) naming the position and the
    token for a spec that does not parse or names an unknown resource or
    parameter, and what the resources' constructors raise otherwise
    (``NoDeviceError`` without a GPU, ``OutOfMemoryError``, ...).
    """
    from ._convert import c_string
    from ._resources import create
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a str, not {type(spec).__name__}")
    return create(lib.tether_resource_create_from_spec, c_string(spec, "spec"))


def spec_of(handle: Any) -> str:
    """The spec of a live resource handle (cdata), via ``tether_resource_get_spec``.

    NotSupportedError for a stack no spec can name (a callback resource, ...)."""
    n = ffi.new("size_t*")
    check(lib.tether_resource_get_spec(handle, ffi.NULL, 0, n))
    while True:
        buf = ffi.new("char[]", n[0] + 1)
        check(lib.tether_resource_get_spec(handle, buf, n[0] + 1, n))
        if n[0] < len(buf):
            return str(ffi.string(buf).decode("utf-8"))  # the library writes only UTF-8 specs
