// tether_buffer_export_ipc / tether_buffer_import_ipc: the C glue over
// core/src/ipc.cpp. An imported buffer is an ordinary buffer over a private
// resource of kind IPC whose one allocation is the mapping, so every buffer
// call works on it and its last release closes the mapping.
#include "internal.hpp"
#include "tether_core/ipc.hpp"

static_assert(sizeof(tether_ipc_handle_t) == TETHER_IPC_HANDLE_SIZE, "the handle is its bytes");
static_assert(TETHER_IPC_HANDLE_SIZE == tether::core::ipc::kHandleSize, "one size");

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_buffer_export_ipc(tether_buffer_t* buffer, tether_stream_t stream,
                                                    tether_ipc_handle_t* out) {
  return guard("tether_buffer_export_ipc", [&] {
    require_out(out);
    export_buffer(buffer, [&](const core::Resource& resource, void* ptr, std::size_t size,
                              core::stream_t buffer_stream, std::shared_ptr<void>& keep) {
      core::ipc::export_memory(resource, ptr, size, static_cast<core::stream_t>(stream), buffer_stream, out->data,
                               keep);
    });
  });
}

}  // extern "C"

namespace {

void import(const char* function, const tether_ipc_handle_t* handle, int fd, int device, tether_buffer_t** out) {
  require_out(out);
  *out = nullptr;
  if (handle == nullptr) core::throw_invalid_argument("handle must not be NULL");
  std::size_t size = 0;
  core::ResourcePtr mapping = core::ipc::import_memory(handle->data, device, fd, &size);
  HandleRef resource = HandleRef::adopt(make_resource_handle(
      std::move(mapping), nullptr, {}, std::string("it maps memory imported from another process (") + function + ")"));
  *out = make_buffer(resource.get(), size, 0);  // the buffer holds the resource from here on
}

}  // namespace

extern "C" {

TETHER_API tether_status_t tether_buffer_import_ipc(const tether_ipc_handle_t* handle, int device,
                                                    tether_buffer_t** out) {
  return guard("tether_buffer_import_ipc", [&] { import("tether_buffer_import_ipc", handle, -1, device, out); });
}

TETHER_API tether_status_t tether_buffer_import_ipc_fd(const tether_ipc_handle_t* handle, int fd, int device,
                                                       tether_buffer_t** out) {
  return guard("tether_buffer_import_ipc_fd",
               [&] { import("tether_buffer_import_ipc_fd", handle, fd, device, out); });
}

TETHER_API tether_status_t tether_ipc_handle_get_exporter(const tether_ipc_handle_t* handle, int* pid, int* fd) {
  return guard("tether_ipc_handle_get_exporter", [&] {
    if (handle == nullptr) core::throw_invalid_argument("handle must not be NULL");
    core::ipc::exporter(handle->data, "handle", pid, fd);
  });
}

TETHER_API tether_status_t tether_ipc_get_process_fd(int pid, int fd, int* out) {
  return guard("tether_ipc_get_process_fd", [&] {
    require_out(out);
    *out = core::ipc::process_fd(pid, fd);
  });
}

}  // extern "C"
