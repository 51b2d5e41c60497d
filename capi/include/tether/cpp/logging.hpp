// tether/cpp/logging.hpp - logging_adaptor() and flush_log() (tether/logging.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_LOGGING_HPP
#define TETHER_CPP_LOGGING_HPP

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Receives one CSV log line (without newline); see tether/logging.h for the format.
/// Called from the allocating thread, possibly concurrently; must not throw
/// (an exception is swallowed) and must not use the adaptor.
using log_function = std::function<void(std::string_view line)>;

namespace detail {
inline void log_trampoline(const char* line, std::size_t length, void* user) {
  try {
    (*static_cast<log_function*>(user))(std::string_view(line, length));
  } catch (...) {  // no exception crosses the C ABI
  }
}
inline void log_destroy(void* user) { delete static_cast<log_function*>(user); }
}  // namespace detail

/// A new logging adaptor over `upstream` (kept alive by the adaptor) writing
/// the CSV log to the file `path` (created or truncated). Throws
/// invalid_argument_error if the file cannot be opened.
inline resource logging_adaptor(const resource& upstream, const std::string& path) {
  tether_logging_options_t o = TETHER_LOGGING_OPTIONS_INIT;
  o.path = path.c_str();
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_logging_adaptor_create(upstream.get(), &o, out); });
}

/// A new logging adaptor over `upstream` giving every CSV line to `callback`
/// (kept until the adaptor is destroyed).
inline resource logging_adaptor(const resource& upstream, log_function callback) {
  if (!callback)
    throw invalid_argument_error(TETHER_ERROR_INVALID_ARGUMENT, "tether::logging_adaptor: callback must not be empty");
  auto fn = std::make_unique<log_function>(std::move(callback));
  tether_logging_options_t o = TETHER_LOGGING_OPTIONS_INIT;
  o.callback = &detail::log_trampoline;
  o.user = fn.get();
  o.destroy = &detail::log_destroy;
  resource r = detail::make_resource(
      [&](tether_resource_t** out) { return tether_logging_adaptor_create(upstream.get(), &o, out); });
  fn.release();  // owned by the adaptor now
  return r;
}

/// Write out the lines a logging adaptor's file buffers.
/// Throws not_supported_error if `adaptor` is not a logging adaptor.
inline void flush_log(const resource& adaptor) { check(tether_logging_adaptor_flush(adaptor.get())); }

}  // namespace tether

#endif  // TETHER_CPP_LOGGING_HPP
