"""Without a CUDA driver: CUDA entry points raise NoDeviceError with a reason,
cuda_available() is False, and host-side tether keeps working."""

from __future__ import annotations

import pytest

import tether
from conformance_factories import registry_specs

REGISTRY_SPECS = [e for e in registry_specs() if e.gpu]

pytestmark = pytest.mark.skipif(tether.cuda_available(), reason="a CUDA device is present")


@pytest.mark.parametrize("spec", [f.spec for f in REGISTRY_SPECS], ids=[f.name for f in REGISTRY_SPECS])
def test_every_cuda_spec_of_the_registry_reports_no_device(spec):
    # Each conformance entry a CUDA kind states in capi/kinds.json: NoDeviceError with the reason.
    with pytest.raises(tether.NoDeviceError):
        tether.from_spec(spec)


def test_cuda_available_is_false_not_raising():
    assert tether.cuda_available() is False


@pytest.mark.parametrize("call", [
    tether.cuda_device_count, tether.cuda_driver_version, tether.cuda_device_name,
    tether.CudaResource, lambda: tether.CudaResource(0),
    tether.AsyncResource, lambda: tether.AsyncResource(0, initial_pool_size="1 MiB", release_threshold="1 GiB"),
    tether.AsyncViewResource, lambda: tether.AsyncViewResource(device=0),
    lambda: tether.AsyncViewResource(0x7f00dead0000, device=0),
    lambda: tether.from_spec("async_view(device=0)"),
    tether.ManagedResource, lambda: tether.ManagedResource(0),
    tether.PinnedHostResource, lambda: tether.PinnedHostResource(0),
    tether.SystemResource, lambda: tether.SystemResource(0),
    tether.ManagedAsyncResource, lambda: tether.ManagedAsyncResource(0),
    lambda: tether.SamHeadroomResource(0), lambda: tether.SamHeadroomResource("1 GiB", device=0),
    lambda: tether.from_spec("sam_headroom(device=0, headroom=1GiB)"),
    lambda: tether.Buffer(16),  # device=None: the current CUDA device
    lambda: tether.get_current_resource(),
    lambda: tether.get_current_resource(0),
    lambda: tether.lock_current_resource(0),
], ids=lambda c: getattr(c, "__name__", "call"))
def test_cuda_entry_points_raise_no_device(call):
    with pytest.raises(tether.NoDeviceError) as info:
        call()
    assert info.value.code == tether.NoDeviceError.code
    assert isinstance(info.value, RuntimeError) and str(info.value)


def test_set_host_resource_without_device_goes_to_the_host_slot():
    # device=None follows the resource's memory (as tether::set_current_resource(res) in C++).
    with tether.HostResource() as host:
        previous = tether.set_current_resource(host)
        try:
            with tether.get_current_resource(tether.HOST) as current:
                assert current == host
            with tether.using(host):
                with tether.get_current_resource(tether.HOST) as current:
                    assert current == host
        finally:
            tether.set_current_resource(previous, tether.HOST)
            if previous is not None:
                previous.close()
        with pytest.raises(tether.NoDeviceError):
            tether.set_current_resource(host, device=0)
        with pytest.raises(tether.NoDeviceError, match="tether.HOST"):
            tether.Buffer(16)  # device=None is the current CUDA device here


def test_async_options_are_checked_before_the_driver():
    with pytest.raises(ValueError):
        tether.AsyncResource(0, ipc_handle_type="carrier pigeon")
    with pytest.raises(ValueError):
        tether.AsyncResource(0, initial_pool_size=-1)


def test_async_view_pool_is_checked_before_the_driver():
    with pytest.raises(TypeError, match="pool"):
        tether.AsyncViewResource("0x1234", device=0)
    with pytest.raises(TypeError, match="pool"):
        tether.AsyncViewResource(1.5, device=0)
    with pytest.raises(ValueError, match="pool must not be 0"):
        tether.AsyncViewResource(0, device=0)
    with pytest.raises(ValueError, match="pool"):
        tether.AsyncViewResource(2**64, device=0)

    class Pool:  # cuda.core's DeviceMemoryResource: the handle is an attribute
        handle = -1
    with pytest.raises(ValueError, match="pool"):
        tether.AsyncViewResource(Pool(), device=0)


def test_host_side_still_works():
    with tether.PoolResource(tether.HostResource()) as pool, tether.Buffer(10, resource=pool) as buf:
        assert buf.tobytes() == bytes(buf.copy_to_host())


def test_sam_headroom_arguments_are_checked_before_the_driver():
    # headroom is a size: named in the error, before any driver call.
    with pytest.raises(ValueError, match="headroom"):
        tether.SamHeadroomResource(-1, device=0)
    with pytest.raises(ValueError, match="headroom"):
        tether.SamHeadroomResource("a lot", device=0)
    with pytest.raises(TypeError, match="headroom"):
        tether.SamHeadroomResource(None, device=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tether.SamHeadroomResource()  # type: ignore[call-arg]
    with pytest.raises(tether.InvalidArgumentError, match="headroom"):
        tether.from_spec("sam_headroom(device=0, headroom=lots)")
    with pytest.raises(tether.InvalidArgumentError, match="nonesuch"):
        tether.from_spec("managed_async(device=0, nonesuch=1)")
