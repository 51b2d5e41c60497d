// tether/thrust.hpp - Thrust and CUB take their memory from tether.
//
// tether::thrust_allocator<T> is a Thrust allocator over a tether resource,
// ordered on one stream. It serves the two places where Thrust allocates:
//
//   * containers:  thrust::device_vector<int, tether::thrust_allocator<int>> v(n, alloc);
//   * temporaries: thrust::sort(thrust::cuda::par_nosync(alloc).on(alloc.stream()), ...)
//     (Thrust rebinds the allocator to its temporary type, then allocates and
//     frees through it; pass the same stream to .on() that the allocator orders
//     its memory on).
//
// CUB's two-phase calls need no allocator: ask for the temporary size, take a
// tether::buffer of that size on the stream, pass buffer.data() (see the
// example examples/cpp_thrust/thrust_sort.cu and docs/cpp_libraries.rst).
//
// Ownership: the allocator holds a reference to its resource (copy = retain),
// so the resource lives as long as any allocator or container that uses it,
// and every allocation is freed into the resource it came from - never into
// "whatever is current now". A default-constructed allocator takes the current
// resource of the current device at construction (as RMM's thrust_allocator
// takes the current device resource).
//
// This header needs Thrust (CCCL: the CUDA toolkit's include/cccl, or CCCL
// itself) and is not included by tether/tether.hpp, so the rest of the C++
// wrapper builds without CUDA. It compiles with nvcc and with a host compiler
// (allocator and container types; Thrust's algorithms need nvcc).
#ifndef TETHER_THRUST_HPP
#define TETHER_THRUST_HPP

#if !__has_include(<thrust/device_malloc_allocator.h>)
#  error "tether/thrust.hpp needs Thrust (CCCL) on the include path: the CUDA toolkit's include/cccl, or CCCL"
#endif

#include <thrust/device_malloc_allocator.h>
#include <thrust/device_ptr.h>

#include <cstddef>
#include <cstdio>
#include <utility>

#include "tether/tether.hpp"

struct CUstream_st;  // what cudaStream_t and CUstream point to (the CUDA headers' own name)

namespace tether {

/// A Thrust allocator of T over a tether resource, ordered on one stream.
///
/// allocate(n) takes n * sizeof(T) bytes (default alignment, 256) from the
/// resource on stream(); deallocate(p, n) gives them back on the same stream.
/// Copies and rebinds (thrust_allocator<U>(a)) share the resource and the
/// stream; two allocators compare equal when both are the same, so memory from
/// one may be freed through the other.
template <class T>
class thrust_allocator : public thrust::device_malloc_allocator<T> {
  using base = thrust::device_malloc_allocator<T>;

 public:
  using value_type = T;
  using pointer = thrust::device_ptr<T>;
  using const_pointer = thrust::device_ptr<const T>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;

  template <class U>
  struct rebind {
    using other = thrust_allocator<U>;
  };

  /// The current resource of the current device (a reference, taken now) on
  /// the default stream. Throws tether::error if that slot has no resource and
  /// none can be made (no device: no_device_error).
  thrust_allocator() : thrust_allocator(current_resource(), tether_stream_t{}) {}

  /// `res` on `stream` (0: the default stream). Throws invalid_handle_error if
  /// `res` is empty.
  explicit thrust_allocator(resource res, tether_stream_t stream = 0) : res_(std::move(res)), stream_(stream) {
    if (!res_) throw invalid_handle_error(TETHER_ERROR_INVALID_HANDLE, "tether::thrust_allocator: empty resource");
  }

  /// `res` on a stream object: a cudaStream_t/CUstream or anything whose get()
  /// returns one (cuda::stream_ref).
  template <class Stream, std::enable_if_t<detail::is_stream_like_v<Stream>, int> = 0>
  thrust_allocator(resource res, const Stream& stream) : thrust_allocator(std::move(res), detail::to_stream(stream)) {}

  /// The same resource and stream, for another element type (Thrust rebinds
  /// to its temporary type).
  template <class U>
  thrust_allocator(const thrust_allocator<U>& other) : base(), res_(other.get_resource()), stream_(other.stream()) {}

  thrust_allocator(const thrust_allocator&) = default;
  thrust_allocator(thrust_allocator&&) noexcept = default;
  thrust_allocator& operator=(const thrust_allocator&) = default;
  thrust_allocator& operator=(thrust_allocator&&) noexcept = default;
  ~thrust_allocator() = default;

  /// n elements of T, ordered on stream(). Throws out_of_memory_error (Thrust
  /// passes it on to the caller of the container or algorithm).
  pointer allocate(size_type n) {
    return pointer(static_cast<T*>(res_.allocate(n * sizeof(T), 0, stream_)));
  }

  /// Gives back memory from allocate(n) (the same n), ordered on stream().
  /// Never throws (containers free in destructors): a pointer this resource did
  /// not hand out is a bug in the caller, reported on stderr with the
  /// library's message, and the memory is left alone.
  void deallocate(pointer p, size_type n) noexcept {
    const tether_status_t s =
        tether_resource_deallocate(res_.get(), static_cast<void*>(p.get()), n * sizeof(T), 0, stream_);
    if (s != TETHER_OK)
      std::fprintf(stderr, "tether::thrust_allocator::deallocate: %s\n", tether_last_error_message());
  }

  /// The resource this allocator takes memory from (another reference).
  const resource& get_resource() const noexcept { return res_; }
  /// The stream its memory is ordered on; give it to .on() of Thrust's policy.
  tether_stream_t stream() const noexcept { return stream_; }
  /// stream() as a cudaStream_t-compatible pointer (CUstream_st*), for
  /// thrust::cuda::par_nosync(alloc).on(alloc.cuda_stream()).
  ::CUstream_st* cuda_stream() const noexcept { return reinterpret_cast<::CUstream_st*>(stream_); }

  friend bool operator==(const thrust_allocator& a, const thrust_allocator& b) noexcept {
    return a.res_.get() == b.res_.get() && a.stream_ == b.stream_;
  }
  friend bool operator!=(const thrust_allocator& a, const thrust_allocator& b) noexcept { return !(a == b); }

 private:
  resource res_;
  tether_stream_t stream_ = 0;
};

}  // namespace tether

#endif  // TETHER_THRUST_HPP
