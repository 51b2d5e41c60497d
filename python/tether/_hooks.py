"""What the Python hooks (tether.cupy, tether.numba, tether.cuda_core, tether.rmm) share.

Each hook holds its own reference to the resource it was given, raises the
same kind of error when its library is missing, and frees a Buffer on the
stream the other library names.
"""

from __future__ import annotations

from ._buffer import Buffer
from ._errors import closed_error
from ._resources import Resource, wrap_borrowed

# The legacy default stream, spelled two ways: tether's 0 and CU_STREAM_LEGACY (1),
# which cuda.core's and RMM's default-stream objects report through __cuda_stream__.
LEGACY_STREAMS = (0, 1)


def missing_library(hook: str, library: str, module: str, install: str, error: ImportError) -> ImportError:
    """The error a hook module raises when ``library`` (imported as ``module``) cannot be imported.

    A library that is not installed stays a ModuleNotFoundError (what
    ``pytest.importorskip`` expects); one that failed to import stays an ImportError.
    """
    kind = ModuleNotFoundError if isinstance(error, ModuleNotFoundError) else ImportError
    return kind(f"{hook} needs {library}, which is not installed (or failed to import): {install}",
                name=module)


def own_reference(resource: Resource | None) -> Resource | None:
    """A new wrapper with its own reference to ``resource`` (None stays None).

    Raises TypeError for anything but a tether resource, and the closed-object
    error for a closed one.
    """
    if resource is None:
        return None
    if not isinstance(resource, Resource):
        raise TypeError(f"resource must be a tether resource or None, not {type(resource).__name__}")
    if resource._h is None:
        raise closed_error(resource)
    return wrap_borrowed(resource._h)


def free_on(buf: Buffer, stream: int) -> None:
    """Free ``buf`` ordered on ``stream`` (a raw stream value) instead of its own stream."""
    try:
        ours = buf.stream
        if stream != ours and not (stream in LEGACY_STREAMS and ours in LEGACY_STREAMS):
            buf.set_stream(stream)
    finally:
        buf.close()
