"""The public type aliases (tether.Size, tether.StreamLike, tether.DeviceLike and the
stream protocols): exported, what they admit, and used in the signatures that take
sizes, streams and devices."""

from __future__ import annotations

import typing

import pytest

import tether


def test_aliases_are_exported_and_admit_what_the_functions_take():
    assert set(typing.get_args(tether.Size)) == {int, str}
    assert set(typing.get_args(tether.StreamLike)) == {type(None), int, tether.CudaStreamProtocol,
                                                     tether.HasCudaStream}
    assert set(typing.get_args(tether.DeviceLike)) == {int, typing.SupportsIndex}
    for name in ("Size", "StreamLike", "DeviceLike", "CudaStreamProtocol", "HasCudaStream"):
        assert name in tether.__all__


@pytest.mark.parametrize("function, parameter, alias", [
    (tether.Buffer.__init__, "size", "Size"),
    (tether.Buffer.__init__, "stream", "StreamLike"),
    (tether.Buffer.__init__, "device", "DeviceLike | None"),
    (tether.Resource.allocate, "size", "Size"),
    (tether.Resource.allocate, "stream", "StreamLike"),
    (tether.PoolResource.__init__, "initial_size", "Size | None"),
    (tether.get_current_resource, "device", "DeviceLike | None"),
    (tether.set_current_resource, "device", "DeviceLike | None"),
    (tether.using, "device", "DeviceLike | None"),
    (tether.CudaResource.__init__, "device", "DeviceLike | None"),
    (tether.statistics.enable_statistics, "device", "DeviceLike | None"),
])
def test_signatures_use_the_aliases(function, parameter, alias):
    # The package uses postponed annotations: the annotation is the text written.
    assert function.__annotations__[parameter] == alias


def test_hints_resolve_to_the_aliases():
    hints = typing.get_type_hints(tether.Buffer.__init__)
    assert hints["size"] == tether.Size
    assert hints["device"] == tether.DeviceLike | None
    assert hints["stream"] == tether.StreamLike


class _ProtocolStream:
    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0)


class _TorchLikeStream:
    cuda_stream = 0


@pytest.mark.parametrize("stream", [None, 0, _ProtocolStream(), _TorchLikeStream()])
def test_every_kind_of_stream_like_is_accepted(stream):
    with tether.PoolResource(tether.HostResource(), initial_size="64 KiB") as pool:
        p = pool.allocate("1 KiB", stream=stream)
        pool.deallocate(p, 1024, stream=stream)


def test_device_like_accepts_an_integer_type_and_refuses_bool():
    numpy = pytest.importorskip("numpy")
    r = tether.get_current_resource(numpy.int32(tether.HOST))
    assert r.device == tether.HOST
    r.close()
    with pytest.raises(TypeError, match="device must be an int"):
        tether.get_current_resource(True)
