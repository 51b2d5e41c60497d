// Buffer handles: allocations that own their memory and free it into the
// resource they came from (never into whatever is current at release time).
#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "entered.hpp"
#include "internal.hpp"
#include "tether_core/cuda.hpp"
#include "tether_internal.h"
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

  // The quick release's teardown (tether_internal_buffer_release_quick), on
  // an object nobody else can reach any more (its handle dead, no borrower):
  // give the memory back through the resource's quick path, and drop the
  // buffer's reference to the resource's handle unless it is the last. True
  // if all of it was done; else what was done is recorded (ptr, core,
  // resource cleared) and the destructor, run without the GIL, does the rest.
  // Refused outright: recorded streams (deallocate_after records events),
  // IPC exports (their events are destroyed with them), pins (each holds a
  // reference, so a pinned buffer never gets here; checked all the same),
  // device memory at exit (the destructor leaks it).
  bool take_down_quick() noexcept {
    if (pins != 0 || exported || !exports.empty() || !uses.empty()) return false;
    if (props.device_accessible && core::process_is_exiting()) return false;
    if (ptr != nullptr) {
      if (!core->try_deallocate_quick(ptr, size, 0, stream)) return false;
      ptr = nullptr;
      size = 0;
    }
    // Not the core's last reference: the resource's handle, which this
    // buffer still holds, keeps its object and that object's `core`.
    core.reset();
    if (registry::drop_quick(reinterpret_cast<std::uintptr_t>(resource), ObjectType::Resource, false) !=
        registry::QuickDrop::Dropped)
      return false;  // the last reference: the release may destroy the resource
    resource = nullptr;
    return true;
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

// ---- the quick paths (tether_internal.h) ------------------------------------
//
// Why nothing below can wait for a thread that waits for Python's GIL:
//  - the fork gate is registry::try_enter()'s, which steps back (refuses)
//    while a fork is being prepared instead of waiting for it;
//  - the handle checks and reference counts are single atomic operations;
//    the only lock is the registry's free-list mutex (registry::try_create,
//    dispose_dead), a leaf lock: its holders call nothing but operator new
//    (nothrow) under it (handles.cpp, create());
//  - the memory comes from and goes back to Resource::try_allocate_quick()/
//    try_deallocate_quick() (resource.hpp): try-locks, no CUDA call, no
//    upstream call, no callback;
//  - no resource is destroyed: the buffer's reference to its resource's
//    handle is dropped only if it is not the last (registry::drop_quick);
//  - a buffer is destroyed here only once no other thread borrows its handle
//    (a borrower may be inside a call that waits on the device or calls back
//    into Python); else, and for anything else the public call would need,
//    the caller is told to finish without the GIL (TETHER_QUICK_FINISH) or
//    to make the public call (TETHER_QUICK_REFUSED).

TETHER_API int tether_internal_buffer_create_quick(tether_resource_t* resource, size_t size,
                                                   tether_stream_t stream, void** out) {
  if (resource == nullptr || size == 0 || out == nullptr) return TETHER_QUICK_REFUSED;
  registry::Entered e;
  if (!registry::try_enter(reinterpret_cast<std::uintptr_t>(resource), ObjectType::Resource, e))
    return TETHER_QUICK_REFUSED;
  auto* r = static_cast<ResourceObject*>(e.object);
  auto* b = new (std::nothrow) BufferObject;
  if (b == nullptr) {
    registry::leave(e);
    return TETHER_QUICK_REFUSED;
  }
  b->ptr = r->core->try_allocate_quick(size, 0, stream);
  if (b->ptr == nullptr) {
    delete b;  // holds nothing
    registry::leave(e);
    return TETHER_QUICK_REFUSED;
  }
  b->size = size;
  b->stream = stream;
  b->props = r->core->properties();
  b->core = r->core;  // (the borrowed object holds the core meanwhile: never its last reference below)
  if (registry::acquire(reinterpret_cast<std::uintptr_t>(resource), ObjectType::Resource) == nullptr) {
    // The handle's last reference went meanwhile: the public call reports it.
    int result = TETHER_QUICK_FINISH;
    if (b->core->try_deallocate_quick(b->ptr, size, 0, stream)) {
      b->ptr = nullptr;
      b->core.reset();
      delete b;
      result = TETHER_QUICK_REFUSED;
    } else {
      *out = b;  // its destructor frees the memory (tether_internal_buffer_discard)
    }
    registry::leave(e);
    return result;
  }
  b->resource = resource;
  const std::uintptr_t h = registry::try_create(ObjectType::Buffer, b, nullptr);
  registry::leave(e);
  if (h == 0) {  // no memory for the handle (or 2^28 of them live): the public call reports it
    *out = b;
    return TETHER_QUICK_FINISH;
  }
  *out = reinterpret_cast<void*>(h);
  return TETHER_QUICK_DONE;
}

TETHER_API void tether_internal_buffer_discard(void* unfinished) {
  ForkGate gate;  // the destructor may take locks (fork.cpp)
  delete static_cast<BufferObject*>(unfinished);
}

TETHER_API int tether_internal_buffer_release_quick(tether_buffer_t* buffer) {
  if (buffer == nullptr) return TETHER_QUICK_DONE;  // as tether_buffer_release: a no-op
  const std::uintptr_t h = value_of(buffer);
  registry::Entered e;
  if (!registry::try_enter(h, ObjectType::Buffer, e)) return TETHER_QUICK_REFUSED;
  int result = TETHER_QUICK_DONE;
  switch (registry::drop_quick(h, ObjectType::Buffer, true)) {
    case registry::QuickDrop::Refused:
      result = TETHER_QUICK_REFUSED;
      break;
    case registry::QuickDrop::Dropped:
      break;
    case registry::QuickDrop::Last:
      // The handle is dead: no new borrow can start. Those under way (another
      // thread inside a call on this buffer) must end before it goes.
      if (!registry::borrowed_elsewhere(h, ObjectType::Buffer) &&
          static_cast<BufferObject*>(e.object)->take_down_quick()) {
        registry::dispose_dead(h);
      } else {
        result = TETHER_QUICK_FINISH;
      }
      break;
  }
  registry::leave(e);
  return result;
}

TETHER_API void tether_internal_buffer_release_finish(tether_buffer_t* buffer) {
  (void)registry::destroy_dead(value_of(buffer));
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
