"""The Python error surface (issue 11, item 10): every bad argument gets a
TetherError / ValueError / TypeError naming the argument - never AttributeError,
OverflowError, IndexError or a cffi message - and nothing changes."""

from __future__ import annotations

import tracemalloc

import pytest

import tether

CFFI_WORDS = ("ctype", "cdata", "initializer for", "an integer is required", "tuple index")


@pytest.fixture
def host():
    with tether.HostResource() as h:
        yield h


def raises_naming(exc, word, fn, *args, **kwargs):
    with pytest.raises(exc) as e:
        fn(*args, **kwargs)
    assert type(e.value) is not OverflowError and not isinstance(e.value, (AttributeError, IndexError))
    msg = str(e.value)
    assert word in msg, f"{type(e.value).__name__}: {msg!r} does not name {word!r}"
    assert not any(w in msg for w in CFFI_WORDS), msg
    return e.value


def test_bad_arguments_name_themselves(host):
    raises_naming(ValueError, "device", tether.CudaResource, 2**33)
    raises_naming(ValueError, "device", tether.ManagedResource, -(2**40))
    raises_naming(TypeError, "device", tether.PinnedHostResource, "0")
    raises_naming(ValueError, "kind", tether.debug.live_objects, -1)
    raises_naming(ValueError, "kind", tether.debug.live_objects, 2**40)
    raises_naming(TypeError, "kind", tether.debug.live_objects, [1])
    raises_naming(TypeError, "resource", tether.using("foo").__enter__)
    raises_naming(TypeError, "alignment", host.allocate, 8, "x")
    raises_naming(TypeError, "ptr", host.deallocate, "x", 8)
    raises_naming(ValueError, "ptr", host.deallocate, -1, 8)
    raises_naming(ValueError, "ipc_handle_type", tether.AsyncResource, 0, ipc_handle_type=2**40)
    with tether.Buffer(10, resource=host) as buf:
        buf.copy_from_host(b"0123456789")
        raises_naming(TypeError, "resource", tether.Buffer, 10, resource=buf)
        raises_naming(TypeError, "max_version", buf.__dlpack__, max_version=())
        raises_naming(TypeError, "max_version", buf.__dlpack__, max_version=("a", 0))
        raises_naming(TypeError, "dl_device", buf.__dlpack__, dl_device=(1,))
        raises_naming(TypeError, "src", buf.copy_from_host, 5)
        raises_naming(TypeError, "out", buf.copy_to_host, 5)
        raises_naming(ValueError, "stream", buf.__dlpack__, stream=-5)
        raises_naming(TypeError, "out", buf.copy_to_host, b"immutable!")
        assert buf.tobytes() == b"0123456789"  # nothing changed


def test_handles_that_are_no_pointer_value_are_refused():
    for cls in (tether.Resource, tether.HostResource, tether.Buffer):
        raises_naming(ValueError, "handle", cls.from_handle, 2**70)
        raises_naming(ValueError, "handle", cls.from_handle, -1)
        raises_naming(TypeError, "handle", cls.from_handle, "0x10")
        raises_naming(TypeError, "handle", cls.from_handle, 1.0)


def test_failed_retain_does_not_report_a_stale_message(host):
    with pytest.raises(tether.InvalidArgumentError) as first:
        host.allocate(8, alignment=3)  # leaves a message in the thread's error state
    assert "alignment" in str(first.value)
    for fn, kind in ((tether.Buffer.from_handle, "buffer"), (tether.Resource.from_handle, "resource")):
        err = raises_naming(tether.InvalidHandleError, "0x3039", fn, 12345)
        assert f"not a live {kind} handle" in str(err)
        assert "alignment" not in str(err)
    with tether.Buffer(4, resource=host) as buf:  # a buffer handle is no resource handle
        err = raises_naming(tether.InvalidHandleError, "not a live resource handle",
                            tether.Resource.from_handle, buf.handle)


def test_copy_to_host_checks_the_range_before_allocating(host):
    with tether.Buffer(100, resource=host) as buf:
        tracemalloc.start()
        try:
            raises_naming(tether.InvalidArgumentError, "size", buf.copy_to_host, size="4 GiB")
            raises_naming(tether.InvalidArgumentError, "offset", buf.copy_to_host, offset=101)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, f"copy_to_host allocated {peak} bytes before refusing"
        assert buf.copy_to_host(offset=100) == bytearray()
        assert len(buf.copy_to_host(size=100)) == 100


def test_parse_size_is_linear_and_ascii_only():
    for text in ("١٢", "12\u00a0MiB", "٣ KiB", "1\u2003", "𝟙𝟚"):
        raises_naming(ValueError, "size", tether.parse_size, text)
    # Linear without a clock: a long string is refused by its length before any
    # regular expression sees it (a backtracking pattern over 100k spaces was
    # the quadratic case), and the message says so.
    for n in (10_000, 100_000):
        for text in ("1" + " " * n + "!", " " * n + "1 KiB"):
            with pytest.raises(ValueError, match="too long to be a size") as info:
                tether.parse_size(text)
            assert "size" in str(info.value)
    # The longest string the parser reads still parses (or is refused) by the pattern.
    assert tether.parse_size(" " * 58 + "1 KiB") == 1024
    assert tether.parse_size("  64 MiB\t\n") == 64 << 20
    assert tether.parse_size("1.5GiB") == 3 << 29
    assert tether.parse_size("\t12 kb ") == 12_000


def test_a_pool_that_could_never_allocate_is_refused(host):
    for size in (1, 100, 255, "255 B"):
        raises_naming(tether.InvalidArgumentError, "maximum_size", tether.PoolResource, host, maximum_size=size)
    with tether.PoolResource(host, maximum_size=256) as pool:
        with tether.Buffer(256, resource=pool) as buf:
            assert buf.size == 256
