// tether/tether.hpp - header-only C++17 wrapper over the tether C ABI.
//
// Everything here is inline and calls only the public C functions of
// tether/tether.h, so C++ users get RAII and exceptions without depending on a
// C++ ABI: the library they link is the same libtether.so that C and Python
// use, and they share its one current-resource table.
//
// Ownership maps onto C++ value semantics:
//   * copying a tether::resource or tether::buffer retains the handle,
//   * moving transfers the reference (the source becomes empty),
//   * the destructor releases it.
// Dependents keep their dependencies alive (a pool keeps its upstream, a buffer
// keeps its resource), so objects may be destroyed in any order.
//
// Errors: every failing C call becomes a tether::error (or a subclass chosen by
// the status code) carrying the status and the library's message. Functions
// marked noexcept never throw; destructors never throw.
//
// CCCL: tether::resource provides the member functions of the cuda::mr
// resource concepts (both the CCCL 3.0 names - allocate(bytes, alignment),
// allocate_async(bytes, alignment, stream) - and the CCCL >= 3.1 names -
// allocate_sync(bytes, alignment), allocate(stream, bytes, alignment)). Whether
// memory is device- or host-accessible is a run-time fact of a tether resource,
// so tether::resource itself claims no static property; the checked view
// tether::resource_with<Properties...> does (see the end of this file).
#ifndef TETHER_TETHER_HPP
#define TETHER_TETHER_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "tether/tether.h"

// CCCL interop is on when <cuda/memory_resource> (and the CUDA runtime header it
// needs) can be included. Define TETHER_CCCL_INTEROP to 0 to keep CCCL out, or to
// 1 to insist on it.
#ifndef TETHER_CCCL_INTEROP
#  if defined(__has_include)
#    if __has_include(<cuda/memory_resource>) && __has_include(<cuda_runtime_api.h>)
#      define TETHER_CCCL_INTEROP 1
#    endif
#  endif
#  ifndef TETHER_CCCL_INTEROP
#    define TETHER_CCCL_INTEROP 0
#  endif
#endif

#if TETHER_CCCL_INTEROP
// CCCL 3.0 (CUDA 13.0) hides the memory-resource API behind this macro; later
// versions ignore it.
#  ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#    define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#  endif
#  include <cuda/memory_resource>
#  include <cuda/stream_ref>
#endif

namespace tether {

// ===========================================================================
// Errors
// ===========================================================================

/// Base of every exception tether throws. `status()` is the C status code,
/// `what()` the library's message (tether_last_error_message() at the time of
/// the failure).
class error : public std::runtime_error {
 public:
  /// An error with status `status` and message `message`.
  error(tether_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  /// The C status code (never TETHER_OK).
  tether_status_t status() const noexcept { return status_; }
  /// The name of the status code ("TETHER_ERROR_OUT_OF_MEMORY").
  const char* status_name() const noexcept { return tether_status_name(status_); }

 private:
  tether_status_t status_;
};

// Each subclass is a distinct type for one status code. They derive from
// tether::error only (not also from std::bad_alloc, std::invalid_argument, ...):
// a second std::exception base would make `catch (const std::exception&)`
// ambiguous, and so silently not match.

/// TETHER_ERROR_OUT_OF_MEMORY: the resource (or its upstream) is exhausted.
class out_of_memory_error : public error { using error::error; };
/// TETHER_ERROR_INVALID_ARGUMENT: bad alignment, unknown device, foreign pointer, ...
class invalid_argument_error : public error { using error::error; };
/// TETHER_ERROR_INVALID_HANDLE: a released, stale, forged or wrong-type handle.
class invalid_handle_error : public error { using error::error; };
/// TETHER_ERROR_NOT_SUPPORTED: this build, resource or platform lacks the operation.
class not_supported_error : public error { using error::error; };
/// TETHER_ERROR_NO_DEVICE: no CUDA driver, no such device, or a driver too old.
class no_device_error : public error { using error::error; };
/// TETHER_ERROR_CUDA: a CUDA driver call failed (the message names it).
class cuda_error : public error { using error::error; };
/// TETHER_ERROR_LOCKED: the current-resource slot was locked by the application.
class locked_error : public error { using error::error; };
/// TETHER_ERROR_VERSION_MISMATCH: an options struct older than the library accepts.
class version_mismatch_error : public error { using error::error; };
/// TETHER_ERROR_SHUTTING_DOWN: refused because the process is exiting.
class shutting_down_error : public error { using error::error; };
/// TETHER_ERROR_INTERNAL (or an unknown code): a bug in tether.
class internal_error : public error { using error::error; };

/// Throw the exception type that matches `status`, with `message`.
/// Does nothing for TETHER_OK.
inline void throw_error(tether_status_t status, const std::string& message) {
  switch (status) {
    case TETHER_OK: return;
    case TETHER_ERROR_OUT_OF_MEMORY: throw out_of_memory_error(status, message);
    case TETHER_ERROR_INVALID_ARGUMENT: throw invalid_argument_error(status, message);
    case TETHER_ERROR_INVALID_HANDLE: throw invalid_handle_error(status, message);
    case TETHER_ERROR_NOT_SUPPORTED: throw not_supported_error(status, message);
    case TETHER_ERROR_NO_DEVICE: throw no_device_error(status, message);
    case TETHER_ERROR_CUDA: throw cuda_error(status, message);
    case TETHER_ERROR_LOCKED: throw locked_error(status, message);
    case TETHER_ERROR_VERSION_MISMATCH: throw version_mismatch_error(status, message);
    case TETHER_ERROR_SHUTTING_DOWN: throw shutting_down_error(status, message);
    case TETHER_ERROR_INTERNAL: break;
  }
  throw internal_error(status, message);
}

/// Throw the matching tether::error if `status` is not TETHER_OK, with the
/// calling thread's tether_last_error_message(). The one place C statuses
/// become exceptions.
inline void check(tether_status_t status) {
  if (status != TETHER_OK) throw_error(status, tether_last_error_message());
}

namespace detail {
// retain/release never set the thread's message, so failures of those calls
// get a message of their own instead of a stale one.
inline void check_refcount(tether_status_t status, const char* what) {
  if (status != TETHER_OK) throw_error(status, std::string(what) + ": the handle is stale, forged or NULL");
}

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
}  // namespace detail

// ===========================================================================
// Versions and constants
// ===========================================================================

/// The host slot of the current-resource table / "host memory" as a device id.
inline constexpr int device_host = TETHER_DEVICE_HOST;
/// "The calling thread's current CUDA device" as a device id.
inline constexpr int device_current = TETHER_DEVICE_CURRENT;
/// Alignment used when a call passes 0.
inline constexpr std::size_t default_alignment = TETHER_DEFAULT_ALIGNMENT;

/// TETHER_VERSION_NUMBER of the headers this code was compiled against.
inline constexpr std::uint32_t header_version_number = TETHER_VERSION_NUMBER;
/// TETHER_ABI_VERSION of the headers this code was compiled against.
inline constexpr std::uint32_t header_abi_version = TETHER_ABI_VERSION;

/// The loaded library's version (MAJOR * 10000 + MINOR * 100 + PATCH).
inline std::uint32_t version_number() noexcept { return tether_version_number(); }
/// The loaded library's ABI version.
inline std::uint32_t abi_version() noexcept { return tether_abi_version(); }
/// The loaded library's "MAJOR.MINOR.PATCH".
inline const char* version_string() noexcept { return tether_version_string(); }
/// Throw version_mismatch_error if the loaded library's ABI differs from the headers'.
inline void check_abi_version() {
  if (abi_version() != header_abi_version)
    throw version_mismatch_error(TETHER_ERROR_VERSION_MISMATCH,
                                 "libtether ABI version " + std::to_string(abi_version()) +
                                     " does not match the headers' " + std::to_string(header_abi_version));
}

// ===========================================================================
// Options
// ===========================================================================

/// Options of pool_resource(); 0 means "the library's default" for each field.
struct pool_options {
  /// Bytes taken from upstream when the pool is created.
  std::size_t initial_size = 0;
  /// The pool never holds more than this from upstream (0: no limit).
  std::size_t maximum_size = 0;
  /// Smallest chunk the pool asks upstream for when it grows (0: 1 MiB).
  std::size_t growth_size = 0;
};

/// Options of async_resource(); see tether_async_options_t.
struct async_options {
  /// Allocate from the device's default memory pool (the other fields are ignored).
  bool use_default_pool = false;
  /// Bytes the owned pool reserves at creation.
  std::size_t initial_pool_size = 0;
  /// Bytes the owned pool keeps when idle.
  std::size_t release_threshold = 0;
  /// Upper bound of the owned pool (0: no limit).
  std::size_t maximum_pool_size = 0;
  /// TETHER_IPC_HANDLE_NONE or TETHER_IPC_HANDLE_POSIX_FD.
  std::uint32_t ipc_handle_type = TETHER_IPC_HANDLE_NONE;
};

// ===========================================================================
// resource
// ===========================================================================

/// An owning reference to a tether memory resource (one +1 on the handle).
///
/// Copy = retain, move = transfer, destructor = release. An empty resource
/// (default-constructed or moved-from) holds no handle; using it throws
/// invalid_handle_error. Thread-safe like the C ABI: distinct resource objects
/// referring to one handle may be used from any threads.
class resource {
 public:
  /// An empty resource (holds no handle).
  resource() noexcept = default;

  /// Take ownership of one reference the caller holds (e.g. the +1 of a C
  /// *_create call). NULL gives an empty resource. Never fails.
  static resource adopt(tether_resource_t* handle) noexcept { return resource(handle); }

  /// Retain `handle` (the caller keeps its own reference), e.g. for a borrowed
  /// handle from a C API. Throws invalid_handle_error if it is stale or forged;
  /// NULL gives an empty resource.
  static resource borrow(tether_resource_t* handle) {
    if (handle != nullptr) detail::check_refcount(tether_resource_retain(handle), "tether::resource::borrow");
    return resource(handle);
  }

  /// Another reference to the same resource (retains). Throws
  /// invalid_handle_error if the handle went stale (only possible if someone
  /// released a reference they did not own).
  resource(const resource& other) : handle_(other.handle_) {
    if (handle_ != nullptr) detail::check_refcount(tether_resource_retain(handle_), "tether::resource copy");
  }
  /// Take other's reference; other becomes empty.
  resource(resource&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  /// Refer to what other refers to (retains it, releases the old one).
  resource& operator=(const resource& other) {
    if (this != &other) resource(other).swap(*this);
    return *this;
  }
  /// Take other's reference (releases the old one); other becomes empty.
  resource& operator=(resource&& other) noexcept {
    if (this != &other) resource(std::move(other)).swap(*this);
    return *this;
  }
  /// Release the reference (if any).
  ~resource() { reset(); }

  /// Exchange the handles of two resources.
  void swap(resource& other) noexcept { std::swap(handle_, other.handle_); }
  /// Release the reference and become empty.
  void reset() noexcept {
    if (handle_ != nullptr) (void)tether_resource_release(std::exchange(handle_, nullptr));
  }
  /// The raw handle, borrowed (valid while this object holds it).
  tether_resource_t* get() const noexcept { return handle_; }
  /// Hand this object's +1 to the caller (who must release it); becomes empty.
  tether_resource_t* release() noexcept { return std::exchange(handle_, nullptr); }
  /// True if a handle is held.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

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
  /// What a pool holds; not_supported_error for other resources.
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
  /// Swap two resources' handles.
  friend void swap(resource& a, resource& b) noexcept { a.swap(b); }

 private:
  explicit resource(tether_resource_t* h) noexcept : handle_(h) {}
  tether_resource_t* handle_ = nullptr;
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

/// A new coalescing pool over `upstream` (which the pool keeps alive).
/// Throws invalid_argument_error if initial_size > maximum_size,
/// out_of_memory_error if initial_size cannot be obtained.
inline resource pool_resource(const resource& upstream, const pool_options& options = {}) {
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.initial_size = options.initial_size;
  o.maximum_size = options.maximum_size;
  o.growth_size = options.growth_size;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_pool_resource_create(upstream.get(), &o, out); });
}

/// A new statistics adaptor forwarding to `upstream` (kept alive by the adaptor);
/// read its counters with resource::statistics().
inline resource statistics_adaptor(const resource& upstream) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_statistics_adaptor_create(upstream.get(), out); });
}

/// Device memory of `device` (cuMemAlloc). Throws no_device_error without a GPU.
inline resource cuda_resource(int device = 0) {
  return detail::make_resource([&](tether_resource_t** out) { return tether_cuda_resource_create(device, out); });
}

/// Stream-ordered device memory from a CUDA memory pool of `device`.
/// Throws no_device_error without a GPU.
inline resource async_resource(int device = 0, const async_options& options = {}) {
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  o.use_default_pool = options.use_default_pool ? 1 : 0;
  o.initial_pool_size = options.initial_pool_size;
  o.release_threshold = options.release_threshold;
  o.maximum_pool_size = options.maximum_pool_size;
  o.ipc_handle_type = options.ipc_handle_type;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_async_resource_create(device, &o, out); });
}

/// Managed (unified) memory (cuMemAllocManaged). Throws no_device_error without a GPU.
inline resource managed_resource(int device = 0) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_managed_resource_create(device, out); });
}

/// Page-locked, device-mapped host memory allocated in `device`'s primary context.
/// Throws no_device_error without a GPU.
inline resource pinned_host_resource(int device = 0) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_pinned_host_resource_create(device, out); });
}

// ===========================================================================
// buffer
// ===========================================================================

/// An owning reference to a tether buffer: memory that frees itself into the
/// resource it came from (which it keeps alive), on its stream.
/// Copy = retain (both objects refer to the same memory), move = transfer,
/// destructor = release. An empty buffer holds no handle.
class buffer {
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

  /// Take ownership of one reference the caller holds. NULL gives an empty buffer.
  static buffer adopt(tether_buffer_t* handle) noexcept {
    buffer b;
    b.handle_ = handle;
    return b;
  }
  /// Retain `handle` (the caller keeps its reference). Throws invalid_handle_error
  /// if it is stale or forged.
  static buffer borrow(tether_buffer_t* handle) {
    if (handle != nullptr) detail::check_refcount(tether_buffer_retain(handle), "tether::buffer::borrow");
    return adopt(handle);
  }

  /// Another reference to the same buffer (retains).
  buffer(const buffer& other) : handle_(other.handle_) {
    if (handle_ != nullptr) detail::check_refcount(tether_buffer_retain(handle_), "tether::buffer copy");
  }
  /// Take other's reference; other becomes empty.
  buffer(buffer&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  /// Refer to what other refers to.
  buffer& operator=(const buffer& other) {
    if (this != &other) buffer(other).swap(*this);
    return *this;
  }
  /// Take other's reference; other becomes empty.
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) buffer(std::move(other)).swap(*this);
    return *this;
  }
  /// Release the reference; the last one frees the memory into its resource.
  ~buffer() { reset(); }

  /// Exchange two buffers' handles.
  void swap(buffer& other) noexcept { std::swap(handle_, other.handle_); }
  /// Release the reference and become empty.
  void reset() noexcept {
    if (handle_ != nullptr) (void)tether_buffer_release(std::exchange(handle_, nullptr));
  }
  /// The raw handle, borrowed.
  tether_buffer_t* get() const noexcept { return handle_; }
  /// Hand this object's +1 to the caller; becomes empty.
  tether_buffer_t* release() noexcept { return std::exchange(handle_, nullptr); }
  /// True if a handle is held.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

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

  /// Swap two buffers' handles.
  friend void swap(buffer& a, buffer& b) noexcept { a.swap(b); }

 private:
  tether_buffer_t* handle_ = nullptr;
};

// ===========================================================================
// The current-resource table
// ===========================================================================

/// The resource current for `device` (a new reference that a later
/// set_current_resource() cannot free under the caller).
///
/// The default is device_current, the calling thread's current CUDA device, as
/// in RMM's get_current_device_resource() and the CUDA runtime; pass
/// device_host for the host slot. On a machine without a GPU the default
/// therefore throws no_device_error.
inline resource current_resource(int device = device_current) {
  tether_resource_t* h = nullptr;
  check(tether_current_resource_get(device, &h));
  return resource::adopt(h);
}

/// Install `res` as current for `device` (the table retains it) and return
/// the resource that was current (empty if the slot was unset). An empty `res`
/// restores the slot's default. Throws locked_error if the slot is locked,
/// invalid_argument_error if the memory is not usable as `device`'s.
inline resource set_current_resource(const resource& res, int device) {
  tether_resource_t* previous = nullptr;
  check(tether_current_resource_set(device, res.get(), &previous));
  return resource::adopt(previous);
}

/// Install `res` in the slot its memory belongs to: device_host for host
/// memory (properties().device == TETHER_DEVICE_HOST), else its device's slot.
inline resource set_current_resource(const resource& res) { return set_current_resource(res, res.device()); }

/// Restore the default resource of `device`'s slot; returns what was current.
inline resource reset_current_resource(int device) { return set_current_resource(resource(), device); }

/// Lock `device`'s slot for the rest of the process (later sets throw locked_error).
inline void lock_current_resource(int device) { check(tether_current_resource_lock(device)); }

/// True if `device`'s slot is locked.
inline bool is_current_resource_locked(int device) {
  int locked = 0;
  check(tether_current_resource_is_locked(device, &locked));
  return locked != 0;
}

/// Library-safe default: install `res` in `device`'s process slot only if no
/// one has explicitly set that slot and it is not locked; true if it did. The
/// slot's lazily created default does not count as set; reset_current_resource()
/// makes a slot unset again. Throws invalid_argument_error for an empty `res`
/// or memory not usable as `device`'s.
inline bool set_current_resource_if_unset(const resource& res, int device) {
  int installed = 0;
  check(tether_current_resource_set_if_unset(device, res.get(), &installed));
  return installed != 0;
}

/// set_current_resource_if_unset() in the slot `res`'s memory belongs to (see set_current_resource(res)).
inline bool set_current_resource_if_unset(const resource& res) {
  return set_current_resource_if_unset(res, res.device());
}

/// Push `res` on the calling thread's override stack for `device`: until
/// popped, current_resource(device) on this thread returns it, other threads
/// keep seeing the process slot. The stack holds its own reference. Throws
/// locked_error if the slot is locked, invalid_argument_error for an empty
/// `res` or memory not usable as `device`'s. Prefer scoped_resource.
inline void push_current_resource(const resource& res, int device) {
  check(tether_current_resource_push(device, res.get()));
}

/// push_current_resource() onto the slot `res`'s memory belongs to (see set_current_resource(res)).
inline void push_current_resource(const resource& res) { push_current_resource(res, res.device()); }

/// Pop the calling thread's top override for `device` (the stack's reference
/// is released). Throws invalid_argument_error if this thread pushed nothing
/// for that slot.
inline void pop_current_resource(int device) { check(tether_current_resource_pop(device)); }

/// "Use this resource for this scope, on this thread": pushes `res` on the
/// calling thread's override stack for a slot and pops it when the scope ends.
/// Other threads keep seeing the process slot; a set_current_resource() from
/// anywhere meanwhile changes the process slot, not this override. Guards on
/// one slot must nest on their thread (the last one made is destroyed first),
/// and a guard must be destroyed on the thread that made it, so it is not
/// copyable or movable.
class scoped_resource {
 public:
  /// Push `res` for `device` (device_current is resolved now, once); throws
  /// like push_current_resource() (locked_error on a locked slot).
  scoped_resource(const resource& res, int device)
      : device_(device == device_current ? cuda_current_device_() : device),
        previous_(current_resource(device_)) {
    push_current_resource(res, device_);
  }
  /// Push `res` onto the slot its memory belongs to (see set_current_resource(res)).
  explicit scoped_resource(const resource& res) : scoped_resource(res, res.device()) {}
  scoped_resource(const scoped_resource&) = delete;
  scoped_resource& operator=(const scoped_resource&) = delete;
  /// Pop the override. Never throws (destructors must not).
  ~scoped_resource() { (void)tether_current_resource_pop(device_); }
  /// The slot this guard manages (device_current already resolved).
  int device() const noexcept { return device_; }
  /// What current_resource(device()) returned on this thread just before the
  /// push (an outer guard's resource, or the process slot's, its default
  /// included); what the thread sees again after this guard is destroyed,
  /// unless the process slot was set meanwhile.
  const resource& previous() const noexcept { return previous_; }

 private:
  static int cuda_current_device_() {
    int d = 0;
    check(tether_cuda_get_current_device(&d));
    return d;
  }
  int device_;
  resource previous_;
};

// ===========================================================================
// CUDA and diagnostics
// ===========================================================================

/// Number of CUDA devices; throws no_device_error without a usable driver.
inline int cuda_device_count() {
  int n = 0;
  check(tether_cuda_get_device_count(&n));
  return n;
}
/// The CUDA driver's version (e.g. 13000); throws no_device_error without a driver.
inline int cuda_driver_version() {
  int v = 0;
  check(tether_cuda_get_driver_version(&v));
  return v;
}
/// The calling thread's current CUDA device.
inline int cuda_current_device() {
  int d = 0;
  check(tether_cuda_get_current_device(&d));
  return d;
}
/// Wait for all work on `stream` of `device`.
inline void cuda_stream_synchronize(int device, tether_stream_t stream) {
  check(tether_cuda_stream_synchronize(device, stream));
}

/// Live handles of `type` in the process (see tether/debug.h).
inline std::size_t live_objects(tether_object_type_t type = TETHER_OBJECT_ANY) noexcept {
  return tether_debug_live_objects(type);
}

// ===========================================================================
// CCCL properties: resource_with<Properties...>
// ===========================================================================

// With CCCL the tags are CCCL's own, so get_property() satisfies its concepts.
#if TETHER_CCCL_INTEROP
/// Property tag: kernels may access the memory (cuda::mr::device_accessible).
using device_accessible = ::cuda::mr::device_accessible;
/// Property tag: host code may access the memory (cuda::mr::host_accessible).
using host_accessible = ::cuda::mr::host_accessible;
#else
/// Property tag: kernels may access the memory.
struct device_accessible {};
/// Property tag: host code may access the memory.
struct host_accessible {};
#endif

namespace detail {
template <class P>
struct property_check {
  static_assert(sizeof(P) == 0, "tether::resource_with: unknown property");
};
template <>
struct property_check<device_accessible> {
  static bool holds(const tether_resource_properties_t& p) noexcept { return p.device_accessible != 0; }
  static const char* name() noexcept { return "device_accessible"; }
};
template <>
struct property_check<host_accessible> {
  static bool holds(const tether_resource_properties_t& p) noexcept { return p.host_accessible != 0; }
  static const char* name() noexcept { return "host_accessible"; }
};
template <class P, class... Ps>
inline constexpr bool contains_v = (std::is_same_v<P, Ps> || ...);
}  // namespace detail

/// A tether::resource checked, when constructed, to have every property in
/// `Properties` (device_accessible, host_accessible), and which advertises them
/// statically through get_property() - what cuda::mr::resource_ref<...> and the
/// cuda::mr::*_with concepts need. Everything else is tether::resource.
template <class... Properties>
class resource_with : public resource {
 public:
  /// Check and keep a reference to `res`; throws invalid_argument_error if its
  /// memory lacks one of the properties.
  explicit resource_with(resource res) : resource(std::move(res)) {
    const tether_resource_properties_t p = properties();
    (require<Properties>(p), ...);
  }
  /// Advertise each property in Properties (found by argument-dependent lookup).
  template <class P, std::enable_if_t<detail::contains_v<P, Properties...>, int> = 0>
  friend constexpr void get_property(const resource_with&, P) noexcept {}

 private:
  template <class P>
  void require(const tether_resource_properties_t& p) const {
    if (!detail::property_check<P>::holds(p))
      throw invalid_argument_error(TETHER_ERROR_INVALID_ARGUMENT,
                                   std::string("tether::resource_with: resource '") + name() +
                                       "' is not " + detail::property_check<P>::name());
  }
};

/// A resource checked to give device-accessible memory.
using device_resource = resource_with<device_accessible>;
/// A resource checked to give host-accessible memory.
using host_accessible_resource = resource_with<host_accessible>;

}  // namespace tether

// Per-module factories (each header includes this one, guarded).
#include "tether/cpp/callback.hpp"
#include "tether/cpp/logging.hpp"
#include "tether/cpp/failure_callback.hpp"

#endif  // TETHER_TETHER_HPP
