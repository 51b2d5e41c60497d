// PrefetchAdaptor and the one driver call it needs.
#include "tether_core/prefetch.hpp"

#include <string>

#include "forwarding_adaptor.hpp"

#if TETHER_HAVE_CUDA_HEADERS
#include "cuda_driver.hpp"
#endif

namespace tether::core {

namespace cuda {

#if TETHER_HAVE_CUDA_HEADERS
void prefetch(const void* ptr, std::size_t bytes, int device, stream_t stream) {
  const detail::Driver& d = detail::driver();
  if (d.MemPrefetchAsync == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "prefetch: this CUDA driver does not provide cuMemPrefetchAsync");
  detail::ScopedContext ctx(device);
  const CUresult r = d.MemPrefetchAsync(detail::as_dptr(ptr), bytes, detail::device_handle(device),
                                        detail::as_stream(stream));
  if (r != CUDA_SUCCESS)
    detail::throw_result(r, "cuMemPrefetchAsync", device, " prefetching " + std::to_string(bytes) + " bytes");
}

bool can_prefetch(int device) {
  const detail::Driver& d = detail::driver();
  if (d.MemPrefetchAsync == nullptr) return false;
  int value = 0;
  detail::check(d.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                                     detail::device_handle(device)),
                "cuDeviceGetAttribute", device);
  return value != 0;
}
#else
void prefetch(const void*, std::size_t, int, stream_t) {
  throw Error(TETHER_ERROR_NO_DEVICE, "tether was built without CUDA headers");
}
bool can_prefetch(int) { throw Error(TETHER_ERROR_NO_DEVICE, "tether was built without CUDA headers"); }
#endif

}  // namespace cuda

namespace {

bool is_managed(const Properties& p) noexcept { return p.device >= 0 && p.device_accessible && p.host_accessible; }

Properties checked(const ResourcePtr& upstream) {
  Properties p = adapted_properties(upstream, TETHER_RESOURCE_KIND_PREFETCH, "prefetch adaptor");
  if (!is_managed(p)) {
    throw_invalid_argument(std::string("prefetch adaptor: upstream '") + upstream->name() +
                           "' does not give managed memory (device memory that is also host-accessible)");
  }
  if (!cuda::can_prefetch(p.device)) {
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "prefetch adaptor: device " + std::to_string(p.device) +
                                                " cannot prefetch managed memory (no concurrent managed access)");
  }
  return p;
}

class PrefetchAdaptor final : public ForwardingAdaptor {
 public:
  explicit PrefetchAdaptor(ResourcePtr upstream) : ForwardingAdaptor(checked(upstream), upstream) {}

  const char* name() const noexcept override { return "prefetch"; }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = forward_allocate(owner, bytes, alignment, stream);
    try {
      cuda::prefetch(p, bytes, properties().device, stream);
    } catch (...) {
      forward_deallocate(owner, p, bytes, alignment, stream);
      throw;
    }
    return p;
  }
  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    forward_deallocate(owner, ptr, bytes, alignment, stream);
  }
};

}  // namespace

ResourcePtr make_prefetch_adaptor(ResourcePtr upstream) { return std::make_shared<PrefetchAdaptor>(std::move(upstream)); }

}  // namespace tether::core
