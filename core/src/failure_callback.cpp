// FailureCallbackAdaptor: forwards in the name of whoever asked (as the
// statistics adaptor does); retries an out-of-memory allocation for as long
// as the user's callback asks for it.
#include "tether_core/failure_callback.hpp"

#include <new>
#include <utility>

namespace tether::core {

namespace {

Properties adapted(const ResourcePtr& upstream, const FailureCallbackOptions& o) {
  if (!upstream) throw_invalid_argument("failure callback adaptor: upstream must not be null");
  if (!o.callback) throw_invalid_argument("failure callback adaptor: callback must not be empty");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_FAILURE_CALLBACK;
  return p;
}

class FailureCallbackAdaptor final : public Resource {
 public:
  FailureCallbackAdaptor(ResourcePtr upstream, FailureCallbackOptions o)
      : Resource(adapted(upstream, o)), upstream_(std::move(upstream)), options_(std::move(o)) {}

  ~FailureCallbackAdaptor() override {
    if (options_.destroy) {
      try {
        options_.destroy();
      } catch (...) {
      }
    }
  }

  const char* name() const noexcept override { return "failure_callback"; }
  void trim() override { upstream_->trim(); }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  StreamOrder* stream_order() noexcept override { return upstream_->stream_order(); }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    for (;;) {
      try {
        return upstream_->allocate_for(tag(owner), bytes, alignment, stream);
      } catch (const OutOfMemory&) {
        if (!retry(bytes)) throw;
      } catch (const std::bad_alloc&) {
        if (!retry(bytes)) throw;
      } catch (const Error& e) {
        if (e.status() != TETHER_ERROR_OUT_OF_MEMORY || !retry(bytes)) throw;
      }
    }
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    upstream_->deallocate_for(tag(owner), ptr, bytes, alignment, stream);
  }

 private:
  owner_t tag(owner_t owner) const noexcept { return owner == kCaller ? id() : owner; }

  bool retry(std::size_t bytes) noexcept {
    try {
      return options_.callback(bytes);
    } catch (...) {
      return false;
    }
  }

  ResourcePtr upstream_;
  FailureCallbackOptions options_;
};

}  // namespace

ResourcePtr make_failure_callback_adaptor(ResourcePtr upstream, FailureCallbackOptions options) {
  return std::make_shared<FailureCallbackAdaptor>(std::move(upstream), std::move(options));
}

}  // namespace tether::core
