// Status names and the per-thread last-error message.
#include <string>

#include "internal.hpp"

namespace tether::capi {
namespace {
thread_local std::string t_last_error;
}

tether_status_t set_error(tether_status_t status, const std::string& message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while recording the message: keep the status, lose the text.
  }
  return status;
}

}  // namespace tether::capi

extern "C" {

TETHER_API const char* tether_last_error_message(void) { return tether::capi::t_last_error.c_str(); }

TETHER_API void tether_clear_last_error(void) { tether::capi::t_last_error.clear(); }

TETHER_API const char* tether_status_name(tether_status_t status) {
  switch (status) {
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
  }
  return "TETHER_UNKNOWN_STATUS";
}

}  // extern "C"
