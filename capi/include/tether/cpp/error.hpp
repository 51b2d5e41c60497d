// tether/cpp/error.hpp - exceptions: tether::error and one subclass per status code.
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_ERROR_HPP
#define TETHER_CPP_ERROR_HPP

#include <stdexcept>
#include <string>

#include "tether/tether.h"

namespace tether {

/// Base of every exception tether throws. `status()` is the C status code,
/// `what()` the library's message (tether_last_error_message() at the time of
/// the failure).
class error : public std::runtime_error {
 public:
  /// An error with status `status` and message `message`.
  error(tether_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  /// The C status code (never TETHER_OK).
  tether_status_t status() const noexcept { return status_; }
  /// The name of the status code ("TETHER_ERROR_OUT_OF_MEMORY").
  const char* status_name() const noexcept { return tether_status_name(status_); }

 private:
  tether_status_t status_;
};

// Each subclass is a distinct type for one status code. They derive from
// tether::error only (not also from std::bad_alloc, std::invalid_argument, ...):
// a second std::exception base would make `catch (const std::exception&)`
// ambiguous, and so silently not match.

/// TETHER_ERROR_OUT_OF_MEMORY: the resource (or its upstream) is exhausted.
class out_of_memory_error : public error { using error::error; };
/// TETHER_ERROR_INVALID_ARGUMENT: bad alignment, unknown device, foreign pointer, ...
class invalid_argument_error : public error { using error::error; };
/// TETHER_ERROR_INVALID_HANDLE: a released, stale, forged or wrong-type handle.
class invalid_handle_error : public error { using error::error; };
/// TETHER_ERROR_NOT_SUPPORTED: this build, resource or platform lacks the operation.
class not_supported_error : public error { using error::error; };
/// TETHER_ERROR_NO_DEVICE: no CUDA driver, no such device, or a driver too old.
class no_device_error : public error { using error::error; };
/// TETHER_ERROR_CUDA: a CUDA driver call failed (the message names it).
class cuda_error : public error { using error::error; };
/// TETHER_ERROR_LOCKED: the current-resource slot was locked by the application.
class locked_error : public error { using error::error; };
/// TETHER_ERROR_VERSION_MISMATCH: an options struct older than the library accepts.
class version_mismatch_error : public error { using error::error; };
/// TETHER_ERROR_SHUTTING_DOWN: refused because the process is exiting.
class shutting_down_error : public error { using error::error; };
/// TETHER_ERROR_INTERNAL (or an unknown code): a bug in tether.
class internal_error : public error { using error::error; };

/// Throw the exception type that matches `status`, with `message`.
/// Does nothing for TETHER_OK.
inline void throw_error(tether_status_t status, const std::string& message) {
  switch (status) {
    case TETHER_OK: return;
    case TETHER_ERROR_OUT_OF_MEMORY: throw out_of_memory_error(status, message);
    case TETHER_ERROR_INVALID_ARGUMENT: throw invalid_argument_error(status, message);
    case TETHER_ERROR_INVALID_HANDLE: throw invalid_handle_error(status, message);
    case TETHER_ERROR_NOT_SUPPORTED: throw not_supported_error(status, message);
    case TETHER_ERROR_NO_DEVICE: throw no_device_error(status, message);
    case TETHER_ERROR_CUDA: throw cuda_error(status, message);
    case TETHER_ERROR_LOCKED: throw locked_error(status, message);
    case TETHER_ERROR_VERSION_MISMATCH: throw version_mismatch_error(status, message);
    case TETHER_ERROR_SHUTTING_DOWN: throw shutting_down_error(status, message);
    case TETHER_ERROR_INTERNAL: break;
  }
  throw internal_error(status, message);
}

/// Throw the matching tether::error if `status` is not TETHER_OK, with the
/// calling thread's tether_last_error_message(). The one place C statuses
/// become exceptions.
inline void check(tether_status_t status) {
  if (status != TETHER_OK) throw_error(status, tether_last_error_message());
}

namespace detail {
// retain/release never set the thread's message, so failures of those calls
// get a message of their own instead of a stale one.
inline void check_refcount(tether_status_t status, const char* what) {
  if (status != TETHER_OK) throw_error(status, std::string(what) + ": the handle is stale, forged or NULL");
}
}  // namespace detail

}  // namespace tether

#endif  // TETHER_CPP_ERROR_HPP
