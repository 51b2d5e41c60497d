// tether/cpp/tracking.hpp - C++ factory and leak report of the tracking adaptor
// (tether/tracking.h). Included by tether/tether.hpp; usable on its own.
#ifndef TETHER_CPP_TRACKING_HPP
#define TETHER_CPP_TRACKING_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tether/tether.hpp"

namespace tether {

/// A new tracking adaptor over `upstream` (kept alive by the adaptor); with
/// `capture_stacks` each allocation's call stack is captured too.
inline resource tracking_adaptor(const resource& upstream, bool capture_stacks = false) {
  tether_tracking_options_t o = TETHER_TRACKING_OPTIONS_INIT;
  o.capture_stacks = capture_stacks ? 1 : 0;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_tracking_adaptor_create(upstream.get(), &o, out); });
}

/// One outstanding allocation of a tracking adaptor.
struct tracking_record {
  void* ptr = nullptr;            ///< the memory (not owned by the record)
  std::size_t size = 0;           ///< bytes requested
  std::size_t alignment = 0;      ///< alignment requested
  tether_stream_t stream = 0;     ///< the allocation's stream
  std::uint64_t thread_id = 0;    ///< the allocating thread (gettid())
  std::uint64_t sequence = 0;     ///< allocation order (1, 2, ...)
  std::string stack;              ///< captured stack, one frame per line; "" without capture
};

namespace detail {
// Call a text function of tracking.h until the whole text fits.
template <class F>
std::string tracking_text(F&& call) {
  std::string buf(1024, '\0');
  for (;;) {
    std::size_t needed = 0;
    check(call(&buf[0], buf.size(), &needed));
    if (needed <= buf.size()) {
      buf.resize(needed - 1);
      return buf;
    }
    buf.assign(needed + 256, '\0');
  }
}
}  // namespace detail

/// The outstanding allocations of a tracking adaptor, oldest first;
/// not_supported_error for other resources.
inline std::vector<tracking_record> tracking_outstanding(const resource& r) {
  std::size_t count = 0;
  check(tether_tracking_adaptor_get_outstanding(r.get(), nullptr, 0, &count));
  std::vector<tether_tracking_record_t> raw;
  do {
    raw.assign(count + 16, tether_tracking_record_t TETHER_TRACKING_RECORD_INIT);
    check(tether_tracking_adaptor_get_outstanding(r.get(), raw.data(), raw.size(), &count));
  } while (count > raw.size());
  std::vector<tracking_record> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const tether_tracking_record_t& c = raw[i];
    tracking_record t;
    t.ptr = c.ptr;
    t.size = c.size;
    t.alignment = c.alignment;
    t.stream = c.stream;
    t.thread_id = c.thread_id;
    t.sequence = c.sequence;
    if (c.stack_depth > 0) {
      try {
        t.stack = detail::tracking_text([&](char* b, std::size_t n, std::size_t* need) {
          return tether_tracking_adaptor_get_stack(r.get(), c.ptr, b, n, need);
        });
      } catch (const invalid_argument_error&) {
        // freed by another thread since the snapshot
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

/// The leak report of a tracking adaptor (format: tether_tracking_adaptor_report()).
inline std::string tracking_report(const resource& r) {
  return detail::tracking_text(
      [&](char* b, std::size_t n, std::size_t* need) { return tether_tracking_adaptor_report(r.get(), b, n, need); });
}

}  // namespace tether

#endif  // TETHER_CPP_TRACKING_HPP
