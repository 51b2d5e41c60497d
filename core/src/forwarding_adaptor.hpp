// Internal: the part every adaptor shares. An adaptor holds its upstream,
// forwards what it is asked for in the name of whoever asked (itself for a
// caller, else the dependent that asked), so the upstream's records say which
// allocations came through this adaptor and refuse every other free before
// the adaptor changes anything (see "Who may free what" in resource.hpp).
#pragma once

#include <string>
#include <utility>

#include "tether_core/resource.hpp"

namespace tether::core {

// The upstream's properties under another kind. Throws INVALID_ARGUMENT
// naming `what` for a null upstream.
inline Properties adapted_properties(const ResourcePtr& upstream, tether_resource_kind_t kind, const char* what) {
  if (!upstream) throw_invalid_argument(std::string(what) + ": upstream must not be null");
  Properties p = upstream->properties();
  p.kind = kind;
  return p;
}

class ForwardingAdaptor : public Resource {
 public:
  // By reference: callers compute `p` from the same upstream in the same call.
  ForwardingAdaptor(Properties p, const ResourcePtr& upstream) : Resource(p), upstream_(upstream) {}

  void trim() override { upstream_->trim(); }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  // A pool over an adaptor must stay stream-ordered if the upstream is.
  StreamOrder* stream_order() noexcept override { return upstream_->stream_order(); }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) final {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) final {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  // The upstream's allocate_for/deallocate_for in the name of `owner`.
  void* forward_allocate(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
    return upstream_->allocate_for(tag(owner), bytes, alignment, stream);
  }
  void forward_deallocate(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
    upstream_->deallocate_for(tag(owner), ptr, bytes, alignment, stream);
  }

  const ResourcePtr& upstream_resource() const noexcept { return upstream_; }

 private:
  owner_t tag(owner_t owner) const noexcept { return owner == kCaller ? id() : owner; }

  ResourcePtr upstream_;
};

}  // namespace tether::core
