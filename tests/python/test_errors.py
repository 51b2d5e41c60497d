"""Status codes map to exceptions deriving from TetherError and the matching builtin."""

from __future__ import annotations

import pickle

import pytest

import tether
from tether._errors import check, error_for
from tether._ffi import lib

MAPPING = [
    (lib.TETHER_ERROR_OUT_OF_MEMORY, tether.OutOfMemoryError, MemoryError),
    (lib.TETHER_ERROR_INVALID_ARGUMENT, tether.InvalidArgumentError, ValueError),
    (lib.TETHER_ERROR_INVALID_HANDLE, tether.InvalidHandleError, ValueError),
    (lib.TETHER_ERROR_NOT_SUPPORTED, tether.NotSupportedError, NotImplementedError),
    (lib.TETHER_ERROR_NO_DEVICE, tether.NoDeviceError, RuntimeError),
    (lib.TETHER_ERROR_CUDA, tether.CudaError, RuntimeError),
    (lib.TETHER_ERROR_LOCKED, tether.LockedError, RuntimeError),
    (lib.TETHER_ERROR_VERSION_MISMATCH, tether.VersionMismatchError, RuntimeError),
    (lib.TETHER_ERROR_SHUTTING_DOWN, tether.ShuttingDownError, RuntimeError),
    (lib.TETHER_ERROR_INTERNAL, tether.InternalError, RuntimeError),
]


@pytest.mark.parametrize("code, cls, builtin", MAPPING)
def test_each_status_has_its_class(code, cls, builtin):
    err = error_for(code, "message")
    assert type(err) is cls
    assert isinstance(err, tether.TetherError) and isinstance(err, builtin)
    assert err.code == code == cls.code
    assert err.status_name == ffi_name(code)
    assert str(err) == "message"


@pytest.mark.parametrize("code", [1234, -1])
def test_other_statuses_are_plain_tether_errors(code):
    err = error_for(code, "m")
    assert type(err) is tether.TetherError and err.code == code


def test_every_status_constant_of_the_headers_has_a_public_class():
    # Derived from the cdef: a status code added to error.h cannot silently become a bare TetherError.
    codes = {name: getattr(lib, name) for name in dir(lib) if name.startswith("TETHER_ERROR_")}
    assert len(codes) >= 10
    for name, code in codes.items():
        cls = type(error_for(code, "m"))
        assert cls is not tether.TetherError and issubclass(cls, tether.TetherError), name
        assert cls.code == code
        assert getattr(tether, cls.__name__) is cls, f"{cls.__name__} is not exported from tether"
        assert cls.__name__ in tether.__all__
        assert error_for(code, "m").status_name == name


def test_a_status_without_a_written_class_still_gets_its_own(monkeypatch):
    # What a status code newer than the Python module gets: a TetherError subclass named after it.
    from tether import _errors
    monkeypatch.setattr(_errors, "status_constants",
                        lambda: {**{n: getattr(lib, n) for n in dir(lib) if n.startswith("TETHER_ERROR_")},
                                 "TETHER_ERROR_SOMETHING_NEW": 4321})
    table = _errors._by_code()
    cls = table[4321]
    assert cls.__name__ == "SomethingNewError" and cls.code == 4321
    assert issubclass(cls, tether.TetherError) and cls is not tether.TetherError
    assert table[lib.TETHER_ERROR_LOCKED] is tether.LockedError
    monkeypatch.delattr(_errors, "SomethingNewError")


def ffi_name(code):
    from tether._ffi import ffi
    return ffi.string(lib.tether_status_name(code)).decode()


def test_check_ok_is_silent_and_failure_raises():
    check(0)
    with pytest.raises(tether.InvalidArgumentError):
        check(lib.TETHER_ERROR_INVALID_ARGUMENT)


def test_message_comes_from_the_library_and_names_the_function():
    pool = tether.PoolResource(tether.HostResource(), maximum_size="1 MiB")
    with pytest.raises(tether.OutOfMemoryError) as info:
        pool.allocate("2 MiB")
    assert info.value.code == lib.TETHER_ERROR_OUT_OF_MEMORY
    assert "tether_resource_allocate" in str(info.value)
    assert info.value.status_name == "TETHER_ERROR_OUT_OF_MEMORY"
    pool.close()


def test_invalid_argument_from_the_library():
    with tether.HostResource() as host:
        with pytest.raises(tether.InvalidArgumentError) as info:
            host.allocate(64, alignment=3)
        assert isinstance(info.value, ValueError)
        assert "alignment" in str(info.value)


def test_not_supported_for_statistics_of_a_pool():
    # Reached through the C ABI, not a Python-side check.
    from tether._ffi import ffi
    with tether.PoolResource(tether.HostResource()) as pool:
        out = ffi.new("tether_statistics_t*")
        out.struct_size = ffi.sizeof("tether_statistics_t")
        with pytest.raises(tether.NotSupportedError):
            check(lib.tether_resource_get_statistics(pool._h, out))


def test_errors_pickle():
    err = pickle.loads(pickle.dumps(tether.LockedError("slot locked", lib.TETHER_ERROR_LOCKED)))
    assert type(err) is tether.LockedError and err.code == lib.TETHER_ERROR_LOCKED and str(err) == "slot locked"
