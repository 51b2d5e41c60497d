"""Sizes accept ints and strings with binary (KiB...) or decimal (kB...) units."""

from __future__ import annotations

import numpy as np
import pytest

import tether


@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), ("0", 0), ("64 MiB", 64 << 20), ("1GiB", 1 << 30), ("512 KiB", 512 << 10),
    ("1.5 GiB", 3 << 29), ("100 MB", 100_000_000), ("2kB", 2000), ("3 B", 3), ("  7 mib ", 7 << 20),
    ("1 TiB", 1 << 40), (".5 KiB", 512), ("10 GB", 10**10),
])
def test_strings(text, expected):
    assert tether.parse_size(text) == expected


@pytest.mark.parametrize("value", [0, 1, 2**64 - 1, np.uint64(5), np.int32(7), 3.0])
def test_numbers(value):
    assert tether.parse_size(value) == int(value)


@pytest.mark.parametrize("bad", [-1, "-1", "-5 MiB", "1.3 B", "0.1 KiB", "64 MiBs", "MiB", "", "1 2 MiB",
                                 "1e3", 2**64, "17 EiB", 1.5])
def test_bad_values_raise_value_error(bad):
    with pytest.raises(ValueError):
        tether.parse_size(bad)


@pytest.mark.parametrize("bad", [None, True, b"64", [1]])
def test_bad_types_raise_type_error(bad):
    with pytest.raises(TypeError):
        tether.parse_size(bad)


def test_every_size_argument_takes_strings():
    pool = tether.PoolResource(tether.HostResource(), initial_size="1 MiB", maximum_size="4 MiB",
                               growth_size="512 KiB")
    assert pool.pool_info().pool_size == 1 << 20
    with tether.Buffer("64 KiB", resource=pool) as buf:
        assert buf.size == 65536
        buf.resize("1 KiB")
        assert buf.size == 1024
    ptr = pool.allocate("1 KiB")
    pool.deallocate(ptr, "1024")
    pool.close()


def test_negative_sizes_are_rejected_before_the_library():
    with tether.HostResource() as host:
        with pytest.raises(ValueError):
            tether.Buffer(-1, resource=host)
        with pytest.raises(ValueError):
            host.allocate(-8)
        with pytest.raises(ValueError):
            tether.PoolResource(host, initial_size=-1)


def test_python_reads_sizes_as_specs_do():
    # One grammar (the library's tether_parse_size): PiB/PB, spaces around, and the messages name the argument.
    assert tether.parse_size("1 PiB") == 1 << 50
    assert tether.parse_size("2 PB") == 2 * 10**15
    with pytest.raises(ValueError, match=r"^growth_size: unknown unit 'parsecs' in '12 parsecs'"):
        tether.parse_size("12 parsecs", "growth_size")
    with pytest.raises(ValueError, match="initial_size: '1.5' is not a whole number of bytes"):
        tether.PoolResource(tether.HostResource(), initial_size="1.5")


def test_a_percentage_needs_device_memory():
    # "80%" is a share of a device's total memory, as in a spec: refused where the size has no device.
    with pytest.raises(ValueError, match="parse_size: '80%' is a share of a device's memory"):
        tether.parse_size("80%", "parse_size")
    with tether.HostResource() as host:
        with pytest.raises(ValueError, match="initial_size: '10%' is a share of a device's memory"):
            tether.PoolResource(host, initial_size="10%")
        with pytest.raises(ValueError, match="limit: '10%' is a share"):
            tether.LimitingAdaptor(host, "10%")
        # Not a percentage: the device is never asked for.
        assert tether.LimitingAdaptor(host, "1 MiB").limit == 1 << 20


@pytest.mark.skipif(tether.cuda_available(), reason="checks the error without a CUDA device")
def test_a_percentage_of_a_device_without_one_is_no_device():
    with pytest.raises(tether.NoDeviceError):
        tether.parse_size("50%", "initial_size", tether.CURRENT_DEVICE)
