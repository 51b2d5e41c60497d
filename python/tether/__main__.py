"""``python -m tether``: the ``tether`` command (see tether.cli)."""

from .cli import _entry

_entry()
