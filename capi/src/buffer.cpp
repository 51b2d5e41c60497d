// Buffer handles: allocations that own their memory and free it into the
// resource they came from (never into whatever is current at release time).
#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "internal.hpp"
#include "tether_core/cuda.hpp"
#include "tether_core/process.hpp"

namespace tether::capi {
namespace {

struct BufferObject : Object {
  core::ResourcePtr core;             // the resource's core object (fast path)
  tether_resource_t* resource = nullptr;  // retained handle, for get_resource identity
  core::Properties props{};
  std::mutex mutex;                   // guards ptr/size/stream against resize/set_stream
  void* ptr = nullptr;
  std::size_t size = 0;
  core::stream_t stream = 0;
  // Exports that use the memory at ptr (tether_buffer_pin): resize refuses while > 0.
  std::size_t pins = 0;
  // Other streams the memory is used on (tether_buffer_record_stream), distinct, never `stream`.
  std::vector<core::stream_t> uses;
  // Exported to other processes (tether_buffer_export_ipc): resize is refused, since it
  // would free memory that importers may have mapped. `exports` holds what the exports
  // need alive as long as the memory (their interprocess events).
  bool exported = false;
  std::vector<std::shared_ptr<void>> exports;

  // Free ptr (size bytes): at once, or once every recorded stream is done with it.
  void free_memory(void* p, std::size_t n) {
    if (uses.empty()) {
      core->deallocate(p, n, 0, stream);
    } else {
      core->deallocate_after(p, n, 0, stream, uses.data(), uses.size());
    }
  }

  ~BufferObject() override {
    // After exit has begun, CUDA may already be gone: leak device-visible memory.
    const bool skip = props.device_accessible && core::process_is_exiting();
    if (ptr != nullptr && !skip) {
      try {
        free_memory(ptr, size);
      } catch (...) {
        // Nothing can be reported from a release; the memory is leaked.
      }
    }
    exports.clear();
    core.reset();
    release_resource(resource);
  }
};

inline std::uintptr_t value_of(tether_buffer_t* h) noexcept { return reinterpret_cast<std::uintptr_t>(h); }

class BufferRef {
 public:
  explicit BufferRef(tether_buffer_t* h) {
    if (h == nullptr) throw core::Error(TETHER_ERROR_INVALID_HANDLE, "buffer handle is NULL");
    obj_ = static_cast<BufferObject*>(registry::borrow(value_of(h), ObjectType::Buffer, borrow_));
    if (obj_ == nullptr)
      throw core::Error(TETHER_ERROR_INVALID_HANDLE,
                        "not a live buffer handle (released, forged, or of another type)");
  }
  ~BufferRef() { registry::end_borrow(borrow_); }
  BufferRef(const BufferRef&) = delete;
  BufferRef& operator=(const BufferRef&) = delete;
  BufferObject* operator->() const noexcept { return obj_; }

 private:
  BufferObject* obj_ = nullptr;
  registry::Borrow borrow_;
};

bool host_only(const core::Properties& p) { return p.host_accessible && !p.device_accessible; }

int copy_device(const core::Properties& p) { return p.device >= 0 ? p.device : 0; }

// Copy between memory of a buffer (props) and plain host memory, or between two buffers.
void copy_bytes(void* dst, const core::Properties& dp, const void* src, const core::Properties& sp,
                std::size_t n, core::stream_t stream, bool synchronous) {
  if (n == 0) return;
  if (host_only(dp) && host_only(sp)) {
    std::memcpy(dst, src, n);
    return;
  }
  const int device = dp.device_accessible ? copy_device(dp) : copy_device(sp);
  core::cuda::copy(dst, src, n, device, stream, synchronous);
}

// True if [a, a + n) and [b, b + n) share a byte (compared as integers: they may
// belong to different objects, where pointer comparison is unspecified).
bool overlaps(const void* a, const void* b, std::size_t n) {
  if (n == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return std::less<std::uintptr_t>()(x, y) ? y - x < n : x - y < n;
}

// Copy between a buffer's memory and caller host memory that may overlap it:
// the same rule as tether_buffer_copy within one buffer (memmove for host-only
// memory); other memory that overlaps is staged through a temporary, since
// neither memcpy nor a CUDA copy may overlap.
void copy_host_side(void* dst, const core::Properties& dp, const void* src, const core::Properties& sp,
                    std::size_t n, core::stream_t stream) {
  if (n == 0) return;
  if (host_only(dp) && host_only(sp)) {
    std::memmove(dst, src, n);
    return;
  }
  if (overlaps(dst, src, n)) {
    std::vector<unsigned char> staged(static_cast<const unsigned char*>(src),
                                      static_cast<const unsigned char*>(src) + n);
    copy_bytes(dst, dp, staged.data(), sp, n, stream, true);
    return;
  }
  copy_bytes(dst, dp, src, sp, n, stream, true);
}

const core::Properties kPlainHost{TETHER_RESOURCE_KIND_HOST, TETHER_DEVICE_HOST, false, true};

void check_range(std::size_t offset, std::size_t n, std::size_t size, const char* what) {
  if (offset > size || n > size - offset)
    core::throw_invalid_argument(std::string(what) + ": offset " + std::to_string(offset) + " + size " +
                                 std::to_string(n) + " exceeds the buffer's " + std::to_string(size) +
                                 " bytes");
}

}  // namespace

tether_buffer_t* make_buffer(tether_resource_t* resource, std::size_t size, core::stream_t stream) {
  ResourceRef r(resource);
  HandleRef owner = retained(r);  // the buffer's reference, taken first: nothing to undo if it fails
  auto* b = new BufferObject;
  b->core = r->core;
  b->props = r->core->properties();
  b->stream = stream;
  b->size = size;
  try {
    b->ptr = b->core->allocate(size, 0, stream);
  } catch (...) {
    b->size = 0;
    delete b;
    throw;
  }
  b->resource = owner.release();
  return reinterpret_cast<tether_buffer_t*>(registry::create(ObjectType::Buffer, b));
}

void export_buffer(tether_buffer_t* buffer, const ExportFunction& f) {
  BufferRef b(buffer);
  std::lock_guard<std::mutex> lock(b->mutex);  // the memory cannot move (resize) while it is exported
  std::shared_ptr<void> keep;
  f(*b->core, b->ptr, b->size, b->stream, keep);
  if (keep) b->exports.push_back(std::move(keep));
  b->exported = true;
}

}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_buffer_create(tether_resource_t* resource, int device, size_t size,
                                                tether_stream_t stream, tether_buffer_t** out) {
  return guard("tether_buffer_create", [&] {
    require_out(out);
    *out = nullptr;
    HandleRef current;
    if (resource == nullptr) {
      current = current_resource(device);
      resource = current.get();
    }
    *out = make_buffer(resource, size, stream);
  });
}

TETHER_API tether_status_t tether_buffer_retain(tether_buffer_t* buffer) {
  if (buffer == nullptr) return TETHER_ERROR_INVALID_HANDLE;
  return registry::acquire(value_of(buffer), ObjectType::Buffer) ? TETHER_OK : TETHER_ERROR_INVALID_HANDLE;
}

TETHER_API tether_status_t tether_buffer_release(tether_buffer_t* buffer) {
  if (buffer == nullptr) return TETHER_OK;
  return registry::release(value_of(buffer), ObjectType::Buffer) ? TETHER_OK : TETHER_ERROR_INVALID_HANDLE;
}

TETHER_API tether_status_t tether_buffer_get_info(tether_buffer_t* buffer, tether_buffer_info_t* out) {
  return guard("tether_buffer_get_info", [&] {
    BufferRef b(buffer);
    tether_buffer_info_t info = TETHER_BUFFER_INFO_INIT;
    {
      std::lock_guard<std::mutex> lock(b->mutex);
      info.ptr = b->ptr;
      info.size = b->size;
      info.stream = b->stream;
    }
    info.device = b->props.device;
    info.device_accessible = b->props.device_accessible ? 1 : 0;
    info.host_accessible = b->props.host_accessible ? 1 : 0;
    write_info(out, info, "out");
  });
}

TETHER_API tether_status_t tether_buffer_get_ptr(tether_buffer_t* buffer, void** out) {
  return guard("tether_buffer_get_ptr", [&] {
    require_out(out);
    BufferRef b(buffer);
    std::lock_guard<std::mutex> lock(b->mutex);
    *out = b->ptr;
  });
}

TETHER_API tether_status_t tether_buffer_get_size(tether_buffer_t* buffer, size_t* out) {
  return guard("tether_buffer_get_size", [&] {
    require_out(out);
    BufferRef b(buffer);
    std::lock_guard<std::mutex> lock(b->mutex);
    *out = b->size;
  });
}

TETHER_API tether_status_t tether_buffer_get_resource(tether_buffer_t* buffer, tether_resource_t** out) {
  return guard("tether_buffer_get_resource", [&] {
    require_out(out);
    BufferRef b(buffer);
    *out = b->resource;
  });
}

TETHER_API tether_status_t tether_buffer_set_stream(tether_buffer_t* buffer, tether_stream_t stream) {
  return guard("tether_buffer_set_stream", [&] {
    BufferRef b(buffer);
    std::lock_guard<std::mutex> lock(b->mutex);
    b->stream = stream;
  });
}

TETHER_API tether_status_t tether_buffer_record_stream(tether_buffer_t* buffer, tether_stream_t stream) {
  return guard("tether_buffer_record_stream", [&] {
    BufferRef b(buffer);
    if (b->core->stream_order() == nullptr) return;  // host memory: no stream to wait for
    std::lock_guard<std::mutex> lock(b->mutex);
    const auto s = static_cast<core::stream_t>(stream);
    if (s == b->stream || std::find(b->uses.begin(), b->uses.end(), s) != b->uses.end()) return;
    b->uses.push_back(s);
  });
}

TETHER_API tether_status_t tether_buffer_copy_from_host(tether_buffer_t* buffer, size_t offset,
                                                        const void* src, size_t size) {
  return guard("tether_buffer_copy_from_host", [&] {
    BufferRef b(buffer);
    if (src == nullptr && size != 0) core::throw_invalid_argument("src must not be NULL");
    std::lock_guard<std::mutex> lock(b->mutex);
    check_range(offset, size, b->size, "copy_from_host");
    copy_host_side(static_cast<char*>(b->ptr) + offset, b->props, src, kPlainHost, size, b->stream);
  });
}

TETHER_API tether_status_t tether_buffer_copy_to_host(tether_buffer_t* buffer, size_t offset, void* dst,
                                                      size_t size) {
  return guard("tether_buffer_copy_to_host", [&] {
    BufferRef b(buffer);
    if (dst == nullptr && size != 0) core::throw_invalid_argument("dst must not be NULL");
    std::lock_guard<std::mutex> lock(b->mutex);
    check_range(offset, size, b->size, "copy_to_host");
    copy_host_side(dst, kPlainHost, static_cast<const char*>(b->ptr) + offset, b->props, size, b->stream);
  });
}

TETHER_API tether_status_t tether_buffer_copy(tether_buffer_t* dst, size_t dst_offset, tether_buffer_t* src,
                                              size_t src_offset, size_t size) {
  return guard("tether_buffer_copy", [&] {
    BufferRef d(dst);
    BufferRef s(src);
    // Lock both in a fixed order (by address) so concurrent opposite copies cannot deadlock.
    std::unique_lock<std::mutex> l1, l2;
    if (d.operator->() == s.operator->()) {
      l1 = std::unique_lock<std::mutex>(d->mutex);
    } else if (d.operator->() < s.operator->()) {
      l1 = std::unique_lock<std::mutex>(d->mutex);
      l2 = std::unique_lock<std::mutex>(s->mutex);
    } else {
      l1 = std::unique_lock<std::mutex>(s->mutex);
      l2 = std::unique_lock<std::mutex>(d->mutex);
    }
    check_range(dst_offset, size, d->size, "copy (destination)");
    check_range(src_offset, size, s->size, "copy (source)");
    char* dp = static_cast<char*>(d->ptr) + dst_offset;
    const char* sp = static_cast<const char*>(s->ptr) + src_offset;
    if (d.operator->() == s.operator->() && size != 0 && host_only(d->props)) {
      std::memmove(dp, sp, size);
      return;
    }
    // Host-only copies complete before returning; device copies are ordered on dst's stream.
    copy_bytes(dp, d->props, sp, s->props, size, d->stream, false);
  });
}

TETHER_API tether_status_t tether_buffer_resize(tether_buffer_t* buffer, size_t new_size) {
  return guard("tether_buffer_resize", [&] {
    BufferRef b(buffer);
    std::lock_guard<std::mutex> lock(b->mutex);
    if (b->pins != 0)
      core::throw_invalid_argument(
          "the buffer is pinned by " + std::to_string(b->pins) +
          " export(s) (a memory view, a DLPack tensor, ...: tether_buffer_pin) that still use its "
          "memory; resizing would free it under them. Copy into a new buffer instead, or resize "
          "once every export is gone");
    if (b->exported)
      core::throw_invalid_argument(
          "the buffer was exported to other processes (tether_buffer_export_ipc), which may have its memory "
          "mapped; resizing would free it under them. Copy into a new buffer instead");
    if (new_size == b->size) return;
    void* fresh = b->core->allocate(new_size, 0, b->stream);
    try {
      copy_bytes(fresh, b->props, b->ptr, b->props, new_size < b->size ? new_size : b->size, b->stream, false);
    } catch (...) {
      b->core->deallocate(fresh, new_size, 0, b->stream);
      throw;
    }
    b->free_memory(b->ptr, b->size);  // the old memory waits for the recorded streams too
    b->ptr = fresh;
    b->size = new_size;
  });
}

TETHER_API tether_status_t tether_buffer_pin(tether_buffer_t* buffer) {
  return guard("tether_buffer_pin", [&] {
    if (buffer == nullptr) throw core::Error(TETHER_ERROR_INVALID_HANDLE, "buffer handle is NULL");
    // The pin's own reference first: with it, the object cannot go away below.
    auto* b = static_cast<BufferObject*>(registry::acquire(value_of(buffer), ObjectType::Buffer));
    if (b == nullptr)
      throw core::Error(TETHER_ERROR_INVALID_HANDLE,
                        "not a live buffer handle (released, forged, or of another type)");
    std::lock_guard<std::mutex> lock(b->mutex);
    ++b->pins;
  });
}

TETHER_API tether_status_t tether_buffer_unpin(tether_buffer_t* buffer) {
  if (buffer == nullptr) return TETHER_ERROR_INVALID_HANDLE;
  registry::Borrow borrowed;
  auto* b = static_cast<BufferObject*>(registry::borrow(value_of(buffer), ObjectType::Buffer, borrowed));
  if (b == nullptr) return TETHER_ERROR_INVALID_HANDLE;
  bool had_pin = false;
  {
    std::lock_guard<std::mutex> lock(b->mutex);
    if (b->pins != 0) {
      --b->pins;
      had_pin = true;
    }
  }
  registry::end_borrow(borrowed);
  if (!had_pin) return TETHER_ERROR_INVALID_ARGUMENT;
  // The pin's reference: may be the last one (then the memory is freed here).
  return registry::release(value_of(buffer), ObjectType::Buffer) ? TETHER_OK : TETHER_ERROR_INVALID_HANDLE;
}

TETHER_API tether_status_t tether_buffer_get_pin_count(tether_buffer_t* buffer, size_t* out) {
  return guard("tether_buffer_get_pin_count", [&] {
    require_out(out);
    BufferRef b(buffer);
    std::lock_guard<std::mutex> lock(b->mutex);
    *out = b->pins;
  });
}

}  // extern "C"
