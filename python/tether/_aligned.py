"""AlignedAdaptor: a larger alignment from a size on (``tether/aligned.h``)."""

from __future__ import annotations

from ._convert import parse_size
from ._ffi import ffi, lib
from ._resources import Resource, UpstreamAdaptor, _alias, create, new_options, register


@register(lib.TETHER_RESOURCE_KIND_ALIGNED)
class AlignedAdaptor(UpstreamAdaptor):
    """Allocations of at least ``threshold`` bytes get at least ``alignment``.

    Arguments:

    * ``upstream`` - the resource to draw from; the adaptor keeps it alive.
      RMM spelling: ``upstream_mr``.
    * ``alignment`` - a power of two up to 1 GiB (an int or a string such as
      ``"64 KiB"``).
    * ``threshold`` - allocations of at least this many bytes are aligned
      (default 0: all of them). RMM spelling: ``alignment_threshold``.

    Smaller allocations keep the alignment the caller asked for; a caller's
    larger alignment always wins. Free with the size and alignment you
    allocated with: the same rule is applied on the way out.
    """

    __slots__ = ()

    def __init__(self, upstream: Resource | None = None, alignment: int | str | None = None,
                 threshold: int | str | None = None, *, upstream_mr: Resource | None = None,
                 alignment_threshold: int | str | None = None) -> None:
        up = self._upstream_handle(upstream, upstream_mr)
        the_threshold = _alias(threshold, alignment_threshold, "threshold", "alignment_threshold")
        if alignment is None:
            raise TypeError("AlignedAdaptor() needs an alignment (a power of two, e.g. 4096)")
        opts = new_options("tether_aligned_options_t", lib.tether_aligned_options_init,
                           alignment=parse_size(alignment, "alignment"),
                           threshold=0 if the_threshold is None else parse_size(the_threshold, "threshold"))
        self._init_from(create(lib.tether_aligned_adaptor_create, up, opts))

    def _options(self) -> object:
        out = ffi.new("tether_aligned_options_t*")
        out.struct_size = ffi.sizeof("tether_aligned_options_t")
        self._check(lib.tether_aligned_adaptor_get_options(self._live(), out))
        return out

    @property
    def alignment(self) -> int:
        """The alignment given to allocations at or above the threshold."""
        return int(self._options().alignment)  # type: ignore[attr-defined]

    @property
    def threshold(self) -> int:
        """Allocations of at least this many bytes get :attr:`alignment`."""
        return int(self._options().threshold)  # type: ignore[attr-defined]
