"""CUDA IPC between processes on a GPU (multiprocessing, spawn): export from a pool
over a cuda resource, import in a child, read and write back, release in both
orders, many buffers, a killed importer and a killed exporter, events; the same
for an async pool with ipc_handle_type="posix_fd" (the pool's descriptor sent
over a Unix socket with tether.ipc); and the Dask example of docs/ipc.rst."""

from __future__ import annotations

import multiprocessing as mp

import pytest

import tether
from gpu_support import MiB
from ipc_workers import pattern

pytestmark = pytest.mark.gpu

TIMEOUT = 120


@pytest.fixture(scope="module")
def ctx():
    return mp.get_context("spawn")


@pytest.fixture(scope="module")
def pool():
    with tether.CudaResource(0) as cuda:
        p = tether.PoolResource(cuda, initial_pool_size="64 MiB")
    yield p
    p.close()


def run(ctx, fn, *args):
    with ctx.Pool(1) as workers:
        return workers.apply_async(fn, args).get(TIMEOUT)


def test_round_trip_many_buffers(ctx, pool):
    import ipc_workers
    buffers = []
    for seed in range(32):
        b = tether.Buffer(MiB + 256 * seed, pool)
        b.copy_from_host(pattern(seed, b.size))
        buffers.append(b)
    handles = [b.export_ipc() for b in buffers]
    assert all(len(h) == tether.IPC_HANDLE_SIZE for h in handles)
    assert run(ctx, ipc_workers.read_and_write_back, handles, list(range(32)), None) == [True] * 32
    for seed, b in enumerate(buffers):
        assert b.tobytes() == bytes(255 - x for x in pattern(seed, b.size))
        b.close()


def test_explicit_device_and_pickled_handle(ctx, pool):
    import pickle

    import ipc_workers
    with tether.Buffer(MiB, pool) as b:
        b.copy_from_host(pattern(5, MiB))
        data = pickle.loads(pickle.dumps(b.export_ipc()))
        assert run(ctx, ipc_workers.read_and_write_back, [data], [5], 0) == [True]


def test_same_process_import_is_a_cuda_error(pool):
    with tether.Buffer(MiB, pool) as b:
        with pytest.raises(tether.CudaError, match="this very process"):
            tether.import_ipc(b.export_ipc())


def test_exported_buffer_refuses_resize(pool):
    with tether.Buffer(MiB, pool) as b:
        b.export_ipc()
        with pytest.raises(ValueError, match="exported"):
            b.resize(2 * MiB)


@pytest.mark.parametrize("make, needle", [
    (lambda: tether.ManagedResource(0), "managed"),
    (lambda: tether.PinnedHostResource(0), "pinned host"),
    (lambda: tether.AsyncResource(0), "posix_fd"),
])
def test_what_cannot_be_shared(make, needle):
    with make() as r, tether.Buffer(MiB, r) as b:
        with pytest.raises(tether.NotSupportedError, match=needle):
            b.export_ipc()


@pytest.mark.parametrize("exporter_first", [False, True], ids=["importer_first", "exporter_first"])
def test_release_in_both_orders(ctx, pool, exporter_first):
    # exporter_first: the exporter's buffer goes back to the pool (not to the driver) while the
    # child still maps the chunk: the mapping stays valid; the child then closes it without error.
    import ipc_workers
    b = tether.Buffer(MiB, pool)
    data = b.export_ipc()
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=ipc_workers.import_and_hold, args=(data, ready, release))
    child.start()
    assert ready.wait(TIMEOUT)
    if exporter_first:
        b.close()
    release.set()
    child.join(TIMEOUT)
    assert child.exitcode == 0
    b.close()  # idempotent


def test_killed_importer_leaves_the_exporter_healthy(ctx, pool):
    import ipc_workers
    b = tether.Buffer(MiB, pool)
    b.copy_from_host(pattern(9, MiB))
    data = b.export_ipc()
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=ipc_workers.import_and_hold, args=(data, ready, release))
    child.start()
    assert ready.wait(TIMEOUT)
    child.kill()
    child.join(TIMEOUT)
    # Keep the event referenced: Process.start() drops its args once the spawn
    # data is written, and a collected Event unlinks its semaphore before the
    # child has unpickled it (FileNotFoundError in the child).
    unused = ctx.Event()
    dying = ctx.Process(target=ipc_workers.import_then_die, args=(data, unused))
    dying.start()
    dying.join(TIMEOUT)
    assert dying.exitcode == 3
    assert b.tobytes() == pattern(9, MiB)  # the exporter still reads its memory
    with tether.Buffer(MiB, pool) as other:  # and allocates
        other.copy_from_host(pattern(1, MiB))
    b.close()


def test_killed_exporter_gives_the_importer_an_error(ctx):
    import ipc_workers
    parent, child_end = ctx.Pipe()
    exporter = ctx.Process(target=ipc_workers.export_and_die, args=(child_end,))
    exporter.start()
    data = parent.recv()
    parent.send("got it")
    exporter.join(TIMEOUT)
    assert run(ctx, ipc_workers.import_error, data) in ("CudaError", "ok")  # an error, never a crash


def test_export_with_a_stream_event(ctx, pool):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    from gpu_support import Kernels

    import ipc_workers
    k = Kernels()
    stream = cupy.cuda.Stream(non_blocking=True)
    with tether.Buffer(MiB, pool, stream=stream) as b:
        b.copy_from_host(bytes(MiB))
        k.spin(stream, 0.5)  # the fill lands only after half a second
        k.fill(stream, b.ptr, MiB, 0x5A)
        data = b.export_ipc(stream=stream)
        assert run(ctx, ipc_workers.read_first_byte_after_event, data) == 0x5A


# ---- async pools with ipc_handle_type="posix_fd" ---------------------------------------

@pytest.fixture(scope="module")
def fd_pool():
    try:
        r = tether.AsyncResource(0, ipc_handle_type="posix_fd")
    except tether.NotSupportedError as e:
        pytest.skip(str(e))
    yield r
    r.close()


def serve():
    """A listening Unix socket in a fresh directory, and its address."""
    import os
    import socket
    import tempfile

    address = os.path.join(tempfile.mkdtemp(), "ipc.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
    server.listen(1)
    return server, address


def test_posix_fd_round_trip_many_buffers_one_pool(ctx, fd_pool):
    import ipc_workers
    import tether.ipc
    server, address = serve()
    buffers = []
    for seed in range(16):
        b = tether.Buffer(MiB + 256 * seed, fd_pool)
        b.copy_from_host(pattern(seed, b.size))
        buffers.append(b)
    handles = [b.export_ipc() for b in buffers]
    fds = {tether.ipc.exporter(h)[1] for h in handles}
    assert len(fds) == 1 and None not in fds  # one pool, one descriptor
    with ctx.Pool(1) as workers:
        result = workers.apply_async(ipc_workers.fd_read_and_write_back, (address, len(handles)))
        conn, _ = server.accept()
        with conn:
            for h in handles:
                tether.ipc.send_handle(conn, h)
            assert conn.recv(4) == b"done"  # the importer released everything first
        assert result.get(TIMEOUT) == [True] * len(handles)
    server.close()
    for seed, b in enumerate(buffers):
        assert b.tobytes() == bytes(255 - x for x in pattern(seed, b.size))
        b.close()


@pytest.mark.parametrize("exporter_first", [False, True], ids=["importer_first", "exporter_first"])
def test_posix_fd_release_in_both_orders(ctx, fd_pool, exporter_first):
    # exporter_first breaks the driver's rule for pool memory (importers free first): the
    # contents are then undefined, but neither process may crash or report an error.
    import ipc_workers
    import tether.ipc
    server, address = serve()
    b = tether.Buffer(MiB, fd_pool)
    data = b.export_ipc()
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=ipc_workers.fd_import_and_hold, args=(address, ready, release))
    child.start()
    conn, _ = server.accept()
    with conn:
        tether.ipc.send_handle(conn, data)
    assert ready.wait(TIMEOUT)
    if exporter_first:
        b.close()
    release.set()
    child.join(TIMEOUT)
    assert child.exitcode == 0
    b.close()
    server.close()


def test_posix_fd_killed_importer_leaves_the_exporter_healthy(ctx, fd_pool):
    import ipc_workers
    import tether.ipc
    server, address = serve()
    b = tether.Buffer(MiB, fd_pool)
    b.copy_from_host(pattern(9, MiB))
    data = b.export_ipc()
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=ipc_workers.fd_import_and_hold, args=(address, ready, release))
    child.start()
    conn, _ = server.accept()
    with conn:
        tether.ipc.send_handle(conn, data)
    assert ready.wait(TIMEOUT)
    child.kill()
    child.join(TIMEOUT)
    server.close()
    assert b.tobytes() == pattern(9, MiB)
    with tether.Buffer(MiB, fd_pool) as other:
        other.copy_from_host(pattern(1, MiB))
    b.close()


def test_posix_fd_killed_exporter_gives_the_importer_an_error(ctx, fd_pool):
    import ipc_workers
    parent, child_end = ctx.Pipe()
    exporter = ctx.Process(target=ipc_workers.fd_export_and_die, args=(child_end,))
    exporter.start()
    data = parent.recv()
    parent.send("got it")
    exporter.join(TIMEOUT)
    # no descriptor and the exporter gone: NotSupportedError (pidfd_getfd fails) or CudaError
    assert run(ctx, ipc_workers.import_error, data) in ("NotSupportedError", "CudaError")


def test_async_without_posix_fd_names_why():
    with tether.AsyncResource(0) as r, tether.Buffer(MiB, r) as b:
        with pytest.raises(tether.NotSupportedError, match="posix_fd"):
            b.export_ipc()


def test_the_dask_example_of_the_docs_runs():
    # docs/ipc.rst's Dask example, as the page prints it (read from the page, so the two cannot
    # drift): a LocalCluster of two worker processes; worker A makes and exports a buffer, worker
    # B imports it and sums it. Run as a script (its __main__ guard), in its own interpreter.
    pytest.importorskip("distributed")
    import os
    import pathlib
    import subprocess
    import sys
    import textwrap

    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "ipc.rst").read_text(encoding="utf-8")
    start = page.index("with ``distributed`` installed::") + len("with ``distributed`` installed::")
    lines = []
    for line in page[start:].splitlines()[1:]:
        if line and not line.startswith("   "):
            break
        lines.append(line)
    script = textwrap.dedent("\n".join(lines))
    assert "client.submit(consume, data, workers=[b])" in script and "assert total == 7 << 20" in script
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
