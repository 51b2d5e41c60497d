"""The conformance suite's list of resource configurations (Python side).

The checks are in test_conformance.py; the C ABI suite has the same list in
tests/capi/conformance/factories.cpp.

HOW TO ADD A RESOURCE: add one entry to FACTORIES below::

    "limiting_host": Factory(lambda: over(tether.LimitingAdaptor, host(), limit="64 MiB"),
                             capacity=64 * MiB),

- the key: the configuration's name (it becomes the test id: ``test_sizes[limiting_host]``);
- ``make``: a zero-argument callable returning a new resource. Build stacks with
  ``over(cls, upstream, **options)``, which closes the upstream wrapper once the new
  resource holds it, so the result is the only reference the test owns;
- ``gpu=True`` for configurations that need a CUDA device: they are marked ``gpu`` and
  skipped, with the reason, where there is none (list them unconditionally);
- ``capacity``: the bytes it can hold at once if it is bounded (a pool's maximum_size, a
  limit), else 0. Sizes above half of it are skipped; above it, OutOfMemoryError is expected;
- ``twins_share_frees=True`` if two instances accept each other's frees (raw CUDA resources
  of one kind and device share one allocation table).

Whether a configuration caches upstream memory (and so is trimmed before the last
balance check) is not stated per entry: it follows from the kinds in its stack
(``caches_upstream_memory``; a caching kind says ``"caches": true`` in capi/kinds.json).

A configuration that is one spec can instead be stated in the registry, next to its kind:
``"conformance": [{"name": ..., "spec": ..., "twins_share_frees": true}]`` in capi/kinds.json
(REGISTRY_ENTRIES below builds it with ``tether.from_spec``; the C suite gets the same entries).

Nothing else needs editing. gpu_support.resource_factories() (the GPU tests'
list) is derived from the gpu entries here.

A GPU entry whose creation raises NotSupportedError (a GPU without pageable memory
access for ``system``, a driver before CUDA 13 for ``managed_async``) is skipped with
the message as the reason, not failed: build entries with ``make_or_skip``.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

import tether
from tether import _kinds

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def over(cls: Callable[..., tether.Resource], upstream: tether.Resource, **options: Any) -> tether.Resource:
    """``cls(upstream, **options)``, then close our wrapper of ``upstream`` (the new resource retains it)."""
    try:
        return cls(upstream, **options)
    finally:
        upstream.close()


def python_heap() -> tether.Resource:
    """A CallbackResource written in Python: ctypes buffers, aligned by offsetting."""
    live: dict[int, Any] = {}

    def allocate(size: int, alignment: int, stream: int) -> int:
        if size + alignment > 1 << 40:
            raise MemoryError(f"{size} bytes")  # an out-of-memory status, as a C allocator returns
        b = ctypes.create_string_buffer(size + alignment)
        p = (ctypes.addressof(b) + alignment - 1) // alignment * alignment
        live[p] = b
        return p

    def deallocate(ptr: int, size: int, alignment: int, stream: int) -> None:
        del live[ptr]

    return tether.CallbackResource(allocate, deallocate)


def host() -> tether.Resource:
    return tether.HostResource()


def pool(upstream: tether.Resource, **options: Any) -> tether.Resource:
    return over(tether.PoolResource, upstream, **options)


def statistics(upstream: tether.Resource) -> tether.Resource:
    return over(tether.StatisticsAdaptor, upstream)


# Kinds that keep upstream memory after their callers freed everything, until trim() or
# their end. A stack caches upstream memory when any of its links is one of these, so an
# adaptor inherits the trait from its upstream. The C ABI suite's caches_upstream_memory()
# (tests/capi/conformance/conformance.hpp) has the same set.
# From the registry of kinds (capi/kinds.json), as the C suite's caches_upstream_memory().
CACHING_KINDS = frozenset(tether.ResourceKind(k.kind) for k in _kinds.KINDS if k.caches)


def caches_upstream_memory(links: list[tether.Resource]) -> bool:
    """Whether the stack ``links`` (a resource and its upstreams) caches upstream memory."""
    return any(link.kind in CACHING_KINDS for link in links)


@dataclass(frozen=True)
class Factory:
    make: Callable[[], tether.Resource]
    gpu: bool = False
    capacity: int = 0
    twins_share_frees: bool = False
    max_request: int = 0  # the largest single request it serves (a fixed-size block), 0 = no such limit
    kind: str | None = None  # for a registry entry: the kind that states it (capi/kinds.json)


def make_or_skip(factory: Factory) -> tether.Resource:
    """``factory.make()``; for a GPU entry that this machine cannot build (NotSupportedError:
    the device or driver lacks what the kind needs), pytest.skip with the message as the reason."""
    try:
        return factory.make()
    except tether.NotSupportedError as e:
        if not factory.gpu:
            raise
        pytest.skip(f"not supported here: {e}")


FACTORIES: dict[str, Factory] = {
    # ---- host ------------------------------------------------------------------------------
    "host": Factory(host),
    "pool_host": Factory(lambda: pool(host())),
    "pool_host_initial_max": Factory(lambda: pool(host(), initial_size="1 MiB", maximum_size="64 MiB",
                                                  growth_size="256 KiB"), capacity=64 * MiB),
    "pool_host_small_growth": Factory(lambda: pool(host(), growth_size="16 KiB")),
    "pool_pool_host": Factory(lambda: pool(pool(host()))),
    "statistics_host": Factory(lambda: statistics(host())),
    "statistics_pool_host": Factory(lambda: statistics(pool(host()))),
    "pool_statistics_host": Factory(lambda: pool(statistics(host()))),
    "arena_host": Factory(lambda: over(tether.ArenaResource, host())),
    "arena_host_fixed": Factory(lambda: over(tether.ArenaResource, host(), arena_size="64 MiB"), capacity=64 * MiB),
    "binning_host": Factory(lambda: over(tether.BinningResource, host(), bins=(8, 16), blocks_to_preallocate=4)),
    "fixed_size_host": Factory(lambda: over(tether.FixedSizeResource, host(), block_size="8 MiB",
                                            blocks_to_preallocate=4), max_request=8 * MiB),
    # statistics under a caching resource: after trim it must have given everything back
    "arena_statistics_host": Factory(lambda: over(tether.ArenaResource, statistics(host()))),
    "binning_statistics_host": Factory(lambda: over(tether.BinningResource, statistics(host()), bins=(8, 16),
                                                    blocks_to_preallocate=4)),
    "fixed_size_statistics_host": Factory(lambda: over(tether.FixedSizeResource, statistics(host()),
                                                       block_size="8 MiB", blocks_to_preallocate=4),
                                          max_request=8 * MiB),
    "callback_python": Factory(python_heap),
    "pool_callback_python": Factory(lambda: pool(python_heap())),
    "logging_host": Factory(lambda: over(tether.LoggingAdaptor, host(), callback=lambda line: None)),
    "failure_callback_host": Factory(lambda: over(tether.FailureCallbackAdaptor, host(), callback=lambda size: False)),
    "limiting_host": Factory(lambda: over(tether.LimitingAdaptor, host(), limit="256 MiB"), capacity=256 * MiB),
    "pool_limiting_host": Factory(lambda: pool(over(tether.LimitingAdaptor, host(), limit="256 MiB")),
                                  capacity=256 * MiB),
    "tracking_host": Factory(lambda: over(tether.TrackingAdaptor, host())),
    "tracking_stacks_host": Factory(lambda: over(tether.TrackingAdaptor, host(), capture_stacks=True)),
    "aligned_host": Factory(lambda: over(tether.AlignedAdaptor, host(), alignment="64 KiB", threshold="16 KiB")),
    # ---- CUDA (skipped without a device) ---------------------------------------------------
    "cuda": Factory(lambda: tether.CudaResource(0), gpu=True, twins_share_frees=True),
    "async": Factory(lambda: tether.AsyncResource(0), gpu=True, twins_share_frees=True),
    "async_bounded": Factory(lambda: tether.AsyncResource(0, initial_pool_size="32 MiB",
                                                          maximum_pool_size="512 MiB"),
                             gpu=True, capacity=512 * MiB, twins_share_frees=True),
    "async_default_pool": Factory(lambda: tether.AsyncResource(0, use_default_pool=True), gpu=True,
                                  twins_share_frees=True),
    "managed": Factory(lambda: tether.ManagedResource(0), gpu=True, twins_share_frees=True),
    "pinned_host": Factory(lambda: tether.PinnedHostResource(0), gpu=True, twins_share_frees=True),
    "pool_cuda": Factory(lambda: pool(tether.CudaResource(0)), gpu=True),
    "pool_cuda_bounded": Factory(lambda: pool(tether.CudaResource(0), initial_size="4 MiB",
                                              maximum_size="96 MiB"), gpu=True, capacity=96 * MiB),
    "pool_async": Factory(lambda: pool(tether.AsyncResource(0)), gpu=True),
    "pool_managed": Factory(lambda: pool(tether.ManagedResource(0)), gpu=True),
    "pool_pinned_host": Factory(lambda: pool(tether.PinnedHostResource(0)), gpu=True),
    "statistics_cuda": Factory(lambda: statistics(tether.CudaResource(0)), gpu=True),
    "statistics_pool_async": Factory(lambda: statistics(pool(tether.AsyncResource(0))), gpu=True),
    "pool_statistics_managed": Factory(lambda: pool(statistics(tether.ManagedResource(0))), gpu=True),
    "arena_cuda": Factory(lambda: over(tether.ArenaResource, tether.CudaResource(0)), gpu=True),
    "binning_cuda": Factory(lambda: over(tether.BinningResource, tether.CudaResource(0), bins=(8, 16),
                                         blocks_to_preallocate=8), gpu=True),
    "fixed_size_cuda": Factory(lambda: over(tether.FixedSizeResource, tether.CudaResource(0), block_size="8 MiB",
                                            blocks_to_preallocate=4), gpu=True, max_request=8 * MiB),
    "logging_cuda": Factory(lambda: over(tether.LoggingAdaptor, tether.CudaResource(0), callback=lambda line: None),
                            gpu=True),
    "failure_callback_cuda": Factory(lambda: over(tether.FailureCallbackAdaptor, tether.CudaResource(0),
                                                  callback=lambda size: False), gpu=True),
    "limiting_cuda": Factory(lambda: over(tether.LimitingAdaptor, tether.CudaResource(0), limit="4 GiB"), gpu=True,
                             capacity=4 * GiB, twins_share_frees=True),
    "tracking_async": Factory(lambda: over(tether.TrackingAdaptor, tether.AsyncResource(0)), gpu=True),
    "aligned_cuda": Factory(lambda: over(tether.AlignedAdaptor, tether.CudaResource(0), alignment="64 KiB",
                                         threshold="16 KiB"), gpu=True),
    "prefetch_managed": Factory(lambda: over(tether.PrefetchAdaptor, tether.ManagedResource(0)), gpu=True),
    "pool_prefetch_managed": Factory(lambda: pool(over(tether.PrefetchAdaptor, tether.ManagedResource(0))),
                                     gpu=True),
}


@dataclass(frozen=True)
class RegistrySpec:
    """A conformance entry stated in the registry (a kind's "conformance" in capi/kinds.json)."""

    name: str
    spec: str
    gpu: bool
    capacity: int
    twins_share_frees: bool
    kind: str = ""  # the registry kind that states it


def registry_specs() -> list[RegistrySpec]:
    registry = json.loads((Path(__file__).resolve().parents[2] / "capi" / "kinds.json").read_text(encoding="utf-8"))
    return [RegistrySpec(c["name"], c["spec"], k["memory"] in _kinds.GPU_MEMORY, c.get("capacity", 0),
                         c.get("twins_share_frees", False), k["name"])
            for k in registry["kinds"] for c in k.get("conformance", [])]


REGISTRY_ENTRIES = {e.name: Factory(lambda spec=e.spec: tether.from_spec(spec), gpu=e.gpu, capacity=e.capacity,
                                    twins_share_frees=e.twins_share_frees, kind=e.kind) for e in registry_specs()}
assert not REGISTRY_ENTRIES.keys() & FACTORIES.keys(), "a conformance entry is listed twice"
FACTORIES.update(REGISTRY_ENTRIES)


# ---- memory the host cannot touch: the CUDA driver (ctypes, device 0's primary context) --------

class Driver:
    """cuMemsetD8 / cuMemcpyDtoH in device 0's primary context (the one tether uses)."""

    _instance: "Driver | None" = None

    def __init__(self) -> None:
        cu = ctypes.CDLL("libcuda.so.1")
        self._cu = cu
        cu.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        cu.cuCtxPushCurrent_v2.argtypes = [ctypes.c_void_p]
        cu.cuCtxPopCurrent_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        dev = ctypes.c_int()
        self._ctx = ctypes.c_void_p()
        self._ok(cu.cuInit(0), "cuInit")
        self._ok(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self._ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(self._ctx), dev), "cuDevicePrimaryCtxRetain")

    @classmethod
    def get(cls) -> "Driver":
        if cls._instance is None:
            cls._instance = Driver()
        return cls._instance

    @staticmethod
    def _ok(result: int, what: str) -> None:
        if result != 0:
            raise RuntimeError(f"{what} failed with CUresult {result}")

    def _in_context(self, call: Callable[[], int], what: str) -> None:
        self._ok(self._cu.cuCtxPushCurrent_v2(self._ctx), "cuCtxPushCurrent")
        try:
            self._ok(call(), what)
            self._ok(self._cu.cuCtxSynchronize(), "cuCtxSynchronize")
        finally:
            popped = ctypes.c_void_p()
            self._cu.cuCtxPopCurrent_v2(ctypes.byref(popped))

    def memset(self, ptr: int, byte: int, n: int) -> None:
        self._in_context(lambda: self._cu.cuMemsetD8_v2(ptr, byte, n), "cuMemsetD8")

    def read(self, ptr: int, n: int) -> bytes:
        out = ctypes.create_string_buffer(n)
        self._in_context(lambda: self._cu.cuMemcpyDtoH_v2(out, ptr, n), "cuMemcpyDtoH")
        return out.raw
