"""Argument handling shared by the adaptors: the upstream and its RMM alias."""

from __future__ import annotations

from typing import Any

from ._resources import Resource, _alias, handle_of


def upstream_handle(cls_name: str, upstream: Resource | None, upstream_mr: Resource | None) -> Any:
    """The live handle of ``upstream`` (or its RMM spelling ``upstream_mr``).

    TypeError if neither or both are given, or if it is not a tether resource;
    InvalidHandleError if it was closed.
    """
    up = _alias(upstream, upstream_mr, "upstream", "upstream_mr")
    if up is None:
        raise TypeError(f"{cls_name}() needs an upstream resource, e.g. {cls_name}(tether.HostResource(), ...)")
    return handle_of(up, "upstream")
