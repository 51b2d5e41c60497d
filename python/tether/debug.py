"""Census and leak reporting (tether/debug.h), for tests and diagnostics."""

from __future__ import annotations

from ._ffi import lib

_TYPES = {None: lib.TETHER_OBJECT_ANY, "any": lib.TETHER_OBJECT_ANY,
          "resource": lib.TETHER_OBJECT_RESOURCE, "resources": lib.TETHER_OBJECT_RESOURCE,
          "buffer": lib.TETHER_OBJECT_BUFFER, "buffers": lib.TETHER_OBJECT_BUFFER}


def live_objects(kind: str | int | None = None) -> int:
    """Live handles in the process, of every caller (Python, C, the table...).

    kind: None or "any", "resource", "buffer" (or a TETHER_OBJECT_* value).
    Defaults the table created count too.
    """
    if isinstance(kind, int) and not isinstance(kind, bool):
        if kind not in _TYPES.values():
            raise ValueError(f"kind {kind} is not a TETHER_OBJECT_* value "
                             f"({', '.join(str(v) for v in sorted(set(_TYPES.values())))})")
        t = kind
    elif kind is not None and not isinstance(kind, str):
        raise TypeError(f"kind must be None, a string ('any', 'resource', 'buffer') or an int, "
                        f"not {type(kind).__name__}")
    else:
        key = kind.lower() if isinstance(kind, str) else kind
        if key not in _TYPES:
            raise ValueError(f"kind must be None, 'any', 'resource' or 'buffer', not {kind!r}")
        t = _TYPES[key]
    return int(lib.tether_debug_live_objects(t))


def orphaned_resources() -> int:
    """Resources whose last handle went away while raw allocations (Resource.allocate) were outstanding."""
    return int(lib.tether_debug_orphaned_resources())


def orphaned_bytes() -> int:
    """Bytes of raw allocations outstanding in orphaned resources."""
    return int(lib.tether_debug_orphaned_bytes())


def set_leak_report(enable: bool) -> None:
    """Print orphaned resources and live buffers on stderr at process exit (also TETHER_LEAK_REPORT=1)."""
    lib.tether_debug_set_leak_report(1 if enable else 0)


__all__ = ["live_objects", "orphaned_resources", "orphaned_bytes", "set_leak_report"]
