// tether/cpp/resource.hpp - tether::resource (an owning reference to a memory resource) and host_resource().
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_RESOURCE_HPP
#define TETHER_CPP_RESOURCE_HPP

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "tether/cpp/common.hpp"
#include "tether/cpp/error.hpp"
#include "tether/cpp/handle.hpp"
#include "tether/tether.h"

namespace tether {

namespace detail {
// Stream-like objects: a CUstream / cudaStream_t (a pointer) or anything with
// get() returning one (cuda::stream_ref, cuda::stream). Plain integers are
// excluded on purpose: they already mean "tether_stream_t" in the main overloads.
template <class S, class = void>
struct is_stream_like : std::is_pointer<S> {};
template <class S>
struct is_stream_like<S, std::void_t<decltype(std::declval<const S&>().get())>>
    : std::is_pointer<decltype(std::declval<const S&>().get())> {};
template <class S>
inline constexpr bool is_stream_like_v = is_stream_like<std::decay_t<S>>::value;

template <class S>
tether_stream_t to_stream(const S& s) noexcept {
  if constexpr (std::is_pointer_v<S>) {
    return reinterpret_cast<tether_stream_t>(s);
  } else {
    return reinterpret_cast<tether_stream_t>(s.get());
  }
}

struct resource_traits {
  using type = tether_resource_t;
  static tether_status_t retain(tether_resource_t* h) noexcept { return tether_resource_retain(h); }
  static tether_status_t release(tether_resource_t* h) noexcept { return tether_resource_release(h); }
  static constexpr const char* copy_what = "tether::resource copy";
  static constexpr const char* borrow_what = "tether::resource::borrow";
};
}  // namespace detail

/// An owning reference to a tether memory resource (one +1 on the handle).
///
/// Copy = retain, move = transfer, destructor = release. An empty resource
/// (default-constructed or moved-from) holds no handle; using it throws
/// invalid_handle_error. Thread-safe like the C ABI: distinct resource objects
/// referring to one handle may be used from any threads.
class resource : public detail::handle<resource, detail::resource_traits> {
 public:
  /// An empty resource (holds no handle).
  resource() noexcept = default;

  // adopt(), borrow(), swap(), reset(), get(), release() and operator bool,
  // and what the defaulted members below do, come from the one handle
  // wrapper, detail::handle (tether/cpp/handle.hpp).

  /// Another reference to the same resource (retains); throws
  /// invalid_handle_error if the handle went stale.
  resource(const resource& other) = default;
  /// Take other's reference; other becomes empty.
  resource(resource&& other) noexcept = default;
  /// Refer to what other refers to (retains it, releases the old one).
  resource& operator=(const resource& other) = default;
  /// Take other's reference (releases the old one); other becomes empty.
  resource& operator=(resource&& other) noexcept = default;
  /// Release the reference (if any).
  ~resource() = default;

  // ---- allocation (tether's own spelling; CCCL 3.0 resource concept) ------

  /// Allocate `bytes` aligned to `alignment` (a power of two, 0 = 256), ordered
  /// on `stream`. Returns nullptr for 0 bytes. The caller owns the memory until
  /// deallocate() with the same size and alignment on this resource.
  /// Throws out_of_memory_error, invalid_argument_error, invalid_handle_error.
  void* allocate(std::size_t bytes, std::size_t alignment = 0, tether_stream_t stream = 0) const {
    void* p = nullptr;
    check(tether_resource_allocate(handle_, bytes, alignment, stream, &p));
    return p;
  }
  /// Give back memory from allocate() (same bytes and alignment); it may be
  /// reused by work ordered after `stream`. Throws invalid_argument_error if the
  /// resource can tell the memory is not its own (the memory is left untouched).
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = 0, tether_stream_t stream = 0) const {
    check(tether_resource_deallocate(handle_, ptr, bytes, alignment, stream));
  }

  // ---- CCCL >= 3.1 spelling: synchronous and stream-ordered ---------------

  /// allocate(bytes, alignment) on the default stream (cuda::mr::synchronous_resource).
  void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment) const {
    return allocate(bytes, alignment, 0);
  }
  /// deallocate(ptr, bytes, alignment) on the default stream.
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) const {
    deallocate(ptr, bytes, alignment, 0);
  }
  /// Stream-ordered allocate (cuda::mr::resource in CCCL >= 3.1). `stream` is a
  /// CUstream/cudaStream_t or an object with get() returning one (cuda::stream_ref).
  template <class Stream, std::enable_if_t<detail::is_stream_like_v<Stream>, int> = 0>
  void* allocate(const Stream& stream, std::size_t bytes, std::size_t alignment = default_alignment) const {
    return allocate(bytes, alignment, detail::to_stream(stream));
  }
  /// Stream-ordered deallocate matching allocate(stream, bytes, alignment).
  template <class Stream, std::enable_if_t<detail::is_stream_like_v<Stream>, int> = 0>
  void deallocate(const Stream& stream, void* ptr, std::size_t bytes,
                  std::size_t alignment = default_alignment) const {
    deallocate(ptr, bytes, alignment, detail::to_stream(stream));
  }

  // ---- CCCL 3.0 spelling of the stream-ordered calls ----------------------

  /// allocate(bytes, alignment, stream) for cuda::mr::async_resource (CCCL 3.0).
  template <class Stream, std::enable_if_t<detail::is_stream_like_v<Stream>, int> = 0>
  void* allocate_async(std::size_t bytes, std::size_t alignment, const Stream& stream) const {
    return allocate(bytes, alignment, detail::to_stream(stream));
  }
  /// deallocate(ptr, bytes, alignment, stream) for cuda::mr::async_resource (CCCL 3.0).
  template <class Stream, std::enable_if_t<detail::is_stream_like_v<Stream>, int> = 0>
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, const Stream& stream) const {
    deallocate(ptr, bytes, alignment, detail::to_stream(stream));
  }

  // ---- queries --------------------------------------------------------------

  /// Kind, device and accessibility of the memory.
  tether_resource_properties_t properties() const {
    tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
    check(tether_resource_get_properties(handle_, &p));
    return p;
  }
  /// The resource's kind (a tether_resource_kind_t value).
  tether_resource_kind_t kind() const { return static_cast<tether_resource_kind_t>(properties().kind); }
  /// The device whose memory this is, or device_host.
  int device() const { return properties().device; }
  /// True if kernels may access the memory.
  bool is_device_accessible() const { return properties().device_accessible != 0; }
  /// True if host code may access the memory.
  bool is_host_accessible() const { return properties().host_accessible != 0; }
  /// A short name ("host", "pool", ...); "" for an empty or stale resource.
  const char* name() const noexcept { return handle_ != nullptr ? tether_resource_get_name(handle_) : ""; }
  /// The upstream of a pool or adaptor (a new reference), or an empty resource
  /// for resources without one.
  resource upstream() const {
    tether_resource_t* up = nullptr;
    check(tether_resource_get_upstream(handle_, &up));
    return borrow(up);
  }
  /// Give memory held but unused back upstream (no-op for resources holding nothing).
  void trim() const { check(tether_resource_trim(handle_)); }
  /// Counters of a statistics adaptor; not_supported_error for other resources.
  tether_statistics_t statistics() const {
    tether_statistics_t s = TETHER_STATISTICS_INIT;
    check(tether_resource_get_statistics(handle_, &s));
    return s;
  }
  /// Reset a statistics adaptor's peaks to the current values.
  void reset_peak_statistics() const { check(tether_resource_reset_peak_statistics(handle_)); }
  /// What a pool holds (pool_size, free_bytes, largest_free_block, chunk_count,
  /// free_blocks); not_supported_error for other resources.
  tether_pool_info_t pool_info() const {
    tether_pool_info_t info = TETHER_POOL_INFO_INIT;
    check(tether_resource_get_pool_info(handle_, &info));
    return info;
  }
  /// True if this resource and `other` are the same resource or two of one
  /// kind over one memory source (comparison only: memory is freed into the
  /// resource that allocated it). Throws for stale handles; two empty
  /// resources are equal, empty and non-empty are not.
  bool is_equal(const resource& other) const {
    if (handle_ == nullptr || other.handle_ == nullptr) return handle_ == other.handle_;
    if (handle_ == other.handle_) return true;
    int eq = 0;
    check(tether_resource_is_equal(handle_, other.handle_, &eq));
    return eq != 0;
  }
  /// is_equal(), but false instead of throwing when a handle is stale.
  friend bool operator==(const resource& a, const resource& b) noexcept {
    if (a.handle_ == b.handle_) return true;
    if (a.handle_ == nullptr || b.handle_ == nullptr) return false;
    int eq = 0;
    return tether_resource_is_equal(a.handle_, b.handle_, &eq) == TETHER_OK && eq != 0;
  }
  /// !(a == b).
  friend bool operator!=(const resource& a, const resource& b) noexcept { return !(a == b); }

  /// A spec naming this resource's whole stack (tether_resource_get_spec):
  /// resource_from_spec(r.spec()) builds an equivalent stack.
  std::string spec() const {
    std::size_t n = 0;
    check(tether_resource_get_spec(handle_, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    check(tether_resource_get_spec(handle_, &s[0], s.size(), &n));
    s.resize(n);
    return s;
  }
};


// ---- factories --------------------------------------------------------------

namespace detail {
template <class F>
resource make_resource(F&& create) {
  tether_resource_t* h = nullptr;
  check(create(&h));
  return resource::adopt(h);
}
}  // namespace detail

/// A new resource of aligned host allocations from the C heap.
inline resource host_resource() {
  return detail::make_resource([](tether_resource_t** out) { return tether_host_resource_create(out); });
}

}  // namespace tether

#endif  // TETHER_CPP_RESOURCE_HPP
