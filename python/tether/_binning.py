"""The binning resource (``tether/binning.h``): requests routed by size to bins."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Union

from ._convert import count_value, parse_size, u32_value
from ._ffi import ffi, lib
from ._resources import (Resource, Size, UpstreamAdaptor, _alias, create, handle_of, new_options, query_struct,
                         register, struct_tuple)


class BinningInfo(struct_tuple("tether_binning_info_t")):  # type: ignore[misc]
    """What a BinningResource routes (``tether_binning_info_t``): bin_count, smallest_bin, largest_bin."""

    __slots__ = ()


Bins = Union[tuple[int, int], Iterable[Union[Size, tuple[Size, "Resource | None"]]]]


def _exponent_pair(bins: object) -> tuple[int, int] | None:
    """``bins`` as a (min_exp, max_exp) pair of ints, or None if it is something else."""
    if isinstance(bins, tuple) and len(bins) == 2:
        lo, hi = bins
        if all(isinstance(e, int) and not isinstance(e, bool) for e in (lo, hi)):
            return int(lo), int(hi)
    return None


@register(lib.TETHER_RESOURCE_KIND_BINNING)
class BinningResource(UpstreamAdaptor):
    """Requests routed by size to bins (``tether_binning_resource_create``).

    A request of n bytes goes to the smallest bin of at least n bytes that
    honours its alignment (a fixed-size bin: up to its blocks' alignment); a
    request no bin takes goes to ``fallback`` (by default the upstream). A bin without a resource is a
    :class:`FixedSizeResource` of the bin's size over the upstream. The
    binning resource keeps the upstream, the fallback and every bin alive;
    memory goes back to the resource that served it.

    Arguments:

    * ``upstream`` - the memory of the fixed-size bins and the default fallback
      (kept alive). RMM spelling: ``upstream_mr``.
    * ``bins`` - None (no bins until :meth:`add_bin`), a range as a pair of
      exponents ``(min_exp, max_exp)`` for bins of 2**min_exp .. 2**max_exp
      bytes (RMM's ``min_size_exponent``/``max_size_exponent``, also accepted
      as keywords), or an explicit list whose items are sizes (ints or strings
      like "4 KiB") or ``(size, resource)`` pairs.
    * ``fallback`` - the resource for requests above every bin (default: the upstream).
    * ``blocks_to_preallocate`` - blocks per upstream chunk of the fixed-size
      bins this resource creates (default 128).
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, bins: Bins | None = None,
                 fallback: Resource | None = None, *, blocks_to_preallocate: int | None = None,
                 upstream_mr: Resource | None = None, min_size_exponent: int | None = None,
                 max_size_exponent: int | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        explicit: list[tuple[int, Resource | None]] = []
        lo = hi = 0
        if min_size_exponent is not None or max_size_exponent is not None:
            if bins is not None:
                raise TypeError("pass either bins= or min_size_exponent=/max_size_exponent=, not both")
            if min_size_exponent is None or max_size_exponent is None:
                raise TypeError("min_size_exponent and max_size_exponent go together")
            bins = (min_size_exponent, max_size_exponent)
        pair = _exponent_pair(bins)
        if pair is not None:
            lo, hi = pair
            lo, hi = u32_value(lo, "bins: min_size_exponent"), u32_value(hi, "bins: max_size_exponent")
        elif bins is not None:
            if isinstance(bins, (str, bytes)) or not isinstance(bins, Iterable):
                raise TypeError("bins must be a (min_exp, max_exp) pair or a list of sizes or (size, resource) pairs")
            for item in bins:
                if isinstance(item, tuple):
                    if len(item) != 2:
                        raise TypeError(f"bins: {item!r} is not a (size, resource) pair")
                    explicit.append((parse_size(item[0], "bin size"), item[1]))
                else:
                    explicit.append((parse_size(item, "bin size"), None))
        opts = new_options("tether_binning_options_t", lib.tether_binning_options_init)
        opts.min_size_exponent = lo
        opts.max_size_exponent = hi
        if blocks_to_preallocate is not None:
            opts.blocks_to_preallocate = count_value(blocks_to_preallocate, "blocks_to_preallocate")
        opts.fallback = handle_of(fallback, "fallback") if fallback is not None else ffi.NULL
        self._init_from(create(lib.tether_binning_resource_create, up, opts))
        for size, resource in explicit:
            self.add_bin(size, resource)

    def add_bin(self, size: Size, resource: Resource | None = None) -> None:
        """Add a bin for requests up to ``size`` bytes, served by ``resource`` (kept alive by
        this resource) or, if None, by a new FixedSizeResource of ``size`` over the upstream.

        ValueError for size 0 or a size that already has a bin.
        """
        n = parse_size(size, "size")
        h = handle_of(resource, "resource") if resource is not None else ffi.NULL
        self._check(lib.tether_binning_resource_add_bin(self._live(), n, h))

    @property
    def bin_sizes(self) -> list[int]:
        """The bin sizes, ascending (RMM's ``bin_sizes``)."""
        count = ffi.new("size_t*")
        self._check(lib.tether_binning_get_bin_sizes(self._live(), ffi.NULL, 0, count))
        sizes = ffi.new("size_t[]", max(count[0], 1))
        self._check(lib.tether_binning_get_bin_sizes(self._live(), sizes, count[0], count))
        return [int(sizes[i]) for i in range(min(count[0], len(sizes)))]

    def binning_info(self) -> BinningInfo:
        """How many bins there are and their range."""
        info: BinningInfo = BinningInfo.from_struct(query_struct("tether_binning_info_t", lib.tether_binning_get_info, self))
        return info



