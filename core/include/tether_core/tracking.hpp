// Tracking adaptor: forwards to its upstream and records every allocation it
// handed out and has not taken back - pointer, size, alignment, stream, the
// allocating thread's id (gettid, as Python's threading.get_native_id()) and,
// if asked, the call stack (glibc backtrace(), symbolised only when a report
// is made). The records are sharded by address, each shard under its own
// lock, and hold no heap memory beyond the table node unless stacks are
// captured, so tracking costs one short critical section per call.
//
// A free of anything not in the records (foreign, already freed) is
// INVALID_ARGUMENT with nothing changed; one the upstream refuses (wrong
// size or alignment) puts the record back unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tether_core/resource.hpp"

namespace tether::core {

struct TrackingRecord {
  void* ptr = nullptr;
  std::size_t size = 0;
  std::size_t alignment = 0;
  stream_t stream = 0;
  std::uint64_t thread_id = 0;
  std::uint64_t sequence = 0;      // 1 for the adaptor's first allocation, then 2, ...
  std::vector<void*> frames;       // return addresses, innermost first; empty without capture
};

// Throws INVALID_ARGUMENT for a null upstream.
ResourcePtr make_tracking_adaptor(ResourcePtr upstream, bool capture_stacks);

// The outstanding allocations, oldest first. NOT_SUPPORTED if r is not a
// tracking adaptor. A snapshot: calls racing it may or may not be in it.
std::vector<TrackingRecord> tracking_outstanding(const Resource& r);
// The leak report (see tether_tracking_adaptor_report() for the format).
std::string tracking_report(const Resource& r);
// One record's stack, one frame per line ("" without frames), from the
// caller of tether on: leading frames inside libtether itself are left out
// (unless every frame is in one object, as when tether is linked statically).
std::string tracking_stack_text(const std::vector<void*>& frames);
// Whether r captures stacks. NOT_SUPPORTED if r is not a tracking adaptor.
bool tracking_captures_stacks(const Resource& r);

}  // namespace tether::core
