// Resource handles: the host resource, refcounting, allocation and the queries
// every resource answers. Each other type has its own file: pool.cpp,
// statistics.cpp, cuda.cpp.
#include <cstring>

#include "entered.hpp"
#include "internal.hpp"
#include "tether_internal.h"
#include "orphans.hpp"
#include "tether_core/host.hpp"

namespace tether::capi {

namespace {
inline std::uintptr_t value_of(tether_resource_t* h) noexcept { return reinterpret_cast<std::uintptr_t>(h); }
}  // namespace

ResourceObject::~ResourceObject() {
  // Orphan the core object if callers still hold raw allocations from it.
  // Decided by the resource's own books, never by who else holds the core
  // object: what dependents took (a pool's chunks, counted apart by
  // allocate_for) is theirs to give back, while a holder of the core object
  // (a buffer still live after a caller released this handle once too often)
  // must not be the one that destroys memory a caller still uses. The
  // orphan list keeps its own reference: whoever else holds one may drop it.
  if (core && core->caller_outstanding_count() > 0) {
    const auto count = static_cast<std::int64_t>(core->caller_outstanding_count());
    const auto bytes = static_cast<std::int64_t>(core->caller_outstanding_bytes());
    orphans::adopt(std::move(core), count, bytes);
  }
  core.reset();
  if (upstream != nullptr) release_resource(upstream);
}

tether_resource_t* make_resource_handle(core::ResourcePtr core, tether_resource_t* upstream, std::string spec_args,
                                        std::string spec_refusal) {
  auto* obj = new ResourceObject;
  obj->core = std::move(core);
  obj->spec_args = std::move(spec_args);
  obj->spec_refusal = std::move(spec_refusal);
  if (upstream != nullptr) {
    if (retain_resource(upstream) != TETHER_OK) {
      delete obj;
      throw core::Error(TETHER_ERROR_INVALID_HANDLE, "upstream handle is not a live resource");
    }
    obj->upstream = upstream;
  }
  return reinterpret_cast<tether_resource_t*>(registry::create(ObjectType::Resource, obj));
}

ResourceRef::ResourceRef(tether_resource_t* h) : handle_(h), obj_(nullptr) {
  if (h == nullptr) throw core::Error(TETHER_ERROR_INVALID_HANDLE, "resource handle is NULL");
  obj_ = static_cast<ResourceObject*>(registry::borrow(value_of(h), ObjectType::Resource, borrow_));
  if (obj_ == nullptr)
    throw core::Error(TETHER_ERROR_INVALID_HANDLE,
                      "not a live resource handle (released, forged, or of another type)");
}

ResourceRef::~ResourceRef() { registry::end_borrow(borrow_); }

HandleRef retained(const ResourceRef& r) {
  if (retain_resource(r.handle()) != TETHER_OK)
    throw core::Error(TETHER_ERROR_INVALID_HANDLE, "resource handle was released while in use");
  return HandleRef::adopt(r.handle());
}

tether_status_t retain_resource(tether_resource_t* h) noexcept {
  if (h == nullptr) return TETHER_ERROR_INVALID_HANDLE;
  return registry::acquire(value_of(h), ObjectType::Resource) ? TETHER_OK : TETHER_ERROR_INVALID_HANDLE;
}

tether_status_t release_resource(tether_resource_t* h) noexcept {
  if (h == nullptr) return TETHER_OK;
  return registry::release(value_of(h), ObjectType::Resource) ? TETHER_OK : TETHER_ERROR_INVALID_HANDLE;
}

namespace {

tether_resource_properties_t to_c(const core::Properties& p) {
  tether_resource_properties_t out{};
  out.struct_size = sizeof out;
  out.kind = static_cast<uint32_t>(p.kind);
  out.device = p.device;
  out.device_accessible = p.device_accessible ? 1 : 0;
  out.host_accessible = p.host_accessible ? 1 : 0;
  return out;
}

// The general paths of allocate/deallocate (gate + ResourceRef): the first
// call on a thread, calls from callbacks, during a fork, and every error.
// Out of line, so the fast path's frame stays small.
[[gnu::noinline, gnu::cold]] tether_status_t allocate_general(tether_resource_t* resource, size_t size,
                                                              size_t alignment, tether_stream_t stream,
                                                              void** out_ptr) noexcept {
  return guard("tether_resource_allocate", [&] {
    require_out(out_ptr, "out_ptr");
    *out_ptr = nullptr;
    ResourceRef r(resource);
    *out_ptr = r->core->allocate(size, alignment, stream);
  });
}

[[gnu::noinline, gnu::cold]] tether_status_t deallocate_general(tether_resource_t* resource, void* ptr,
                                                                size_t size, size_t alignment,
                                                                tether_stream_t stream) noexcept {
  return guard("tether_resource_deallocate", [&] {
    ResourceRef r(resource);
    r->core->deallocate(ptr, size, alignment, stream);
  });
}

}  // namespace
}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_host_resource_create(tether_resource_t** out) {
  return guard("tether_host_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    *out = make_resource_handle(core::make_host_resource(), nullptr);
  });
}

TETHER_API tether_status_t tether_resource_retain(tether_resource_t* resource) {
  return retain_resource(resource);
}

TETHER_API tether_status_t tether_resource_release(tether_resource_t* resource) {
  return release_resource(resource);
}

TETHER_API tether_status_t tether_resource_allocate(tether_resource_t* resource, size_t size,
                                                    size_t alignment, tether_stream_t stream,
                                                    void** out_ptr) {
  // Fast path (registry::try_enter, entered.hpp): a live handle, outside any other call.
  registry::Entered e;
  if (out_ptr != nullptr && registry::try_enter(value_of(resource), ObjectType::Resource, e)) {
    auto* obj = static_cast<ResourceObject*>(e.object);
    return guard_entered("tether_resource_allocate", e, [&] {
      *out_ptr = nullptr;
      *out_ptr = obj->core->allocate(size, alignment, stream);
    });
  }
  return allocate_general(resource, size, alignment, stream, out_ptr);
}

TETHER_API tether_status_t tether_resource_deallocate(tether_resource_t* resource, void* ptr,
                                                      size_t size, size_t alignment,
                                                      tether_stream_t stream) {
  registry::Entered e;
  if (registry::try_enter(value_of(resource), ObjectType::Resource, e)) {
    auto* obj = static_cast<ResourceObject*>(e.object);
    return guard_entered("tether_resource_deallocate", e, [&] { obj->core->deallocate(ptr, size, alignment, stream); });
  }
  return deallocate_general(resource, ptr, size, alignment, stream);
}

// The quick paths (tether_internal.h; buffer.cpp says why they never wait).
TETHER_API int tether_internal_allocate_quick(tether_resource_t* resource, size_t size, size_t alignment,
                                              tether_stream_t stream, void** out) {
  registry::Entered e;
  if (out == nullptr || !registry::try_enter(value_of(resource), ObjectType::Resource, e)) return TETHER_QUICK_REFUSED;
  void* p = static_cast<ResourceObject*>(e.object)->core->try_allocate_quick(size, alignment, stream);
  registry::leave(e);
  if (p == nullptr) return TETHER_QUICK_REFUSED;
  *out = p;
  return TETHER_QUICK_DONE;
}

TETHER_API int tether_internal_deallocate_quick(tether_resource_t* resource, void* ptr, size_t size,
                                                size_t alignment, tether_stream_t stream) {
  registry::Entered e;
  if (!registry::try_enter(value_of(resource), ObjectType::Resource, e)) return TETHER_QUICK_REFUSED;
  const bool done = static_cast<ResourceObject*>(e.object)->core->try_deallocate_quick(ptr, size, alignment, stream);
  registry::leave(e);
  return done ? TETHER_QUICK_DONE : TETHER_QUICK_REFUSED;
}

// Not the last reference: dropping it destroys nothing, so it never waits.
TETHER_API int tether_internal_resource_release_quick(tether_resource_t* resource) {
  if (resource == nullptr) return TETHER_QUICK_DONE;  // as tether_resource_release: a no-op
  return registry::drop_quick(value_of(resource), ObjectType::Resource, false) == registry::QuickDrop::Dropped
             ? TETHER_QUICK_DONE
             : TETHER_QUICK_REFUSED;
}

TETHER_API tether_status_t tether_resource_get_properties(tether_resource_t* resource,
                                                          tether_resource_properties_t* out) {
  return guard("tether_resource_get_properties", [&] {
    ResourceRef r(resource);
    write_info(out, to_c(r->core->properties()), "out");
  });
}

TETHER_API const char* tether_resource_get_name(tether_resource_t* resource) {
  auto* obj = resource ? static_cast<ResourceObject*>(registry::acquire(
                             reinterpret_cast<std::uintptr_t>(resource), ObjectType::Resource))
                       : nullptr;
  if (obj == nullptr) return "";
  const char* name = obj->core->name();  // static storage
  release_resource(resource);
  return name;
}

TETHER_API tether_status_t tether_resource_get_upstream(tether_resource_t* resource,
                                                        tether_resource_t** out) {
  return guard("tether_resource_get_upstream", [&] {
    require_out(out);
    ResourceRef r(resource);
    *out = r->upstream;
  });
}

TETHER_API tether_status_t tether_resource_is_equal(tether_resource_t* a, tether_resource_t* b, int* out) {
  return guard("tether_resource_is_equal", [&] {
    require_out(out);
    ResourceRef ra(a);
    ResourceRef rb(b);
    *out = (ra->core == rb->core || ra->core->is_equal(*rb->core)) ? 1 : 0;
  });
}

TETHER_API tether_status_t tether_resource_trim(tether_resource_t* resource) {
  return guard("tether_resource_trim", [&] {
    ResourceRef r(resource);
    // Memory freed after use on other streams (record_stream) and still
    // waiting for them is part of what a trim gives back: wait for it first.
    (void)core::finish_all_deferred_frees(true);
    r->core->trim();
  });
}

}  // extern "C"
