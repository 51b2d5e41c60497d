// Status names and the per-thread last-error message.
//
// The message lives in a fixed per-thread buffer, never on the heap: the
// error path must work when allocation is what failed (a std::string here
// once turned an out-of-memory into std::terminate inside the noexcept
// guard).
#include <cstring>
#include <string>

#include "internal.hpp"

namespace tether::capi {
namespace {
// Constant-initialised and trivially destructible: usable from any thread at
// any time, including from static destructors at exit.
thread_local char t_last_error[kMaxErrorMessage + 1];

// Append up to the buffer's end; returns the new length.
std::size_t append(std::size_t at, const char* text) noexcept {
  if (text == nullptr) return at;
  const std::size_t room = kMaxErrorMessage - at;
  std::size_t n = std::strlen(text);
  if (n > room) n = room;
  std::memcpy(t_last_error + at, text, n);
  return at + n;
}

void finish(std::size_t length, bool truncated) noexcept {
  if (truncated && length >= 3) std::memcpy(t_last_error + length - 3, "...", 3);
  t_last_error[length] = '\0';
}
}  // namespace

tether_status_t set_error(tether_status_t status, const std::string& message) noexcept {
  const std::size_t n = append(0, message.c_str());
  finish(n, message.size() > kMaxErrorMessage);
  return status;
}

tether_status_t set_error(tether_status_t status, const char* function, const char* what) noexcept {
  std::size_t n = append(0, function);
  n = append(n, ": ");
  n = append(n, what);
  const std::size_t full = (function ? std::strlen(function) : 0) + 2 + (what ? std::strlen(what) : 0);
  finish(n, full > kMaxErrorMessage);
  return status;
}

}  // namespace tether::capi

extern "C" {

TETHER_API const char* tether_last_error_message(void) { return tether::capi::t_last_error; }

TETHER_API void tether_clear_last_error(void) { tether::capi::t_last_error[0] = '\0'; }

TETHER_API const char* tether_status_name(tether_status_t status) {
  // A C caller may pass any int. In C++ an enum object holding a value
  // outside the enumeration's range is undefined behaviour to load, so read
  // the object's bytes as an int and compare integers only.
  int value;
  static_assert(sizeof value == sizeof status, "tether_status_t is int-sized");
  std::memcpy(&value, &status, sizeof value);
  return tether::core::status_name(value);
}

}  // extern "C"
