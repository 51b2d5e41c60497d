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
// that `resource` handed out. A nonzero `event_stream` gets an interprocess
// event recorded on it; `keep` then owns that event (destroyed with it) and
// the caller keeps it as long as the exported memory lives. Throws
// NOT_SUPPORTED for memory that cannot be shared (with the reason),
// NO_DEVICE without a driver, CUDA for other driver failures.
void export_memory(const Resource& resource, void* ptr, std::size_t size, stream_t event_stream,
                   unsigned char* out, std::shared_ptr<void>& keep);

// Throw INVALID_ARGUMENT, naming `what`, unless `bytes` (kHandleSize) is a
// handle this version of tether can read. Touches no driver.
void validate(const unsigned char* bytes, const char* what);

// Map the memory of a handle into `device`'s primary context
// (TETHER_DEVICE_CURRENT: the exporter's GPU, by UUID). Returns a resource of
// kind TETHER_RESOURCE_KIND_IPC whose one allocation of *size bytes is the
// mapped memory; freeing it (or destroying the resource unallocated) waits
// for the device and drops the mapping. Waits for the handle's event, if any.
ResourcePtr import_memory(const unsigned char* bytes, int device, std::size_t* size);

}  // namespace tether::core::ipc
