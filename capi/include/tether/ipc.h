/*
 * tether/ipc.h - sharing device memory with another process (CUDA IPC).
 *
 * An exporter turns a buffer into a tether_ipc_handle_t: TETHER_IPC_HANDLE_SIZE
 * plain bytes that can be sent any way bytes travel (a pipe, a socket, pickle,
 * a Dask message). Another process on the same machine imports those bytes and
 * gets a buffer that maps the same device memory.
 *
 * What can be shared: device memory that cuMemAlloc gave - a `cuda` resource,
 * and pools, arenas, binning and adaptors over one. The handle names the whole
 * driver allocation the buffer lies in (a pool's chunk) plus the buffer's
 * offset and size; the importer sees exactly the buffer's bytes.
 * And memory of an `async` resource created with ipc_handle_type
 * TETHER_IPC_HANDLE_POSIX_FD ("posix_fd"), or of an `async_view` of a pool
 * created with a POSIX fd handle type, and adaptors over them (see "Memory of
 * a posix_fd pool" below).
 * What cannot (NOT_SUPPORTED, with the reason): host, pinned-host and managed
 * memory; async resources whose pool has no shareable handle (the default:
 * ipc_handle_type "none", the device's default pool); and device memory that
 * the driver refuses to share (e.g. from a user callback resource that is not
 * cuMemAlloc memory).
 *
 * Memory of a posix_fd pool. The driver's stream-ordered pools share memory
 * through a shareable handle of the whole pool - a POSIX file descriptor,
 * which cannot travel in bytes - plus export data per allocation, which does.
 * tether exports the pool's descriptor once per pool (the resource keeps it
 * open until it is destroyed); the handle carries the export data, the
 * exporter's pid and its descriptor's number (tether_ipc_handle_get_exporter).
 * The importer needs the pool once per (pool, device): it imports the pool
 * from a descriptor the caller passes (tether_buffer_import_ipc_fd; send it
 * over a Unix domain socket with SCM_RIGHTS - Python's tether.ipc does that),
 * or, without one, takes it from the exporter with pidfd_getfd
 * (tether_ipc_get_process_fd: Linux 5.6+, and ptrace permission over the
 * exporter). Further buffers of a pool already imported need no descriptor.
 * The imported pool is shared by all buffers imported from it (counted, per
 * device) and its import is destroyed with the last of them.
 * Exporting such memory with stream 0 first waits for the buffer's stream (the
 * driver requires the allocation to be complete before another process
 * touches it).
 *
 * Ownership. Exporting transfers nothing: the exporter's buffer still owns the
 * memory, and the handle owns nothing (it may be copied, sent, dropped). The
 * importer's buffer owns only its mapping: its last release closes the mapping
 * (cuIpcCloseMemHandle), it frees nothing into any resource.
 *
 * The exporter-frees-first rule (cuMemAlloc memory). With CUDA IPC the memory must stay allocated in
 * the exporting process for as long as any importer has it mapped; the CUDA
 * documentation leaves a free in the exporter while another process maps the
 * memory undefined. So the exporter must keep its buffer alive until every
 * importer has released its imported buffer (have importers reply when they
 * are done). tether does not count importers across processes and cannot
 * detect a violation. What it does do: an exported buffer refuses
 * tether_buffer_resize (INVALID_ARGUMENT), so the exported memory cannot be
 * freed under importers by a resize; and memory from a pool goes back to the
 * pool, not to the driver, when the exporter's buffer is released - the
 * importer's mapping of the chunk stays valid while the pool holds it, but its
 * contents then belong to whoever allocates there next.
 *
 * For memory of a posix_fd pool the driver is stricter: "the imported memory
 * must be freed from all importing processes before being freed in the
 * exporting process". Released in the other order, the exporter's pool may
 * hand the memory to its next allocation while an importer still maps it; the
 * importer's release still frees only its own import and is harmless to the
 * exporter, but what it read or wrote meanwhile is undefined.
 *
 * If the exporting process dies, an import of its handles fails with an error,
 * never a crash: TETHER_ERROR_CUDA (the driver's answer), or for a posix_fd
 * pool not yet imported and no descriptor given, NOT_SUPPORTED (the
 * descriptor cannot be taken from a process that is gone). Buffers already
 * imported keep a mapping whose contents are undefined.
 *
 * Memory cannot be imported into the process that exported it (CUDA refuses):
 * use the buffer itself there.
 *
 * Threads: all calls are thread-safe. Imports of handles that name the same
 * driver allocation (buffers of one pool chunk, one handle imported twice) share
 * one mapping per device, counted: it is closed when the last of those
 * imported buffers is released.
 */
#ifndef TETHER_IPC_H
#define TETHER_IPC_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Size in bytes of a tether_ipc_handle_t (and of its serialised form). */
#define TETHER_IPC_HANDLE_SIZE 192

/**
 * An exported buffer, as plain bytes: copy it, send it, compare it with memcmp.
 * The layout of `data` is internal and versioned (a magic number and a version
 * first; then the exporter's device UUID, the offset and size of the buffer in
 * the driver allocation, the driver's memory handle - or, for a posix_fd pool,
 * the allocation's export data, the pool's id and the exporter's descriptor
 * number - an optional event handle and the exporter's process id). Handles are meaningful only on the machine
 * that made them, to processes using the same tether major version.
 */
typedef struct tether_ipc_handle {
  /** TETHER_IPC_HANDLE_SIZE bytes (written as a number: the cdef of the Python package needs one). */
  unsigned char data[192];
} tether_ipc_handle_t;

/**
 * Export `buffer`'s memory for another process into *out.
 *
 * stream: 0, or a stream on which work that writes the buffer was enqueued. If
 * nonzero, an interprocess event is recorded on it now, and tether_buffer_import_ipc
 * waits for that event before it returns, so the importer sees that work done.
 * With 0 no event is recorded: the exporter must itself make sure the memory's
 * writes are complete (e.g. synchronise) before the importer reads it. The
 * event lives as long as the exporting buffer (each export with a stream adds one).
 *
 * Ownership: nothing is transferred (see the top of this file); *out owns
 * nothing. From now on the buffer refuses tether_buffer_resize. Keep the buffer
 * alive until every importer has released its import.
 *
 * Memory of a posix_fd pool: with stream 0 the call first waits for the
 * buffer's stream (cuStreamSynchronize), so the allocation and the work
 * before it are done; with a stream, that stream is first made to wait for
 * the buffer's stream (no host wait) and the event is recorded after.
 *
 * Errors: INVALID_HANDLE for a bad buffer; INVALID_ARGUMENT for out == NULL or
 * a 0-byte buffer (nothing to share); NOT_SUPPORTED for memory that cannot be
 * shared (host, pinned host, managed, an async resource without
 * ipc_handle_type posix_fd, memory the driver refuses, a driver without the
 * memory-pool IPC entry points), with the reason; NO_DEVICE without a CUDA driver; CUDA if the
 * driver fails otherwise (e.g. recording the event on a bad stream).
 * *out is written only on success.
 */
TETHER_API tether_status_t tether_buffer_export_ipc(tether_buffer_t* buffer, tether_stream_t stream,
                                                    tether_ipc_handle_t* out);

/**
 * Map memory exported by another process: *out receives +1 on a new buffer of
 * the exported size whose pointer is the exported memory as seen from `device`.
 *
 * device: the CUDA device whose primary context maps the memory. TETHER_DEVICE_CURRENT
 * means the GPU that holds the memory, found by the UUID in the handle (the
 * device numbers of two processes may differ, e.g. under different
 * CUDA_VISIBLE_DEVICES); NO_DEVICE if this process cannot see that GPU. Another
 * device maps it through peer access (cuIpcOpenMemHandle with
 * CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), where the GPUs allow it.
 *
 * If the handle carries an event (the export was given a stream), the call
 * waits (on the host) until the exporter's work before the export is done.
 *
 * The buffer: device memory, stream 0 (set another with tether_buffer_set_stream),
 * resource (tether_buffer_get_resource) a private mapping resource of kind
 * TETHER_RESOURCE_KIND_IPC ("ipc") that allocates nothing. Reads, writes, copies,
 * pins, DLPack and the other buffer calls work as on any device buffer.
 * tether_buffer_resize is NOT_SUPPORTED (the mapping has a fixed size; copy
 * into a buffer of your own). The last release waits until the device's work
 * is done (cuCtxSynchronize: the mapping must not disappear under a kernel, on
 * any stream), then drops its share of the mapping, closing it with the last
 * share; the exporter's memory is not freed. Because of that wait,
 * tether_buffer_record_stream has nothing to add on an imported buffer (it is
 * accepted and changes nothing); tether_buffer_set_stream works as usual.
 *
 * Memory of a posix_fd pool: the same as tether_buffer_import_ipc_fd with
 * fd -1 (the pool's descriptor is taken from the exporter with pidfd_getfd
 * unless the pool is already imported here). The last release of the buffer
 * frees the imported pointer (cuMemFree: the exporter's memory stays
 * allocated there) and, with the last buffer of that pool, the pool's import.
 *
 * Ownership: `handle` is only read (the caller keeps it); *out is +1.
 * Errors: INVALID_ARGUMENT for handle or out NULL, for bytes that are no tether
 * IPC handle ("handle" named: wrong magic, an unknown version, inconsistent
 * fields), or an invalid device; NO_DEVICE without a CUDA driver or when the
 * exporter's GPU is not visible; CUDA if the driver cannot map the memory (the
 * exporter exited or freed it, the handle comes from this very process, ...);
 * NOT_SUPPORTED for posix_fd pool memory whose descriptor cannot be taken
 * from the exporter (the reason said: no pidfd_getfd, no ptrace permission,
 * the exporter has exited) - pass it with tether_buffer_import_ipc_fd.
 */
TETHER_API tether_status_t tether_buffer_import_ipc(const tether_ipc_handle_t* handle, int device,
                                                    tether_buffer_t** out);

/**
 * tether_buffer_import_ipc with the exporter's pool descriptor at hand.
 *
 * fd: -1, or a file descriptor in this process of the shareable handle of the
 * pool the handle's memory comes from (the exporter's descriptor, whose number
 * tether_ipc_handle_get_exporter gives there, sent over a Unix domain socket
 * with SCM_RIGHTS, or taken with tether_ipc_get_process_fd). It is needed
 * only for handles of posix_fd pool memory whose pool this process has not
 * imported yet (for the device); otherwise it is ignored (so passing it every
 * time is right). With -1 this is tether_buffer_import_ipc.
 *
 * Ownership: `fd` is borrowed: tether neither closes it nor keeps it (the pool
 * import holds what it needs), so the caller closes it when convenient, e.g.
 * right after the call. `handle` is only read; *out is +1.
 * Errors: those of tether_buffer_import_ipc; INVALID_ARGUMENT naming fd for fd
 * < -1; CUDA (cuMemPoolImportFromShareableHandle) if fd is not a pool's
 * shareable handle.
 */
TETHER_API tether_status_t tether_buffer_import_ipc_fd(const tether_ipc_handle_t* handle, int fd, int device,
                                                       tether_buffer_t** out);

/**
 * Who exported `handle`: *pid receives the exporter's process id and *fd the
 * exporter's file descriptor number of its pool's shareable handle, or -1 when
 * the handle needs no descriptor (cuMemAlloc memory). Either pointer may be
 * NULL. Touches no driver (works without a GPU).
 *
 * In the exporting process *fd is the descriptor to send to importers (over a
 * Unix domain socket, SCM_RIGHTS). It stays owned by tether - do not close it -
 * and open while the exporting async resource lives. In any other process the
 * number means nothing by itself (tether_ipc_get_process_fd takes it from the
 * exporter).
 *
 * Ownership: `handle` is only read. Errors: INVALID_ARGUMENT for handle NULL or
 * bytes that are no tether IPC handle (named "handle").
 */
TETHER_API tether_status_t tether_ipc_handle_get_exporter(const tether_ipc_handle_t* handle, int* pid, int* fd);

/**
 * Duplicate file descriptor `fd` of process `pid` into this process:
 * *out receives a new descriptor (pidfd_open + pidfd_getfd, Linux 5.6+) that
 * refers to the same open file. Used by tether_buffer_import_ipc to take a
 * posix_fd pool's descriptor from its exporter; usable for any descriptor.
 *
 * The kernel allows it only with ptrace access to `pid`: the same user and no
 * stricter policy (Yama's kernel.yama.ptrace_scope 1, the common default,
 * allows it only for descendants, or where the target named the caller with
 * prctl(PR_SET_PTRACER)); containers may forbid it altogether. Where it is
 * refused, send the descriptor over a Unix domain socket instead.
 *
 * Ownership: the caller owns *out (close it). Errors: INVALID_ARGUMENT for out
 * NULL, pid <= 0 or fd < 0, or naming "pid" when no such process exists
 * (exited) or "fd" when it has no such descriptor; NOT_SUPPORTED when the
 * kernel lacks the calls or permission is refused (the reason said).
 */
TETHER_API tether_status_t tether_ipc_get_process_fd(int pid, int fd, int* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_IPC_H */
