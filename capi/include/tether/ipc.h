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
 * What cannot (NOT_SUPPORTED, with the reason): host, pinned-host and managed
 * memory; the `async` resource and anything over it (the driver's stream-ordered
 * pools share memory only through a shareable handle of the pool, a file
 * descriptor that must travel over a Unix socket: not supported yet, also not
 * with ipc_handle_type="posix_fd"); and device memory that the driver refuses
 * to share (e.g. from a user callback resource that is not cuMemAlloc memory).
 *
 * Ownership. Exporting transfers nothing: the exporter's buffer still owns the
 * memory, and the handle owns nothing (it may be copied, sent, dropped). The
 * importer's buffer owns only its mapping: its last release closes the mapping
 * (cuIpcCloseMemHandle), it frees nothing into any resource.
 *
 * The exporter-frees-first rule. With CUDA IPC the memory must stay allocated in
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
 * If the exporting process dies, an import of its handles fails with
 * TETHER_ERROR_CUDA (the driver's answer), never a crash; buffers already
 * imported keep a mapping whose contents are undefined.
 *
 * Memory cannot be imported into the process that exported it (CUDA refuses):
 * use the buffer itself there.
 *
 * Threads: both calls are thread-safe. Imports of handles that name the same
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
 * the driver allocation, the driver's memory handle, an optional event handle
 * and the exporter's process id). Handles are meaningful only on the machine
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
 * Errors: INVALID_HANDLE for a bad buffer; INVALID_ARGUMENT for out == NULL or
 * a 0-byte buffer (nothing to share); NOT_SUPPORTED for memory that cannot be
 * shared (host, pinned host, managed, the async resource, memory the driver
 * refuses), with the reason; NO_DEVICE without a CUDA driver; CUDA if the
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
 * Ownership: `handle` is only read (the caller keeps it); *out is +1.
 * Errors: INVALID_ARGUMENT for handle or out NULL, for bytes that are no tether
 * IPC handle ("handle" named: wrong magic, an unknown version, inconsistent
 * fields), or an invalid device; NO_DEVICE without a CUDA driver or when the
 * exporter's GPU is not visible; CUDA if the driver cannot map the memory (the
 * exporter exited or freed it, the handle comes from this very process, ...).
 */
TETHER_API tether_status_t tether_buffer_import_ipc(const tether_ipc_handle_t* handle, int device,
                                                    tether_buffer_t** out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_IPC_H */
