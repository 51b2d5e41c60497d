// Callback resource: allocate/deallocate are user functions (a C vtable, a
// Python callable, any language). The resource records what the callbacks
// handed out, so frees are checked like every resource's.
#pragma once

#include <functional>

#include "tether_core/resource.hpp"

namespace tether::core {

struct CallbackFunctions {
  // Return memory of at least `bytes` (never 0) aligned to `alignment`, or
  // throw (OutOfMemory when there is none). May be called from any thread,
  // concurrently.
  std::function<void*(std::size_t bytes, std::size_t alignment, stream_t stream)> allocate;
  // Give back what allocate returned. Throws to refuse: the allocation then
  // stays recorded (nothing changed).
  std::function<void(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream)> deallocate;
  // Called once, from the resource's destructor (may be empty). Must not throw.
  std::function<void()> destroy;
};

struct CallbackProperties {
  int device = TETHER_DEVICE_HOST;
  bool device_accessible = false;
  bool host_accessible = true;
};

// Throws INVALID_ARGUMENT if allocate or deallocate is empty.
ResourcePtr make_callback_resource(CallbackFunctions functions, CallbackProperties properties);

}  // namespace tether::core
