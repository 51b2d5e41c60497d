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

// The enumerator's name of a tether_status_t value ("TETHER_ERROR_CUDA"), or
// "TETHER_UNKNOWN_STATUS" for any other int. The one table of status names:
// tether_status_name() and the logging adaptor's status column both use it.
// Takes an int: a C caller may pass a value outside the enumeration.
inline const char* status_name(int value) noexcept {
  switch (value) {
    case TETHER_OK: return "TETHER_OK";
    case TETHER_ERROR_INVALID_ARGUMENT: return "TETHER_ERROR_INVALID_ARGUMENT";
    case TETHER_ERROR_INVALID_HANDLE: return "TETHER_ERROR_INVALID_HANDLE";
    case TETHER_ERROR_OUT_OF_MEMORY: return "TETHER_ERROR_OUT_OF_MEMORY";
    case TETHER_ERROR_NOT_SUPPORTED: return "TETHER_ERROR_NOT_SUPPORTED";
    case TETHER_ERROR_NO_DEVICE: return "TETHER_ERROR_NO_DEVICE";
    case TETHER_ERROR_CUDA: return "TETHER_ERROR_CUDA";
    case TETHER_ERROR_LOCKED: return "TETHER_ERROR_LOCKED";
    case TETHER_ERROR_VERSION_MISMATCH: return "TETHER_ERROR_VERSION_MISMATCH";
    case TETHER_ERROR_SHUTTING_DOWN: return "TETHER_ERROR_SHUTTING_DOWN";
    case TETHER_ERROR_INTERNAL: return "TETHER_ERROR_INTERNAL";
    default: return "TETHER_UNKNOWN_STATUS";
  }
}

}  // namespace tether::core
