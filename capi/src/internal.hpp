// Internal glue shared by the capi/src/*.cpp files: checked handles and the
// exception -> status boundary. Nothing here is exported.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "tether/tether.h"
#include "tether_core/error.hpp"
#include "tether_core/resource.hpp"

#include "kind_defaults.hpp"  // k<Kind>Defaults: each options struct's _INIT (generated)

namespace tether::capi {

// ---- errors ---------------------------------------------------------------

// Record the calling thread's last error and return `status`. Never
// allocates: the message is copied into a fixed per-thread buffer (truncated
// past kMaxErrorMessage bytes), so it works when the heap is exhausted.
tether_status_t set_error(tether_status_t status, const std::string& message) noexcept;
// The same for "<function>: <what>", built without allocating.
tether_status_t set_error(tether_status_t status, const char* function, const char* what) noexcept;
constexpr std::size_t kMaxErrorMessage = 1023;

// Fork safety (fork.cpp). Every entry point that can take a lock or wait
// runs inside a ForkGate: fork() (in its prepare handler) waits until no
// other thread is inside one, so the child never inherits a lock held by a
// thread that does not exist there. Nests; costs one store and one load.
void fork_gate_enter() noexcept;
void fork_gate_leave() noexcept;
struct ForkGate {
  ForkGate() noexcept { fork_gate_enter(); }
  ~ForkGate() { fork_gate_leave(); }
  ForkGate(const ForkGate&) = delete;
  ForkGate& operator=(const ForkGate&) = delete;
};

// Run f(); translate any exception into a status and the thread's message,
// prefixed with the name of the API function. Nothing escapes, and building
// the message allocates nothing (a std::bad_alloc is reported as
// OUT_OF_MEMORY even when no byte is left).
template <class F>
tether_status_t guard(const char* function, F&& f) noexcept {
  ForkGate gate;
  try {
    f();
    return TETHER_OK;
  } catch (const core::Error& e) {
    return set_error(e.status(), function, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(TETHER_ERROR_OUT_OF_MEMORY, function, "out of host memory");
  } catch (const std::exception& e) {
    return set_error(TETHER_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return set_error(TETHER_ERROR_INTERNAL, function, "unknown exception");
  }
}

// Throw INVALID_ARGUMENT naming `what` if p is NULL.
template <class T>
void require_out(T* p, const char* what = "out") {
  if (p == nullptr) core::throw_invalid_argument(std::string(what) + " must not be NULL");
}

// The text out-parameter rule (tracking.h, cuda.h): copy what fits, always NUL-terminate,
// report the full size (NUL included) in *out_needed.
inline void write_text(const std::string& text, char* buffer, std::size_t capacity, std::size_t* out_needed) {
  require_out(out_needed, "out_needed");
  if (buffer == nullptr && capacity > 0) core::throw_invalid_argument("buffer must not be NULL when capacity > 0");
  *out_needed = text.size() + 1;
  if (capacity == 0) return;
  const std::size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}


// ---- versioned structs -----------------------------------------------------

// Option / info structs begin with uint32_t struct_size and only ever grow (fields
// are appended). first_published_size<T> is the size of T's first published
// layout: sizeof(T) unless fields were appended since, in which case the struct
// specialises it. A struct_size below it is from no published header.
template <class T>
struct first_published_size {
  static constexpr std::size_t value = sizeof(T);
};
// tether_pool_info_t gained free_blocks after its first release.
template <>
struct first_published_size<tether_pool_info_t> {
  static constexpr std::size_t value = TETHER_POOL_INFO_FIRST_SIZE;
};
static_assert(TETHER_POOL_INFO_FIRST_SIZE == offsetof(tether_pool_info_t, free_blocks),
              "TETHER_POOL_INFO_FIRST_SIZE is the layout before free_blocks");

template <class T>
void check_struct_size(std::uint32_t struct_size, const char* what) {
  constexpr std::size_t first = first_published_size<T>::value;
  if (struct_size < first)
    throw core::Error(TETHER_ERROR_VERSION_MISMATCH,
                      std::string(what) + ".struct_size is " + std::to_string(struct_size) +
                          ", smaller than any published layout (" + std::to_string(first) +
                          "); initialise it with the _INIT macro or _options_init()");
}

// Read a caller's options struct (NULL: the defaults) of any published size.
template <class T>
T read_options(const T* in, const T& defaults, const char* what) {
  T v = defaults;
  if (in != nullptr) {
    check_struct_size<T>(in->struct_size, what);
    // Fields appended by newer headers are ignored; those an older caller lacks keep the defaults.
    std::memcpy(static_cast<void*>(&v), in, in->struct_size < sizeof(T) ? in->struct_size : sizeof(T));
  }
  v.struct_size = sizeof(T);
  return v;
}

// Fill a caller's info struct of any published size, keeping its struct_size:
// the rule of every info writer is that out->struct_size must be at least the
// first published size (else VERSION_MISMATCH naming struct_size), and that the
// fields past the caller's struct_size are not written (an older caller's struct
// is smaller than ours; a newer caller's extra fields are left as they are).
template <class T>
void write_info(T* out, const T& value, const char* what) {
  require_out(out, what);
  check_struct_size<T>(out->struct_size, what);
  const std::uint32_t keep = out->struct_size;
  const std::size_t n = keep < sizeof(T) ? keep : sizeof(T);
  std::memcpy(static_cast<void*>(out), &value, n);
  out->struct_size = keep;
}

// Implements tether_*_options_init: zero the caller's struct, set the defaults we know.
template <class T>
void init_options(T* out, std::size_t struct_size, const T& defaults, const char* what) {
  require_out(out, what);
  if (struct_size < sizeof(T)) check_struct_size<T>(static_cast<std::uint32_t>(struct_size), what);
  std::memset(static_cast<void*>(out), 0, struct_size);
  std::memcpy(static_cast<void*>(out), &defaults, sizeof(T));
  out->struct_size = static_cast<std::uint32_t>(struct_size);
}

// ---- handles ---------------------------------------------------------------

enum class ObjectType : std::uint32_t { Resource = 1, Buffer = 2 };

// Base of everything a handle can refer to.
struct Object {
  virtual ~Object() = default;
};

// What a resource handle refers to.
struct ResourceObject : Object {
  core::ResourcePtr core;
  // The upstream's handle (retained by this object) so get_upstream keeps
  // handle identity; nullptr for leaf resources.
  tether_resource_t* upstream = nullptr;
  // The arguments that name this resource in a spec besides its upstream
  // ("device=0, initial_size=64MiB"): what tether_resource_get_spec() writes.
  // spec_refusal, if not empty, says why no spec can name this resource (a
  // callback, a bin given as a resource); spec_bins are the bins added to a
  // binning resource after creation (bins='...'). add_bin changes the last two
  // while others read them: all three under spec_mutex.
  std::string spec_args;
  std::string spec_refusal;
  std::vector<std::size_t> spec_bins;
  std::mutex spec_mutex;
  // If the last handle goes while callers still hold raw allocations of the
  // core resource (Resource::caller_outstanding_count(): a dependent's chunks
  // do not count), the core resource is kept as an orphan (see tether/debug.h)
  // instead of being destroyed - whoever else still holds the core object.
  ~ResourceObject() override;
};

// ---- the generic registry (handles.cpp) ------------------------------------

struct ThreadState;  // thread_blocks.hpp

namespace registry {
// Register obj (taken) as a new handle with refcount 1; returns the handle value.
std::uintptr_t create(ObjectType type, Object* obj);
// The same without throwing: 0 (obj not taken: still the caller's) when the
// registry is full (*full set) or out of memory.
std::uintptr_t try_create(ObjectType type, Object* obj, bool* full) noexcept;
// +1 if the handle is live and of `type`; returns the object or nullptr.
Object* acquire(std::uintptr_t handle, ObjectType type) noexcept;
// -1; destroys the object when it was the last. false if the handle is not live.
bool release(std::uintptr_t handle, ObjectType type) noexcept;
// A reference for the duration of one call (handles.cpp, "Borrows"): no
// write to the handle's shared reference count. Returns the object, or
// nullptr (as acquire()). Every successful borrow is ended by end_borrow(),
// on the same thread.
struct Borrow {
  std::uintptr_t handle = 0;  // 0: nothing borrowed
  ObjectType type = ObjectType::Resource;
  void* hazard = nullptr;     // the hazard word, or nullptr: a counted reference
};
Object* borrow(std::uintptr_t handle, ObjectType type, Borrow& out) noexcept;
void end_borrow(const Borrow& borrowed) noexcept;
// The quick paths (tether_internal.h), which never wait for another thread.
// drop_quick(): drop one reference of a live handle of `type` unless it is the
// last (Dropped), or - with may_be_last - also the last one (Last: the handle
// is dead from now on, as after release(), but its object is not destroyed:
// the caller then either disposes of it with dispose_dead(), once
// borrowed_elsewhere() says no other thread borrows it, or has
// destroy_dead() wait for the borrowers and destroy it). Refused: the handle
// is not live or not of `type` (nothing changed).
enum class QuickDrop { Refused, Dropped, Last };
QuickDrop drop_quick(std::uintptr_t handle, ObjectType type, bool may_be_last) noexcept;
bool borrowed_elsewhere(std::uintptr_t handle, ObjectType type) noexcept;
void dispose_dead(std::uintptr_t handle) noexcept;
bool destroy_dead(std::uintptr_t handle) noexcept;  // false: not such a handle, nothing done
// try_enter() and leave(), the hot path of one-handle entry points: entered.hpp.
// Live handles of a type (0 = any).
std::size_t live(std::uint32_t type) noexcept;
// Internal test hooks (tests/capi/test_registry.cpp builds handles.cpp into
// the test; nothing here is exported from libtether).
namespace testing {
// Give the free slot `index` the generation `generation` (its next handle's);
// false if the slot does not exist or is live.
bool set_generation(std::uint32_t index, std::uint32_t generation) noexcept;
// How many slots were retired at their last generation.
std::uint64_t retired_slots() noexcept;
}  // namespace testing
}  // namespace registry

// A new resource handle owning `core`; `upstream` (may be NULL) is retained by
// the new object. Returns +1. Throws on failure (nothing is leaked).
tether_resource_t* make_resource_handle(core::ResourcePtr core, tether_resource_t* upstream,
                                        std::string spec_args = {}, std::string spec_refusal = {});

namespace spec {
std::string format_options(const char* type_name, const void* options, std::string* refusal);  // spec.hpp
}

// The shared body of tether_<type>_create(upstream, options, out) for types
// built over an upstream: check out and clear it, borrow the upstream
// (INVALID_HANDLE unless live), read the options (NULL: `defaults`; a
// struct_size below any published layout: VERSION_MISMATCH), build the core
// resource with make(upstream's core, options), and write to *out a new
// handle that owns it and retains upstream, named in specs by
// spec::format_options(spec_name, &options). All inside guard(function, ...).
template <class Options, class Make>
tether_status_t create_over_upstream(const char* function, tether_resource_t* upstream, const Options* options,
                                     const Options& defaults, const char* spec_name, tether_resource_t** out,
                                     Make&& make) noexcept;
// The same for a type without options (its spec names only the upstream).
template <class Make>
tether_status_t create_over_upstream(const char* function, tether_resource_t* upstream, tether_resource_t** out,
                                     Make&& make) noexcept;

// A temporary reference to a live object, for the duration of one call and
// on one thread (a registry borrow): acquiring fails (throws
// Error(INVALID_HANDLE)) for NULL, stale, forged or wrong-type handles; while
// held, the object cannot be destroyed by a concurrent release.
class ResourceRef {
 public:
  explicit ResourceRef(tether_resource_t* h);  // throws INVALID_HANDLE
  ~ResourceRef();
  ResourceRef(const ResourceRef&) = delete;
  ResourceRef& operator=(const ResourceRef&) = delete;
  ResourceObject* operator->() const noexcept { return obj_; }
  ResourceObject& operator*() const noexcept { return *obj_; }
  tether_resource_t* handle() const noexcept { return handle_; }

 private:
  tether_resource_t* handle_;
  ResourceObject* obj_;
  registry::Borrow borrow_;
};

template <class Options, class Make>
tether_status_t create_over_upstream(const char* function, tether_resource_t* upstream, const Options* options,
                                     const Options& defaults, const char* spec_name, tether_resource_t** out,
                                     Make&& make) noexcept {
  return guard(function, [&] {
    require_out(out);
    *out = nullptr;
    ResourceRef up(upstream);
    const Options o = read_options(options, defaults, "options");
    core::ResourcePtr made = make(up->core, o);
    std::string refusal;
    std::string args = spec::format_options(spec_name, &o, &refusal);
    *out = make_resource_handle(std::move(made), upstream, std::move(args), std::move(refusal));
  });
}

template <class Make>
tether_status_t create_over_upstream(const char* function, tether_resource_t* upstream, tether_resource_t** out,
                                     Make&& make) noexcept {
  return guard(function, [&] {
    require_out(out);
    *out = nullptr;
    ResourceRef up(upstream);
    *out = make_resource_handle(make(up->core), upstream);
  });
}

// +1 / -1 on a resource handle without touching the error state.
tether_status_t retain_resource(tether_resource_t* h) noexcept;
tether_status_t release_resource(tether_resource_t* h) noexcept;

// An owning (+1) reference to a resource handle: copy = retain, destroy = release.
// What the current-resource table stores.
class HandleRef {
 public:
  HandleRef() noexcept = default;
  static HandleRef adopt(tether_resource_t* h) noexcept { HandleRef r; r.h_ = h; return r; }
  // A copy of a reference whose handle is no longer live (someone released
  // it once too often) is empty: it never hands out a dead handle as owned.
  HandleRef(const HandleRef& o) noexcept : h_(o.h_) {
    if (h_ && retain_resource(h_) != TETHER_OK) h_ = nullptr;
  }
  HandleRef(HandleRef&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  HandleRef& operator=(HandleRef o) noexcept { std::swap(h_, o.h_); return *this; }
  ~HandleRef() { if (h_) release_resource(h_); }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  tether_resource_t* get() const noexcept { return h_; }
  // Hand the +1 to the caller.
  tether_resource_t* release() noexcept { tether_resource_t* h = h_; h_ = nullptr; return h; }
  friend void swap(HandleRef& a, HandleRef& b) noexcept { std::swap(a.h_, b.h_); }

 private:
  tether_resource_t* h_ = nullptr;
};

// A counted (+1) reference to a borrowed resource. Throws Error(INVALID_HANDLE)
// if its last reference was released meanwhile (a borrow keeps the object
// alive for the call, not the handle).
HandleRef retained(const ResourceRef& r);


// Resolve TETHER_DEVICE_CURRENT and validate ids: returns -1 (host) or a device id.
int resolve_device(int device);

// Throw INVALID_ARGUMENT unless memory with properties `p` is usable as `slot`'s
// (-1: host memory; else that device's): what the table and the hooks require.
void check_usable(const core::Properties& p, int slot);

// +1 on the current resource of `device` (current.cpp).
HandleRef current_resource(int device);

// A new buffer of `size` bytes from `resource` on `stream` (buffer.cpp): +1. Throws.
tether_buffer_t* make_buffer(tether_resource_t* resource, std::size_t size, core::stream_t stream);

// Export a buffer (buffer.cpp, for ipc.cpp): f(resource, ptr, size, stream, keep) runs under
// the buffer's lock (stream: the buffer's); if it returns, the buffer counts as exported
// (resize is refused from then on) and holds `keep`, if set, for as long as it lives. Throws
// INVALID_HANDLE, or what f throws.
using ExportFunction =
    std::function<void(const core::Resource&, void*, std::size_t, core::stream_t, std::shared_ptr<void>&)>;
void export_buffer(tether_buffer_t* buffer, const ExportFunction& f);

}  // namespace tether::capi
