"""Moving CUDA IPC handles, and the file descriptors they may need, between processes.

Memory of an async resource created with ``ipc_handle_type="posix_fd"`` is
shared through a POSIX file descriptor of its pool, which cannot travel inside
the handle's bytes. These helpers send a handle together with that descriptor
over a connected Unix domain socket (``SCM_RIGHTS``), or take the descriptor
straight from the exporting process (``pidfd_getfd``, where the kernel allows).
They also work for handles that need no descriptor (cuMemAlloc memory), and the
descriptor helpers work for any descriptor (a pipe, a file).
"""

from __future__ import annotations

import os
import socket

from ._buffer import Buffer, import_ipc
from ._convert import IPC_HANDLE_SIZE, DeviceLike, ipc_handle_value
from ._errors import check
from ._ffi import ffi, lib

__all__ = ["exporter", "process_fd", "send_fd", "recv_fd", "send_handle", "recv_handle", "recv_buffer"]


def _handle(data: object) -> object:
    raw = ipc_handle_value(data)
    handle = ffi.new("tether_ipc_handle_t*")
    ffi.memmove(handle.data, raw, IPC_HANDLE_SIZE)
    return handle


def exporter(data: object) -> tuple[int, int | None]:
    """``(pid, fd)`` of the process that exported ``data``.

    ``fd`` is the exporter's descriptor of the pool's shareable handle for
    memory of a ``posix_fd`` async pool, None for memory that needs none. In
    the exporting process it is the descriptor to send (owned by tether: do not
    close it). ValueError for bytes that are no tether IPC handle. Needs no GPU.
    """
    pid, fd = ffi.new("int*"), ffi.new("int*")
    check(lib.tether_ipc_handle_get_exporter(_handle(data), pid, fd))
    return int(pid[0]), (None if fd[0] < 0 else int(fd[0]))


def process_fd(pid: int, fd: int) -> int:
    """A new descriptor (yours to close) for descriptor ``fd`` of process ``pid``.

    Uses ``pidfd_open`` + ``pidfd_getfd`` (Linux 5.6+), which need ptrace
    permission over ``pid``. ValueError when there is no such process or
    descriptor; NotSupportedError when the kernel lacks the calls or refuses.
    """
    out = ffi.new("int*")
    check(lib.tether_ipc_get_process_fd(pid, fd, out))
    return int(out[0])


def send_fd(sock: socket.socket, fd: int, message: bytes = b"") -> None:
    """Send ``message`` (may be empty) and a duplicate of ``fd`` over a connected Unix socket.

    The descriptor stays open here; the receiver gets its own (``recv_fd``).
    """
    socket.send_fds(sock, [len(message).to_bytes(4, "little") + message], [fd])


def _recv_exact(sock: socket.socket, n: int, fds: list[int]) -> bytes:
    data = b""
    while len(data) < n:
        chunk, got, _flags, _addr = socket.recv_fds(sock, n - len(data), 1)
        fds.extend(got)
        if not chunk:
            for f in fds:
                os.close(f)
            raise EOFError("the peer closed the socket before the whole message arrived")
        data += chunk
    return data


def recv_fd(sock: socket.socket) -> tuple[int, bytes]:
    """Receive what :py:func:`send_fd` sent: ``(fd, message)``; close ``fd`` when done."""
    fds: list[int] = []
    n = int.from_bytes(_recv_exact(sock, 4, fds), "little")
    message = _recv_exact(sock, n, fds) if n else b""
    if not fds:
        raise ValueError("no file descriptor arrived with the message (was it sent with send_fd?)")
    for extra in fds[1:]:
        os.close(extra)
    return fds[0], message


def send_handle(sock: socket.socket, data: object) -> None:
    """Send an exported handle and, if it needs one, its pool descriptor (call in the exporter)."""
    raw = ipc_handle_value(data)
    _pid, fd = exporter(raw)
    if fd is None:
        sock.sendall(b"\x00" + raw)
    else:
        socket.send_fds(sock, [b"\x01" + raw], [fd])


def recv_handle(sock: socket.socket) -> tuple[bytes, int | None]:
    """Receive what :py:func:`send_handle` sent: ``(data, fd)``.

    ``fd`` is None for handles that need no descriptor; otherwise it is yours
    to close (after :py:func:`tether.import_ipc`, which only borrows it).
    """
    fds: list[int] = []
    raw = _recv_exact(sock, 1 + IPC_HANDLE_SIZE, fds)
    fd = fds[0] if fds else None
    for extra in fds[1:]:
        os.close(extra)
    if raw[0] == 1 and fd is None:
        raise ValueError("the handle needs its pool's descriptor, but none arrived")
    return raw[1:], fd


def recv_buffer(sock: socket.socket, device: DeviceLike | None = None) -> Buffer:
    """Receive a handle (``recv_handle``) and import it; the received descriptor is closed."""
    data, fd = recv_handle(sock)
    try:
        return import_ipc(data, device=device, fd=fd)
    finally:
        if fd is not None:
                os.close(fd)
