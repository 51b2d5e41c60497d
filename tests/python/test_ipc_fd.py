"""tether.ipc without a GPU: descriptors over a Unix socket (a pipe stands in for a
pool's descriptor), pidfd_getfd and its errors, exporter() of handles of both kinds."""

from __future__ import annotations

import os
import socket

import pytest

import tether
import tether.ipc


def handle(kind: int, pid: int = 4242, fd: int = 17) -> bytes:
    b = bytearray(tether.IPC_HANDLE_SIZE)
    b[0:8] = b"TETHRIPC"
    b[8:10] = (1).to_bytes(2, "little")
    b[10:12] = kind.to_bytes(2, "little")
    b[16:20] = pid.to_bytes(4, "little")
    if kind == 2:
        b[20:24] = fd.to_bytes(4, "little")
        b[56:64] = (0x1234).to_bytes(8, "little")
    else:
        b[56:64] = (1 << 20).to_bytes(8, "little")
    b[48:56] = (4096).to_bytes(8, "little")
    return bytes(b)


def test_exporter_of_both_kinds():
    assert tether.ipc.exporter(handle(2)) == (4242, 17)
    assert tether.ipc.exporter(handle(1)) == (4242, None)
    with pytest.raises(ValueError, match="handle"):
        tether.ipc.exporter(bytes(tether.IPC_HANDLE_SIZE))


def test_send_and_recv_fd_with_a_pipe():
    r, w = os.pipe()
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        tether.ipc.send_fd(a, w, b"hello")
        got, message = tether.ipc.recv_fd(b)
    assert message == b"hello" and got != w
    os.write(got, b"xyz")
    assert os.read(r, 3) == b"xyz"
    for f in (r, w, got):
        os.close(f)


def test_send_and_recv_handle():
    r, w = os.pipe()
    a, b = socket.socketpair(socket.AF_UNIX)
    data = handle(2, pid=os.getpid(), fd=w)
    with a, b:
        tether.ipc.send_handle(a, data)
        got, fd = tether.ipc.recv_handle(b)
        assert got == data and fd is not None
        os.write(fd, b"q")
        assert os.read(r, 1) == b"q"
        os.close(fd)
        tether.ipc.send_handle(a, handle(1))  # needs no descriptor
        got, fd = tether.ipc.recv_handle(b)
        assert got == handle(1) and fd is None
    os.close(r)
    os.close(w)


def test_recv_buffer_without_a_device():
    if tether.cuda_available():
        pytest.skip("a CUDA device is present")
    r, w = os.pipe()
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        tether.ipc.send_handle(a, handle(2, pid=os.getpid(), fd=w))
        with pytest.raises(tether.TetherError):
            tether.ipc.recv_buffer(b)
    os.close(r)
    os.close(w)


def test_process_fd_and_its_errors():
    r, w = os.pipe()
    try:
        try:
            got = tether.ipc.process_fd(os.getpid(), w)
        except tether.NotSupportedError as e:
            pytest.skip(str(e))
        os.write(got, b"p")
        assert os.read(r, 1) == b"p"
        os.close(got)
        with pytest.raises(ValueError, match="fd"):
            tether.ipc.process_fd(os.getpid(), 100000)
        with pytest.raises(ValueError, match="pid"):
            tether.ipc.process_fd(0, w)
    finally:
        os.close(r)
        os.close(w)


def test_import_ipc_fd_argument():
    with pytest.raises(TypeError, match="fd"):
        tether.import_ipc(handle(2), fd="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fd"):
        tether.import_ipc(handle(2), fd=-5)
