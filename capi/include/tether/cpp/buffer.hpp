// tether/cpp/buffer.hpp - tether::buffer: memory that frees itself into its resource (tether/buffer.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_BUFFER_HPP
#define TETHER_CPP_BUFFER_HPP

#include <cstddef>
#include <utility>

#include "tether/cpp/error.hpp"
#include "tether/cpp/handle.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

namespace detail {
struct buffer_traits {
  using type = tether_buffer_t;
  static tether_status_t retain(tether_buffer_t* h) noexcept { return tether_buffer_retain(h); }
  static tether_status_t release(tether_buffer_t* h) noexcept { return tether_buffer_release(h); }
  static constexpr const char* copy_what = "tether::buffer copy";
  static constexpr const char* borrow_what = "tether::buffer::borrow";
};
}  // namespace detail

/// An owning reference to a tether buffer: memory that frees itself into the
/// resource it came from (which it keeps alive), on its stream.
/// Copy = retain (both objects refer to the same memory), move = transfer,
/// destructor = release. An empty buffer holds no handle.
class buffer : public detail::handle<buffer, detail::buffer_traits> {
 public:
  /// An empty buffer.
  buffer() noexcept = default;

  /// Allocate `size` bytes from `res` ordered on `stream`. Throws
  /// invalid_handle_error for an empty `res` (use from_current() for the table).
  buffer(const tether::resource& res, std::size_t size, tether_stream_t stream = 0) {
    if (!res) throw invalid_handle_error(TETHER_ERROR_INVALID_HANDLE, "tether::buffer: empty resource");
    check(tether_buffer_create(res.get(), TETHER_DEVICE_HOST, size, stream, &handle_));
  }

  /// Allocate `size` bytes from the current resource of `device` (a device id,
  /// device_host or device_current), ordered on `stream`.
  static buffer from_current(int device, std::size_t size, tether_stream_t stream = 0) {
    buffer b;
    check(tether_buffer_create(nullptr, device, size, stream, &b.handle_));
    return b;
  }

  // adopt(), borrow(), swap(), reset(), get(), release() and operator bool,
  // and what the defaulted members below do, come from the one handle
  // wrapper, detail::handle (tether/cpp/handle.hpp).

  /// Another reference to the same buffer (retains).
  buffer(const buffer& other) = default;
  /// Take other's reference; other becomes empty.
  buffer(buffer&& other) noexcept = default;
  /// Refer to what other refers to.
  buffer& operator=(const buffer& other) = default;
  /// Take other's reference; other becomes empty.
  buffer& operator=(buffer&& other) noexcept = default;
  /// Release the reference; the last one frees the memory into its resource.
  ~buffer() = default;

  /// Pointer, size, stream, device and accessibility in one call.
  tether_buffer_info_t info() const {
    tether_buffer_info_t i = TETHER_BUFFER_INFO_INIT;
    check(tether_buffer_get_info(handle_, &i));
    return i;
  }
  /// Start of the memory (nullptr for 0 bytes); invalidated by resize().
  void* data() const {
    void* p = nullptr;
    check(tether_buffer_get_ptr(handle_, &p));
    return p;
  }
  /// Size in bytes.
  std::size_t size() const {
    std::size_t n = 0;
    check(tether_buffer_get_size(handle_, &n));
    return n;
  }
  /// The stream the memory is ordered (and will be freed) on.
  tether_stream_t stream() const { return info().stream; }
  /// The resource the memory came from (a new reference).
  tether::resource resource() const {
    tether_resource_t* r = nullptr;
    check(tether_buffer_get_resource(handle_, &r));
    return tether::resource::borrow(r);
  }
  /// Order later frees and copies on `stream`; the caller orders it after the old one.
  void set_stream(tether_stream_t stream) const { check(tether_buffer_set_stream(handle_, stream)); }
  /// Mark the memory as used on `stream` too (PyTorch's record_stream): once the
  /// buffer is freed, the memory is handed out again only after `stream` has
  /// finished the work enqueued on it before the free. No-op for host memory.
  /// See tether_buffer_record_stream.
  void record_stream(tether_stream_t stream) const { check(tether_buffer_record_stream(handle_, stream)); }
  /// Copy `size` bytes of host memory `src` into the buffer at `offset`; returns when done.
  void copy_from_host(const void* src, std::size_t size, std::size_t offset = 0) const {
    check(tether_buffer_copy_from_host(handle_, offset, src, size));
  }
  /// Copy `size` bytes at `offset` of the buffer into host memory `dst`; returns when done.
  void copy_to_host(void* dst, std::size_t size, std::size_t offset = 0) const {
    check(tether_buffer_copy_to_host(handle_, offset, dst, size));
  }
  /// Copy `size` bytes of `src` (from src_offset) into this buffer (at
  /// dst_offset), ordered on this buffer's stream.
  void copy_from(const buffer& src, std::size_t size, std::size_t src_offset = 0, std::size_t dst_offset = 0) const {
    check(tether_buffer_copy(handle_, dst_offset, src.handle_, src_offset, size));
  }
  /// Change the size (new memory from the same resource, min(old, new) bytes
  /// kept). Earlier data() pointers become invalid; unchanged on failure.
  void resize(std::size_t new_size) const { check(tether_buffer_resize(handle_, new_size)); }

  /// Export the memory for another process (CUDA IPC, tether_buffer_export_ipc):
  /// send the handle's bytes there and map them with tether::import_ipc. Nothing
  /// is transferred: keep this buffer alive until every importer has released
  /// its import; resize() is refused from now on. A nonzero `stream` records an
  /// event on it that the importer waits for. Throws not_supported_error (host,
  /// pinned host, managed, async memory), no_device_error, ...
  tether_ipc_handle_t export_ipc(tether_stream_t stream = 0) const {
    tether_ipc_handle_t h;
    check(tether_buffer_export_ipc(handle_, stream, &h));
    return h;
  }
};

/// Map device memory that another process exported (tether_buffer_import_ipc):
/// a new buffer of the exported size whose release unmaps it. `device`:
/// device_current maps it on the GPU that holds it (found by UUID), a device id
/// on that device. Throws invalid_argument_error for bytes that are no handle,
/// no_device_error, cuda_error (the exporter is gone, or this is the exporter).
inline buffer import_ipc(const tether_ipc_handle_t& handle, int device = device_current) {
  tether_buffer_t* h = nullptr;
  check(tether_buffer_import_ipc(&handle, device, &h));
  return buffer::adopt(h);
}

/// import_ipc with the exporter's pool descriptor (tether_buffer_import_ipc_fd):
/// `fd` (-1: none) is a descriptor in this process of the posix_fd pool the
/// memory comes from; borrowed (not closed), used only while that pool is not
/// imported here yet.
inline buffer import_ipc(const tether_ipc_handle_t& handle, int fd, int device) {
  tether_buffer_t* h = nullptr;
  check(tether_buffer_import_ipc_fd(&handle, fd, device, &h));
  return buffer::adopt(h);
}

/// The exporter's pid and its descriptor of the pool (-1 if the handle needs
/// none): tether_ipc_handle_get_exporter. Throws invalid_argument_error.
inline std::pair<int, int> ipc_exporter(const tether_ipc_handle_t& handle) {
  int pid = 0, fd = -1;
  check(tether_ipc_handle_get_exporter(&handle, &pid, &fd));
  return {pid, fd};
}

}  // namespace tether

#endif  // TETHER_CPP_BUFFER_HPP
