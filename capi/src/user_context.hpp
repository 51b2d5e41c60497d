// A user's context pointer and its destroy function, handed to a core object
// only once creation has succeeded: the C rule is "destroy is called exactly
// once when the object is destroyed, and never if creation fails" (the caller
// keeps its pointer then). The core object calls the returned function from
// its destructor; it does nothing until arm() was called.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

namespace tether::capi {

class UserContext {
 public:
  UserContext(void (*destroy)(void*), void* context) : armed_(std::make_shared<std::atomic<bool>>(false)),
                                                       destroy_(destroy), context_(context) {}
  // What the core object calls from its destructor.
  std::function<void()> destroyer() const {
    if (destroy_ == nullptr) return {};
    auto armed = armed_;
    auto destroy = destroy_;
    void* context = context_;
    return [armed, destroy, context] {
      if (armed->exchange(false)) destroy(context);
    };
  }
  // Creation succeeded: the object owns the context now.
  void arm() noexcept { armed_->store(true); }

 private:
  std::shared_ptr<std::atomic<bool>> armed_;
  void (*destroy_)(void*);
  void* context_;
};

}  // namespace tether::capi
