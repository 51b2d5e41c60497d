"""Child-process bodies of tests/python/test_gpu_ipc.py (spawned processes import
them by module name, so they live outside the test module)."""

from __future__ import annotations

import os
import time

import tether


def pattern(seed: int, n: int) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(256)) * (n // 256)


def read_and_write_back(handles: list[bytes], seeds: list[int], device: int | None) -> list[bool]:
    """Import each handle, check its bytes against pattern(seed), write the inverted pattern back."""
    ok = []
    for data, seed in zip(handles, seeds):
        with tether.import_ipc(data, device=device) as b:
            got = b.tobytes()
            ok.append(got == pattern(seed, b.size))
            b.copy_from_host(bytes(255 - x for x in got))
    return ok


def import_and_hold(data: bytes, ready, release) -> None:
    """Import, say so, and keep the mapping until told (or killed)."""
    b = tether.import_ipc(data)
    ready.set()
    release.wait(60)
    b.close()


def import_then_die(data: bytes, ready) -> None:
    """Import and exit without releasing anything (as a crashed importer would)."""
    b = tether.import_ipc(data)
    ready.set()
    time.sleep(0.1)
    os._exit(3)
    b.close()  # never reached


def read_first_byte_after_event(data: bytes) -> int:
    """import_ipc waits for the exporter's event: the kernel's fill is visible at once."""
    with tether.import_ipc(data) as b:
        return b.tobytes()[0]


def import_error(data: bytes) -> str:
    """The exception type name import_ipc raises (e.g. after the exporter died)."""
    try:
        tether.import_ipc(data).close()
    except Exception as e:  # noqa: BLE001 - the type is the answer
        return type(e).__name__
    return "ok"


def export_and_die(conn) -> None:
    """Export a buffer, send its handle, exit without freeing (a crashed exporter)."""
    r = tether.CudaResource(0)
    b = tether.Buffer(1 << 20, r)
    b.copy_from_host(bytes(1 << 20))
    conn.send(b.export_ipc())
    conn.recv()  # wait until the parent has the bytes
    os._exit(0)


# ---- posix_fd async pools: the handle and the pool's descriptor over a Unix socket ----

def fd_read_and_write_back(address: str, count: int) -> list[bool]:
    """Connect to the exporter, receive `count` handles (each with the pool's descriptor;
    the pool is imported once and shared), check pattern(seed=i), write the inverted
    pattern back, release all, and tell the exporter."""
    import socket

    import tether.ipc
    ok = []
    buffers = []
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(address)
        for i in range(count):
            b = tether.ipc.recv_buffer(s)
            got = b.tobytes()
            ok.append(got == pattern(i, b.size))
            b.copy_from_host(bytes(255 - x for x in got))
            buffers.append(b)
        for b in buffers:
            b.close()
        s.sendall(b"done")
    return ok


def fd_import_and_hold(address: str, ready, release) -> None:
    """Receive one handle with its descriptor, import, say so, hold until told (or killed)."""
    import socket

    import tether.ipc
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(address)
        b = tether.ipc.recv_buffer(s)
    ready.set()
    release.wait(60)
    b.close()


def fd_export_and_die(conn) -> None:
    """Export from a posix_fd pool, send the handle and the descriptor, exit without freeing."""
    r = tether.AsyncResource(0, ipc_handle_type="posix_fd")
    b = tether.Buffer(1 << 20, r)
    b.copy_from_host(bytes(1 << 20))
    conn.send(b.export_ipc())  # the importer must take the descriptor itself (pidfd_getfd), after this dies
    conn.recv()
    os._exit(0)
