// CUDA IPC: exporting device memory as bytes another process can map, and
// mapping such bytes (tether/ipc.h is the contract; core/src/ipc.cpp the code).
//
// The handle is TETHER_IPC_HANDLE_SIZE bytes in a layout of our own, written
// byte by byte (little-endian), versioned, and checked field by field before
// any of it reaches the driver, so foreign or damaged bytes are an
// INVALID_ARGUMENT, never a driver call with garbage.
#pragma once

#include <cstddef>
#include <memory>

#include "tether_core/resource.hpp"

namespace tether::core::ipc {

inline constexpr std::size_t kHandleSize = 192;

// Write into `out` (kHandleSize bytes) a handle of [ptr, ptr + size), memory
// that `resource` handed out on `alloc_stream` (the buffer's stream). A nonzero
// `event_stream` gets an interprocess event recorded on it; `keep` then owns
// that event (destroyed with it) and the caller keeps it as long as the
// exported memory lives. Memory of an async resource with a posix_fd pool is
// exported through the pool (kind 2): with event_stream 0 this first waits for
// alloc_stream (the allocation must be complete before an importer touches
// it). Throws NOT_SUPPORTED for memory that cannot be shared (with the reason),
// NO_DEVICE without a driver, CUDA for other driver failures.
void export_memory(const Resource& resource, void* ptr, std::size_t size, stream_t event_stream,
                   stream_t alloc_stream, unsigned char* out, std::shared_ptr<void>& keep);

// Throw INVALID_ARGUMENT, naming `what`, unless `bytes` (kHandleSize) is a
// handle this version of tether can read. Touches no driver.
void validate(const unsigned char* bytes, const char* what);

// The exporter's process id and, for memory of a pool shared through a POSIX
// fd, its fd number of the pool's shareable handle (else -1). Either may be
// NULL. Validates like validate(). Touches no driver.
void exporter(const unsigned char* bytes, const char* what, int* pid, int* fd);

// A new descriptor in this process for descriptor `fd` of process `pid`
// (pidfd_open + pidfd_getfd; the caller owns it). Throws INVALID_ARGUMENT
// naming "pid" or "fd" (no such process or descriptor), NOT_SUPPORTED when the
// kernel lacks the calls or ptrace permission is refused.
int process_fd(int pid, int fd);

// Map the memory of a handle into `device`'s primary context
// (TETHER_DEVICE_CURRENT: the exporter's GPU, by UUID). Returns a resource of
// kind TETHER_RESOURCE_KIND_IPC whose one allocation of *size bytes is the
// mapped memory; freeing it (or destroying the resource unallocated) waits
// for the device and drops the mapping. Waits for the handle's event, if any.
// `fd` (-1: none): for handles of pool memory, a descriptor (borrowed, not
// closed) of the exporter's pool; without one, and unless the pool is already
// imported here, it is taken from the exporter with process_fd.
ResourcePtr import_memory(const unsigned char* bytes, int device, int fd, std::size_t* size);

}  // namespace tether::core::ipc
