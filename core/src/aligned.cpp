// AlignedAdaptor: one rule, applied on the way in and on the way out.
#include "tether_core/aligned.hpp"

#include <algorithm>
#include <string>

#include "forwarding_adaptor.hpp"

namespace tether::core {

namespace {

AlignedOptions checked(const AlignedOptions& o) {
  if (o.alignment == 0 || (o.alignment & (o.alignment - 1)) != 0 || o.alignment > kMaxAlignment) {
    throw_invalid_argument("aligned adaptor: alignment " + std::to_string(o.alignment) +
                           " is not a power of two in [1, " + std::to_string(kMaxAlignment) + "]");
  }
  return o;
}

class AlignedAdaptor final : public ForwardingAdaptor {
 public:
  AlignedAdaptor(ResourcePtr upstream, const AlignedOptions& options)
      : ForwardingAdaptor(adapted_properties(upstream, TETHER_RESOURCE_KIND_ALIGNED, "aligned adaptor"),
                          upstream),
        options_(checked(options)) {}

  const char* name() const noexcept override { return "aligned"; }
  const AlignedOptions& options() const noexcept { return options_; }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return forward_allocate(owner, bytes, effective(bytes, alignment), stream);
  }
  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    forward_deallocate(owner, ptr, bytes, effective(bytes, alignment), stream);
  }

 private:
  std::size_t effective(std::size_t bytes, std::size_t alignment) const noexcept {
    return bytes >= options_.threshold ? std::max(alignment, options_.alignment) : alignment;
  }

  const AlignedOptions options_;
};

}  // namespace

ResourcePtr make_aligned_adaptor(ResourcePtr upstream, const AlignedOptions& options) {
  return std::make_shared<AlignedAdaptor>(std::move(upstream), options);
}

AlignedOptions aligned_options(const Resource& r) {
  auto* a = dynamic_cast<const AlignedAdaptor*>(&r);
  if (a == nullptr) {
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not an aligned adaptor");
  }
  return a->options();
}

}  // namespace tether::core
