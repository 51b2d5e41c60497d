"""Every argument at the Python -> C boundary, fed the values C types cannot
hold (issue #21): NUL in strings, ints at and past 2**63 and 2**64, -1, huge
ints, lone surrogates. Walks the signature of every public resource
constructor and method and every public function of ``tether`` (other
arguments valid) and requires each call either to work or to raise TypeError
or ValueError naming the problem (or an allocation's own OutOfMemoryError /
a device error without a GPU) - never OverflowError, SystemError,
InternalError, or a value wrapped modulo 2**64 or cut at a NUL.
"""

from __future__ import annotations

import gc
import inspect

import pytest

import tether
from tether import _kinds

BOUNDARY = ["x\0y", b"x\0y", "\udcff", 2**64, 2**64 + 4096, -1, 2**63, 2**31, -(2**31) - 1, 10**100]
ALLOWED = (TypeError, ValueError, tether.OutOfMemoryError, tether.NoDeviceError, tether.NotSupportedError,
           tether.CudaError, tether.LockedError)
# Calls that change process-wide state (the table: their device argument is the
# device_value() that get_current_resource, walked here, uses) or need a GPU.
SKIP = {"lock_current_resource", "set_current_resource", "set_current_resource_if_unset", "push_current_resource",
        "pop_current_resource", "using", "cuda_device_name", "cuda_driver_version", "cuda_device_count",
        "cuda_available", "abi_version", "get_include", "get_cmake_dir", "get_library"}


def _valid(name, tmp):
    """A valid value for a parameter called ``name`` (None: leave it at its default)."""
    host = tether.HostResource()
    table = {
        "upstream": host, "upstream_mr": None, "resource": None, "fallback": None,
        "size": 64, "alignment": 0, "stream": None, "device": tether.HOST,
        "path": str(tmp / "walk.log"), "log_file_name": None, "callback": None, "spec": "host",
        "allocate": lambda n, a, s: 0, "deallocate": lambda *a: None, "value": 64,
        "ptr": 0, "handle": host.handle, "owned": False, "bins": None,
        "block_size": 4096, "limit": 1 << 20, "initial_size": None,
    }
    return table.get(name)


def _callables():
    """(label, factory of the callable) for every public callable taking arguments."""
    found = []
    for name in tether.__all__:
        obj = getattr(tether, name)
        if name in SKIP or inspect.ismodule(obj):
            continue
        if inspect.isclass(obj) and issubclass(obj, tether.Resource) and obj.__init__ is not tether.Resource.__init__:
            found.append((name, obj, None))
            for meth, fn in inspect.getmembers(obj, inspect.isfunction):
                if not meth.startswith("_"):
                    found.append((f"{name}.{meth}", obj, meth))
        elif inspect.isfunction(obj):
            found.append((name, obj, None))
    return found


# Valid arguments of each constructor beyond an upstream.
ARGUMENTS = {
    "LimitingAdaptor": {"limit": 1 << 20}, "AlignedAdaptor": {"alignment": 4096},
    "FixedSizeResource": {"block_size": 4096}, "LoggingAdaptor": {"path": "walk.log"},
    "FailureCallbackAdaptor": {"callback": lambda n: False},
    "CallbackResource": {"allocate": lambda n, a, s: 0, "deallocate": lambda *a: None},
}
# The classes whose memory only a CUDA device gives (the registry's "memory", capi/kinds.json).
NEEDS_GPU = {k.python for k in _kinds.KINDS
             if k.python and k.memory in _kinds.GPU_MEMORY}


def _arguments(cls, tmp):
    kwargs = dict(ARGUMENTS.get(cls.__name__, {}))
    if "path" in kwargs:
        kwargs["path"] = str(tmp / kwargs["path"])
    if "upstream" in inspect.signature(cls.__init__).parameters:
        kwargs["upstream"] = tether.HostResource()
    return kwargs


CALLABLES = _callables()


@pytest.mark.parametrize("label,owner,method", CALLABLES, ids=[c[0] for c in CALLABLES])
def test_every_argument_refuses_values_c_cannot_hold(tmp_path, monkeypatch, label, owner, method):
    # A path argument fed a boundary value that is still a valid file name
    # (a lone surrogate is b"\xff" on disk) creates that file: in tmp_path.
    monkeypatch.chdir(tmp_path)
    try:
        _walk(tmp_path, label, owner, method)
    finally:
        gc.collect()


def _walk(tmp_path, label, owner, method):
    base = {}
    if inspect.isclass(owner):
        if owner.__name__ in NEEDS_GPU:
            pytest.skip("needs managed or device memory (tests/python/test_gpu_*)")
        if method:
            fn = getattr(owner(**_arguments(owner, tmp_path)), method)
        else:
            fn, base = owner, _arguments(owner, tmp_path)
    else:
        fn = owner
    sig = inspect.signature(fn.__init__ if fn is owner and inspect.isclass(fn) else fn)
    params = [p for p in sig.parameters.values() if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for p in params:
        v = _valid(p.name, tmp_path)
        if p.default is inspect.Parameter.empty and p.name not in base:
            if v is None and p.name not in ("resource", "callback", "stream"):
                pytest.skip(f"no valid value known for {p.name}")
            base[p.name] = v
    victim = tmp_path / "x"
    victim.write_text("keep")
    for p in params:
        for bad in BOUNDARY:
            args = dict(base, **{p.name: bad})
            try:
                result = fn(**args)
            except ALLOWED:
                continue
            except tether.InternalError as e:
                pytest.fail(f"{label}({p.name}={bad!r}) raised InternalError: {e}")
            except Exception as e:  # noqa: BLE001
                pytest.fail(f"{label}({p.name}={bad!r}) raised {type(e).__name__}: {e}")
            if isinstance(result, tether.Resource) and isinstance(bad, (str, bytes)) and "\0" in str(bad):
                pytest.fail(f"{label}({p.name}={bad!r}) accepted a NUL")
            if isinstance(bad, int) and not isinstance(bad, bool) and isinstance(result, tether.Resource):
                result.close()
    assert victim.read_text() == "keep"
