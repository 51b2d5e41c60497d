// tether::core errors. Core code reports failure by throwing tether::core::Error
// (or a subclass); the C ABI layer catches everything at the boundary and turns
// it into a tether_status_t plus the thread's last-error message.
#pragma once

#include <stdexcept>
#include <string>

#include "tether/error.h"

namespace tether::core {

class Error : public std::runtime_error {
 public:
  Error(tether_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  tether_status_t status() const noexcept { return status_; }

 private:
  tether_status_t status_;
};

// Distinct type so pools can catch upstream exhaustion and try to recover.
class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& message) : Error(TETHER_ERROR_OUT_OF_MEMORY, message) {}
};

[[noreturn]] inline void throw_invalid_argument(const std::string& m) {
  throw Error(TETHER_ERROR_INVALID_ARGUMENT, m);
}

}  // namespace tether::core
