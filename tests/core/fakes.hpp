// Test doubles for the core unit tests: upstreams that run out of memory on
// purpose, and a pretend CUDA upstream whose stream ordering is observable.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tether_core/host.hpp"
#include "tether_core/resource.hpp"

namespace tether::test {

// Host memory that runs out once `limit` bytes are outstanding.
class LimitedUpstream : public core::Resource {
 public:
  explicit LimitedUpstream(std::size_t limit)
      : Resource(core::Properties{TETHER_RESOURCE_KIND_HOST, TETHER_DEVICE_HOST, false, true}),
        host_(core::make_host_resource()),
        limit_(limit) {}
  const char* name() const noexcept override { return "limited"; }
  std::size_t failures() const { return failures_; }
  std::vector<std::size_t> requests() const { return requests_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, core::stream_t s) override {
    requests_.push_back(bytes);
    if (bytes > limit_ - std::min<std::size_t>(limit_, outstanding_bytes())) {
      ++failures_;
      throw core::OutOfMemory("limited: " + std::to_string(bytes) + " bytes would exceed the limit");
    }
    return host_->allocate(bytes, alignment, s);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, core::stream_t s) override {
    host_->deallocate(p, bytes, alignment, s);
  }

 private:
  core::ResourcePtr host_;
  std::size_t limit_;
  std::size_t failures_ = 0;
  std::vector<std::size_t> requests_;
};

// A pretend CUDA upstream: host memory, but stream-ordered. It models events
// (a recording captures what its stream has seen), logs every wait on one,
// and checks, with vector clocks, that no memory is reused on a
// stream before that stream was made to wait for the stream that freed it.
//
// The test reports its frees (freed()) and allocations (allocated()); the
// pool's frees to this upstream are checked the same way.
class OrderedUpstream : public core::Resource, private core::StreamOrder {
 public:
  OrderedUpstream()
      : Resource(core::Properties{TETHER_RESOURCE_KIND_CUDA, 0, true, true}), host_(core::make_host_resource()) {}
  // Frees what is still allocated, as a CUDA context's teardown would (tests
  // that make a pool leak on purpose stay clean under LeakSanitizer).
  ~OrderedUpstream() override {
    for (const auto& [p, size_alignment] : live_) host_->deallocate(p, size_alignment.first, size_alignment.second, 0);
  }

  const char* name() const noexcept override { return "ordered"; }
  core::StreamOrder* stream_order() noexcept override { return this; }

  // Every wait_event(waiter, e) call, in order, as (waiter, the stream e was recorded on).
  std::vector<std::pair<core::stream_t, core::stream_t>> waits() const {
    std::lock_guard<std::mutex> l(m_);
    return waits_;
  }
  void clear_waits() {
    std::lock_guard<std::mutex> l(m_);
    waits_.clear();
  }
  // From now on, run out of memory once `bytes` are outstanding (0: no limit).
  void set_limit(std::size_t bytes) { limit_ = bytes; }
  std::size_t upstream_frees() const { return upstream_frees_; }
  // How many events the pool recorded.
  std::size_t event_records() const {
    std::lock_guard<std::mutex> l(m_);
    return records_;
  }
  // How often the pool waited for the whole device.
  std::size_t device_syncs() const {
    std::lock_guard<std::mutex> l(m_);
    return device_syncs_;
  }
  std::size_t violations() const { return violations_; }

  // record_stream's model. The test used [p, p+n) on `stream` (a kernel read
  // it there): handing any of it out on another stream before that stream
  // has seen this use (an event wait, or complete()) is a violation.
  void used(const void* p, std::size_t n, core::stream_t stream) {
    std::lock_guard<std::mutex> l(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    uses_.emplace(a, Use{a, a + n, stream, ++clock_[stream][stream]});
    longest_use_ = std::max(longest_use_, n);
  }
  // The work enqueued on `stream` so far has finished (and what it waited for).
  void complete(core::stream_t stream) {
    std::lock_guard<std::mutex> l(m_);
    for (const auto& [t, tick] : clock_[stream]) global_[t] = std::max(global_[t], tick);
  }
  // Event queries (event_done) and host waits on events (synchronize_event) so far.
  std::size_t event_queries() const {
    std::lock_guard<std::mutex> l(m_);
    return queries_;
  }
  std::size_t event_syncs() const {
    std::lock_guard<std::mutex> l(m_);
    return event_syncs_;
  }
  void fail_event_records(bool on) { fail_records_ = on; }
  void fail_event_queries(bool on) { fail_queries_ = on; }
  std::size_t events_created() const {
    std::lock_guard<std::mutex> l(m_);
    return events_.size();
  }
  std::size_t cross_stream_reuses() const { return cross_stream_reuses_; }

  // The caller freed [p, p+n) on `stream`: work on `stream` up to now used it.
  void freed(const void* p, std::size_t n, core::stream_t stream) {
    std::lock_guard<std::mutex> l(m_);
    const std::uint64_t tick = ++clock_[stream][stream];
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    forget(a, a + n);
    stamps_[a] = Stamp{a + n, stream, tick};
  }

  // [p, p+n) was handed out for use on `stream`: every earlier user must
  // have been waited for.
  void allocated(const void* p, std::size_t n, core::stream_t stream) {
    std::lock_guard<std::mutex> l(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    check(a, a + n, stream);
    forget(a, a + n);
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, core::stream_t s) override {
    const std::size_t limit = limit_.load();
    if (limit != 0 && bytes > limit - std::min(limit, outstanding_bytes()))
      throw core::OutOfMemory("ordered: " + std::to_string(bytes) + " bytes would exceed the limit");
    void* p = host_->allocate(bytes, alignment, s);
    std::lock_guard<std::mutex> l(m_);
    live_[p] = {bytes, alignment};
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, core::stream_t s) override {
    {
      std::lock_guard<std::mutex> l(m_);
      live_.erase(p);
      const auto a = reinterpret_cast<std::uintptr_t>(p);
      check(a, a + bytes, s);  // giving memory back on s is a use on s
      forget(a, a + bytes);
      ++upstream_frees_;
    }
    host_->deallocate(p, bytes, alignment, s);
  }

 private:
  struct Stamp {
    std::uintptr_t end;
    core::stream_t stream;
    std::uint64_t tick;
  };

  // Everything `stream` has seen is done: every stream, present or future, has seen it.
  void synchronize(core::stream_t stream) override {
    std::lock_guard<std::mutex> l(m_);
    for (const auto& [t, tick] : clock_[stream]) global_[t] = std::max(global_[t], tick);
  }
  event_t create_event() override {
    std::lock_guard<std::mutex> l(m_);
    events_.emplace_back();
    return reinterpret_cast<event_t>(events_.size());  // 1-based id
  }
  void destroy_event(event_t) noexcept override {}
  // The event captures what `stream` has seen so far.
  void record_event(event_t e, core::stream_t stream) override {
    std::lock_guard<std::mutex> l(m_);
    if (fail_records_) throw core::Error(TETHER_ERROR_CUDA, "ordered: record failed (injected)");
    Event& ev = events_.at(reinterpret_cast<std::size_t>(e) - 1);
    ev.stream = stream;
    ev.seen = clock_[stream];
    ++records_;
  }
  // Logged as a wait of `waiter` for the stream the event was recorded on.
  void wait_event(core::stream_t waiter, event_t e) override {
    std::lock_guard<std::mutex> l(m_);
    const Event& ev = events_.at(reinterpret_cast<std::size_t>(e) - 1);
    waits_.emplace_back(waiter, ev.stream);
    for (const auto& [s, t] : ev.seen) clock_[waiter][s] = std::max(clock_[waiter][s], t);
  }
  // Done once the work of its stream up to its recording is (complete()).
  bool event_done(event_t e) override {
    std::lock_guard<std::mutex> l(m_);
    ++queries_;
    if (fail_queries_) throw core::Error(TETHER_ERROR_CUDA, "ordered: query failed (injected)");
    const Event& ev = events_.at(reinterpret_cast<std::size_t>(e) - 1);
    const auto it = ev.seen.find(ev.stream);
    return it == ev.seen.end() || global_[ev.stream] >= it->second;
  }
  // Everything the event captured is done, as if the host had waited for it.
  void synchronize_event(event_t e) override {
    std::lock_guard<std::mutex> l(m_);
    ++event_syncs_;
    const Event& ev = events_.at(reinterpret_cast<std::size_t>(e) - 1);
    for (const auto& [t, tick] : ev.seen) global_[t] = std::max(global_[t], tick);
  }
  // Everything enqueued anywhere so far is done: every stream, present or future, has seen it.
  // (Protected: test_pool_quick.cpp's upstream stalls in it.)
 protected:
  void synchronize_device() override {
    std::lock_guard<std::mutex> l(m_);
    ++device_syncs_;
    for (const auto& [s, seen] : clock_)
      for (const auto& [t, tick] : seen) global_[t] = std::max(global_[t], tick);
  }
 private:

  void check(std::uintptr_t begin, std::uintptr_t end, core::stream_t stream) {
    // Uses are indexed by where they begin; none is longer than longest_use_.
    for (auto it = uses_.lower_bound(begin > longest_use_ ? begin - longest_use_ : 0);
         it != uses_.end() && it->first < end;) {
      const Use& u = it->second;
      if (u.end <= begin) {
        ++it;
        continue;
      }
      if (u.stream != stream) {
        ++cross_stream_reuses_;
        if (std::max(clock_[stream][u.stream], global_[u.stream]) < u.tick) ++violations_;
      }
      it = uses_.erase(it);  // handed out again: a new life starts
    }
    for (auto it = first_overlap(begin); it != stamps_.end() && it->first < end; ++it) {
      if (it->second.end <= begin || it->second.stream == stream) continue;
      ++cross_stream_reuses_;
      const std::uint64_t seen = std::max(clock_[stream][it->second.stream], global_[it->second.stream]);
      if (seen < it->second.tick) ++violations_;
    }
  }

  void forget(std::uintptr_t begin, std::uintptr_t end) {
    for (auto it = first_overlap(begin); it != stamps_.end() && it->first < end;) {
      if (it->second.end <= begin) {
        ++it;
        continue;
      }
      const Stamp s = it->second;
      const std::uintptr_t start = it->first;
      it = stamps_.erase(it);
      if (start < begin) stamps_[start] = Stamp{begin, s.stream, s.tick};
      if (s.end > end) stamps_[end] = Stamp{s.end, s.stream, s.tick};
    }
  }

  std::map<std::uintptr_t, Stamp>::iterator first_overlap(std::uintptr_t begin) {
    auto it = stamps_.upper_bound(begin);
    if (it != stamps_.begin()) --it;
    return it;
  }

  mutable std::mutex m_;
  core::ResourcePtr host_;
  std::vector<std::pair<core::stream_t, core::stream_t>> waits_;
  std::atomic<std::size_t> limit_{0};
  std::map<core::stream_t, std::map<core::stream_t, std::uint64_t>> clock_;  // clock_[s][t]: s has seen t's tick
  std::map<core::stream_t, std::uint64_t> global_;                           // seen by all (device syncs)
  std::map<std::uintptr_t, Stamp> stamps_;                                    // freed ranges, disjoint
  std::map<void*, std::pair<std::size_t, std::size_t>> live_;                 // size and alignment
  struct Use {
    std::uintptr_t begin, end;
    core::stream_t stream;
    std::uint64_t tick;
  };
  std::multimap<std::uintptr_t, Use> uses_;  // by begin
  std::size_t longest_use_ = 0;
  std::size_t queries_ = 0, event_syncs_ = 0;
  std::atomic<bool> fail_records_{false}, fail_queries_{false};
  struct Event {
    core::stream_t stream = 0;
    std::map<core::stream_t, std::uint64_t> seen;
  };
  std::vector<Event> events_;
  std::size_t upstream_frees_ = 0, violations_ = 0, cross_stream_reuses_ = 0, device_syncs_ = 0, records_ = 0;
};

}  // namespace tether::test
