// Logging adaptor: forwards to its upstream and writes one CSV line per
// allocate/free (failed ones too) to a file and/or a sink function.
//
// Format (docs/resources/logging.rst is the user-facing description; the
// replay tool reads it): a header line, then one line per event
//   time_ns,thread,action,pointer,size,stream,status
// time_ns: nanoseconds since the adaptor was created (steady clock);
// thread: the OS thread id; action: "allocate" or "free"; pointer: hex
// ("0x0" for a failed allocation); size: bytes asked for; stream: the
// stream value as an unsigned decimal integer; status: the tether status
// name ("TETHER_OK", "TETHER_ERROR_OUT_OF_MEMORY", ...).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tether_core/resource.hpp"

namespace tether::core {

inline constexpr const char* kLogHeader = "time_ns,thread,action,pointer,size,stream,status";

struct LoggingOptions {
  std::string path;  // file to write (created or truncated); empty: none
  // Called with each line (no newline), from the thread that allocated or
  // freed, without any lock held: possibly concurrently. Must not throw.
  std::function<void(const char* line, std::size_t length)> sink;
  std::function<void()> destroy;  // called once from the destructor (may be empty)
};

// Throws INVALID_ARGUMENT if neither path nor sink is given, or the file
// cannot be opened (the message names the path and the reason).
ResourcePtr make_logging_adaptor(ResourcePtr upstream, LoggingOptions options);

// Write out buffered lines (the file's; a sink has none). NOT_SUPPORTED for
// resources that are not logging adaptors. A failed write drops the lines it
// carried (counted in LogInfo::lost_lines); from then on every flush throws
// Error(INTERNAL) naming the path, the reason and the count, until a flush
// writes pending lines successfully. The destructor's last flush reports a
// log that lost lines on stderr unless a flush already threw for it.
void flush_log(Resource& r);

struct LogInfo {
  std::uint64_t lines = 0;       // lines logged to the file (the header included)
  std::uint64_t lost_lines = 0;  // lines a failed write dropped
  int error = 0;                 // errno of the failure not yet cleared by a flush, 0 if none
};
// NOT_SUPPORTED for resources that are not logging adaptors.
LogInfo log_info(const Resource& r);

}  // namespace tether::core
