// LimitingAdaptor: reserve, then forward; give the reservation back if the
// upstream fails or refuses.
#include "tether_core/limiting.hpp"

#include <atomic>
#include <string>

#include "forwarding_adaptor.hpp"

namespace tether::core {

namespace {

class LimitingAdaptor final : public ForwardingAdaptor {
 public:
  LimitingAdaptor(ResourcePtr upstream, std::size_t limit)
      : ForwardingAdaptor(adapted_properties(upstream, TETHER_RESOURCE_KIND_LIMITING, "limiting adaptor"),
                          upstream),
        limit_(limit) {}

  const char* name() const noexcept override { return "limiting"; }
  std::uint64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::uint64_t limit() const noexcept { return limit_; }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    reserve(bytes);
    try {
      return forward_allocate(owner, bytes, alignment, stream);
    } catch (...) {
      used_.fetch_sub(bytes, std::memory_order_relaxed);
      throw;
    }
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    forward_deallocate(owner, ptr, bytes, alignment, stream);  // a refused free changes nothing
    used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

 private:
  void reserve(std::size_t bytes) {
    std::uint64_t seen = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || seen > limit_ - bytes) {
        throw OutOfMemory("limiting adaptor: allocating " + std::to_string(bytes) + " bytes would pass the limit of " +
                          std::to_string(limit_) + " bytes (" + std::to_string(seen) + " in use)");
      }
    } while (!used_.compare_exchange_weak(seen, seen + bytes, std::memory_order_relaxed));
  }

  const std::uint64_t limit_;
  std::atomic<std::uint64_t> used_{0};
};

const LimitingAdaptor& as_limiting(const Resource& r) {
  auto* a = dynamic_cast<const LimitingAdaptor*>(&r);
  if (a == nullptr) {
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a limiting adaptor");
  }
  return *a;
}

}  // namespace

ResourcePtr make_limiting_adaptor(ResourcePtr upstream, std::size_t limit) {
  return std::make_shared<LimitingAdaptor>(std::move(upstream), limit);
}

std::uint64_t limiting_used_bytes(const Resource& r) { return as_limiting(r).used(); }
std::uint64_t limiting_limit(const Resource& r) { return as_limiting(r).limit(); }

}  // namespace tether::core
