// Compile-only check: tether::resource satisfies CCCL's memory-resource
// concepts, and tether::resource_with<P...> satisfies the *_with concepts for
// exactly the properties it names. Built with the host compiler (no nvcc).
#include "tether/tether.hpp"

#if !TETHER_CCCL_INTEROP
#  error "this test needs <cuda/memory_resource> on the include path"
#endif

namespace mr = cuda::mr;
using dev = tether::device_resource;
using host = tether::host_accessible_resource;
using both = tether::resource_with<cuda::mr::device_accessible, cuda::mr::host_accessible>;

static_assert(std::is_same_v<tether::device_accessible, mr::device_accessible>, "tags are CCCL's");

#if CCCL_MAJOR_VERSION > 3 || (CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION >= 1)
// CCCL >= 3.1: synchronous_resource (allocate_sync) and resource (stream-ordered).
static_assert(mr::synchronous_resource<tether::resource>, "");
static_assert(mr::resource<tether::resource>, "");
static_assert(mr::resource_with<dev, mr::device_accessible>, "");
static_assert(!mr::resource_with<dev, mr::host_accessible>, "");
static_assert(mr::synchronous_resource_with<host, mr::host_accessible>, "");
static_assert(mr::resource_with<both, mr::device_accessible, mr::host_accessible>, "");
static_assert(!mr::resource_with<tether::resource, mr::device_accessible>, "no unchecked claims");
#else
// CCCL 3.0 (CUDA 13.0): resource (allocate(bytes, alignment)) and async_resource.
static_assert(mr::resource<tether::resource>, "");
static_assert(mr::async_resource<tether::resource>, "");
static_assert(mr::resource_with<dev, mr::device_accessible>, "");
static_assert(!mr::resource_with<dev, mr::host_accessible>, "");
static_assert(mr::async_resource_with<dev, mr::device_accessible>, "");
static_assert(mr::resource_with<host, mr::host_accessible>, "");
static_assert(mr::async_resource_with<both, mr::device_accessible, mr::host_accessible>, "");
static_assert(!mr::resource_with<tether::resource, mr::device_accessible>, "no unchecked claims");
#endif

// Type-erased references bind to the checked views (nothing is called here).
[[maybe_unused]] static void bind_refs(dev& d, both& b) {
#if CCCL_MAJOR_VERSION > 3 || (CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION >= 1)
  mr::resource_ref<mr::device_accessible> r1{d};
  mr::resource_ref<mr::device_accessible, mr::host_accessible> r2{b};
#else
  mr::async_resource_ref<mr::device_accessible> r1{d};
  mr::resource_ref<mr::device_accessible, mr::host_accessible> r2{b};
#endif
  (void)r1;
  (void)r2;
}

// Integers keep meaning tether_stream_t: allocate(100, 256, 0) must pick the
// (bytes, alignment, stream) overload, not the stream-first template.
static_assert(!tether::detail::is_stream_like_v<int>, "");
static_assert(tether::detail::is_stream_like_v<cuda::stream_ref>, "");
static_assert(tether::detail::is_stream_like_v<cudaStream_t>, "");
