"""``TETHER_HOOKS``: install allocator hooks at ``import tether`` when the
environment asks for them (an explicit opt-in; without it nothing is installed).

``TETHER_HOOKS=torch,cupy,numba`` enables each named hook with resource=None:
each allocation comes from the current resource of its device at that moment,
which ``TETHER_RESOURCE`` can configure (see the "Resource specs" page).
"""

from __future__ import annotations

import importlib
import os

#: The hooks TETHER_HOOKS may name, and the tether module of each.
HOOKS = {"torch": "tether.torch", "cupy": "tether.cupy", "numba": "tether.numba"}


def requested(value: str | None) -> list[str]:
    """The hook names in a TETHER_HOOKS value, in order, without duplicates.

    Raises ValueError naming an unknown hook.
    """
    names: list[str] = []
    for part in (value or "").split(","):
        name = part.strip().lower()
        if not name:
            continue
        if name not in HOOKS:
            raise ValueError(f"TETHER_HOOKS names an unknown hook {part.strip()!r} (known: {', '.join(HOOKS)})")
        if name not in names:
            names.append(name)
    return names


def install_from_environment() -> list[str]:
    """Enable the hooks TETHER_HOOKS names; returns their names.

    A hook that cannot be installed raises (ImportError for a missing library,
    RuntimeError for PyTorch's allocator already initialised...) with the
    variable named: an opt-in that silently did nothing would be worse.
    """
    names = requested(os.environ.get("TETHER_HOOKS"))
    for name in names:
        try:
            importlib.import_module(HOOKS[name]).enable()
        except Exception as e:
            message = f"TETHER_HOOKS={os.environ.get('TETHER_HOOKS')!r}: cannot enable the {name} hook: {e}"
            try:
                again = type(e)(message)
            except Exception:  # an exception type with another constructor
                again = RuntimeError(message)
            raise again from e
    return names
