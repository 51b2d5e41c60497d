// Failure-callback adaptor: forwards to its upstream; when the upstream is
// out of memory it asks a user function (given the failed size) whether to
// try again - the function may free memory first (spilling).
#pragma once

#include <functional>

#include "tether_core/resource.hpp"

namespace tether::core {

struct FailureCallbackOptions {
  // true: try the allocation again; false: report the out-of-memory error.
  // Called from the allocating thread, without any lock of this adaptor held,
  // possibly concurrently. An exception counts as false.
  std::function<bool(std::size_t bytes)> callback;
  std::function<void()> destroy;  // called once from the destructor (may be empty)
};

// Throws INVALID_ARGUMENT if the callback is empty.
ResourcePtr make_failure_callback_adaptor(ResourcePtr upstream, FailureCallbackOptions options);

}  // namespace tether::core
