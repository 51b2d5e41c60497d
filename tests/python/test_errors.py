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
]


@pytest.mark.parametrize("code, cls, builtin", MAPPING)
def test_each_status_has_its_class(code, cls, builtin):
    err = error_for(code, "message")
    assert type(err) is cls
    assert isinstance(err, tether.TetherError) and isinstance(err, builtin)
    assert err.code == code == cls.code
    assert err.status_name == ffi_name(code)
    assert str(err) == "message"


@pytest.mark.parametrize("code", [lib.TETHER_ERROR_VERSION_MISMATCH, lib.TETHER_ERROR_SHUTTING_DOWN,
                                  lib.TETHER_ERROR_INTERNAL, 1234])
def test_other_statuses_are_plain_tether_errors(code):
    err = error_for(code, "m")
    assert type(err) is tether.TetherError and err.code == code


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
