// cuda::copy: one copy routine for every pair of host, pinned, managed and
// device pointers, relying on unified addressing (cuMemcpyAsync infers the
// direction from the pointers).
#include "tether_core/cuda.hpp"

#if TETHER_HAVE_CUDA_HEADERS

#include <cstring>

#include "cuda_driver.hpp"

namespace tether::core::cuda {
namespace {

using namespace detail;

// False for plain (pageable, unregistered) host memory: the driver answers
// CUDA_ERROR_INVALID_VALUE for pointers it did not allocate or register.
bool driver_knows(const Driver& d, const void* p) {
  unsigned int type = 0;
  return d.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, as_dptr(p)) == CUDA_SUCCESS;
}

}  // namespace

void copy(void* dst, const void* src, std::size_t n, int device, stream_t stream, bool synchronous) {
  if (n == 0) return;
  if (dst == nullptr || src == nullptr) throw_invalid_argument("copy: NULL pointer with a non-zero size");
  const Driver& d = driver();
  ScopedContext ctx(device);
  if (!driver_knows(d, dst) && !driver_knows(d, src)) {
    // Host to host: earlier work on the stream may still use either side.
    check(d.StreamSynchronize(as_stream(stream)), "cuStreamSynchronize", device);
    std::memmove(dst, src, n);
    return;
  }
  const CUresult r = d.MemcpyAsync(as_dptr(dst), as_dptr(src), n, as_stream(stream));
  if (r != CUDA_SUCCESS) throw_result(r, "cuMemcpyAsync", device, " copying " + std::to_string(n) + " bytes");
  if (synchronous) check(d.StreamSynchronize(as_stream(stream)), "cuStreamSynchronize", device);
}

}  // namespace tether::core::cuda

#endif  // TETHER_HAVE_CUDA_HEADERS
