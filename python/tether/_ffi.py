"""Load the compiled extension and refuse a library it was not built for.

Everything else in the package imports ``ffi`` and ``lib`` from here, so the
checks run exactly once, at ``import tether``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # The cffi objects are generated at build time from the headers and carry
    # no type information: every ``lib.tether_*`` function and every ``ffi``
    # method is ``Any`` to the type checker. This is the only place where that
    # untyped surface enters the package; the callers convert what comes back
    # (int(...), bool(...), str) before returning it from a typed function.
    ffi: Any
    lib: Any
    __version__: str
else:
    try:
        from ._tether import ffi, lib
    except ImportError as e:  # pragma: no cover - only for broken installs
        raise ImportError(
            "tether: cannot load the compiled extension tether._tether "
            f"({e}). Install the package with 'pip install .' (it builds the extension "
            "and ships libtether.so); importing the source tree does not work.") from e

    from ._version import __version__


def check_versions(package_version: str, compiled_version: str, compiled_abi: int, runtime_abi: int,
                   compiled_number: int, runtime_number: int, library: str = "libtether") -> None:
    """Raise ImportError unless the Python code, the extension and libtether belong together.

    * the extension must have been compiled for this package version (a stale
      extension next to newer .py files, or the reverse, is a broken install);
    * libtether's ABI version must equal the one the extension was compiled
      against (the ABI version is the SOVERSION; a different one may have
      different layouts);
    * libtether must not be older than the headers (functions are only appended).
    """
    if compiled_version != package_version:
        raise ImportError(
            f"tether: the Python package is version {package_version} but its compiled extension "
            f"was built from tether {compiled_version} headers; reinstall tether")
    if runtime_abi != compiled_abi:
        raise ImportError(
            f"tether: {library} has ABI version {runtime_abi}, but this package was built for ABI "
            f"version {compiled_abi}; refusing to load it (reinstall tether, or make sure no other "
            "libtether.so is preloaded)")
    if runtime_number < compiled_number:
        raise ImportError(
            f"tether: {library} is version {runtime_number}, older than the headers this package "
            f"was built with ({compiled_number}); reinstall tether")


def library_path() -> str:
    """The file libtether was loaded from."""
    path: bytes = ffi.string(lib._tether_py_library_path())
    return path.decode("utf-8", "replace")


check_versions(
    package_version=__version__,
    compiled_version=f"{lib.TETHER_VERSION_MAJOR}.{lib.TETHER_VERSION_MINOR}.{lib.TETHER_VERSION_PATCH}",
    compiled_abi=lib.TETHER_ABI_VERSION,
    runtime_abi=lib.tether_abi_version(),
    compiled_number=lib.TETHER_VERSION_NUMBER,
    runtime_number=lib.tether_version_number(),
    library=library_path() or "libtether",
)

__all__ = ["ffi", "lib", "__version__", "check_versions", "library_path"]
