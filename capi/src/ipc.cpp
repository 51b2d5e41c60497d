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
                              std::shared_ptr<void>& keep) {
      core::ipc::export_memory(resource, ptr, size, static_cast<core::stream_t>(stream), out->data, keep);
    });
  });
}

TETHER_API tether_status_t tether_buffer_import_ipc(const tether_ipc_handle_t* handle, int device,
                                                    tether_buffer_t** out) {
  return guard("tether_buffer_import_ipc", [&] {
    require_out(out);
    *out = nullptr;
    if (handle == nullptr) core::throw_invalid_argument("handle must not be NULL");
    std::size_t size = 0;
    core::ResourcePtr mapping = core::ipc::import_memory(handle->data, device, &size);
    HandleRef resource = HandleRef::adopt(make_resource_handle(
        std::move(mapping), nullptr, {}, "it maps memory imported from another process (tether_buffer_import_ipc)"));
    *out = make_buffer(resource.get(), size, 0);  // the buffer holds the resource from here on
  });
}

}  // extern "C"
