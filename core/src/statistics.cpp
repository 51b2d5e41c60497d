// StatisticsAdaptor: forwards to its upstream and counts what succeeded.
// Only what came through the adaptor may be freed through it, and what came
// through it may not be freed around it (ForwardingAdaptor tags upstream
// allocations with the adaptor's id, so the upstream refuses any other free
// before a counter here moves).
//
// The hot path takes no lock and reads no stack. Allocations and frees move
// one set of cumulative counters (relaxed atomics: current, total and the
// running peak, since the adaptor was made). The counter stack is a stack of
// baselines: a pushed set records the cumulative current and total at its
// push, and reports "cumulative now minus baseline". The running peak always
// belongs to the set on top (in cumulative terms: the highest cumulative
// current since that set's push or its last reset_peak); a push saves the
// peak of the set below and restarts the running peak at the current value,
// a pop restores max(saved peak, running peak). That is RMM's fold exactly:
// below.peak = max(below.peak, below.current + popped.peak), and current and
// total need no fold at all (the cumulative counters already hold them).
// Nothing a call counts can be lost to a racing push or pop: every call
// lands in the cumulative counters, and every set above the first is a
// difference of them. Push, pop, reset and reads of the figures serialise on
// one mutex (never taken by allocate or deallocate). Each counter is exact;
// a snapshot taken while other threads allocate may mix values from
// different instants, and a call that runs while a push or pop happens may
// have its bytes read before the push and its count after it (the next pop
// folds both into the set below all the same).
#include "tether_core/statistics.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "forwarding_adaptor.hpp"

namespace tether::core {

namespace {

// Raise `peak` to at least `value`.
void raise_peak(std::atomic<std::int64_t>& peak, std::int64_t value) noexcept {
  std::int64_t seen = peak.load(std::memory_order_relaxed);
  while (seen < value && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

std::uint64_t clamped(std::int64_t x) noexcept { return x > 0 ? static_cast<std::uint64_t>(x) : 0; }

// What allocate and deallocate move: cumulative since the adaptor was made.
struct alignas(64) Cumulative {
  std::atomic<std::int64_t> current_bytes{0}, current_count{0}, total_bytes{0}, total_count{0};
  std::atomic<std::int64_t> peak_bytes{0}, peak_count{0};  // the running peak of the set on top

  void allocated(std::int64_t bytes) noexcept {
    raise_peak(peak_bytes, current_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    raise_peak(peak_count, current_count.fetch_add(1, std::memory_order_relaxed) + 1);
    total_bytes.fetch_add(bytes, std::memory_order_relaxed);
    total_count.fetch_add(1, std::memory_order_relaxed);
  }
  void freed(std::int64_t bytes) noexcept {
    current_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    current_count.fetch_sub(1, std::memory_order_relaxed);
  }
};

// One set of the counter stack, as baselines of the cumulative counters.
struct Level {
  std::int64_t base_current_bytes = 0, base_current_count = 0, base_total_bytes = 0, base_total_count = 0;
  // The set's own peak (cumulative terms), saved while another set is above it.
  std::int64_t saved_peak_bytes = 0, saved_peak_count = 0;
};

class StatisticsAdaptor final : public ForwardingAdaptor {
 public:
  explicit StatisticsAdaptor(ResourcePtr upstream)
      : ForwardingAdaptor(adapted_properties(upstream, TETHER_RESOURCE_KIND_STATISTICS, "statistics adaptor"),
                          std::move(upstream)) {
    stack_.emplace_back();
  }

  const char* name() const noexcept override { return "statistics"; }

  Statistics snapshot() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return figures(stack_.back(), c_.peak_bytes.load(std::memory_order_relaxed),
                   c_.peak_count.load(std::memory_order_relaxed));
  }
  void reset_peak() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    c_.peak_bytes.store(c_.current_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
    c_.peak_count.store(c_.current_count.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  void push() {
    std::lock_guard<std::mutex> lock(mutex_);
    stack_.reserve(stack_.size() + 1);  // may throw: before anything changes
    Level next;
    next.base_current_bytes = c_.current_bytes.load(std::memory_order_relaxed);
    next.base_current_count = c_.current_count.load(std::memory_order_relaxed);
    next.base_total_bytes = c_.total_bytes.load(std::memory_order_relaxed);
    next.base_total_count = c_.total_count.load(std::memory_order_relaxed);
    // The running peak now belongs to the new set: it starts at the current value.
    Level& below = stack_.back();
    below.saved_peak_bytes = c_.peak_bytes.exchange(next.base_current_bytes, std::memory_order_relaxed);
    below.saved_peak_count = c_.peak_count.exchange(next.base_current_count, std::memory_order_relaxed);
    raise_peak(c_.peak_bytes, c_.current_bytes.load(std::memory_order_relaxed));  // calls between the loads
    raise_peak(c_.peak_count, c_.current_count.load(std::memory_order_relaxed));
    stack_.push_back(next);
  }
  Statistics pop() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stack_.size() < 2)
      throw_invalid_argument("statistics adaptor: no counter set to pop (push_counters was not called)");
    const Level popped = stack_.back();
    stack_.pop_back();
    const Level& below = stack_.back();
    // The popped set's running peak, then the fold: max(below's saved peak, popped peak), kept
    // by raising rather than storing, so a call raising the peak meanwhile is not undone.
    const std::int64_t peak_bytes = c_.peak_bytes.load(std::memory_order_relaxed);
    const std::int64_t peak_count = c_.peak_count.load(std::memory_order_relaxed);
    const Statistics out = figures(popped, peak_bytes, peak_count);
    raise_peak(c_.peak_bytes, below.saved_peak_bytes);
    raise_peak(c_.peak_count, below.saved_peak_count);
    return out;
  }
  std::size_t depth() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return stack_.size();
  }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = forward_allocate(owner, bytes, alignment, stream);  // counts nothing if this throws
    c_.allocated(static_cast<std::int64_t>(bytes));
    return p;
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    forward_deallocate(owner, ptr, bytes, alignment, stream);  // a rejected free changes nothing
    c_.freed(static_cast<std::int64_t>(bytes));
  }

 private:
  // The figures of `level` given the running peak (the set on top's, or a popped set's last).
  Statistics figures(const Level& level, std::int64_t peak_bytes, std::int64_t peak_count) const noexcept {
    Statistics s;
    s.current_bytes = clamped(c_.current_bytes.load(std::memory_order_relaxed) - level.base_current_bytes);
    s.current_count = clamped(c_.current_count.load(std::memory_order_relaxed) - level.base_current_count);
    s.total_bytes = clamped(c_.total_bytes.load(std::memory_order_relaxed) - level.base_total_bytes);
    s.total_count = clamped(c_.total_count.load(std::memory_order_relaxed) - level.base_total_count);
    s.peak_bytes = clamped(peak_bytes - level.base_current_bytes);
    s.peak_count = clamped(peak_count - level.base_current_count);
    return s;
  }

  Cumulative c_;
  mutable std::mutex mutex_;  // push, pop, reset_peak and reads; never allocate or deallocate
  std::vector<Level> stack_;  // under mutex_; never empty
};

StatisticsAdaptor& as_adaptor(const Resource& r) {
  auto* a = dynamic_cast<const StatisticsAdaptor*>(&r);
  if (a == nullptr) {
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                std::string("resource '") + r.name() + "' is not a statistics adaptor");
  }
  return const_cast<StatisticsAdaptor&>(*a);
}

}  // namespace

ResourcePtr make_statistics_adaptor(ResourcePtr upstream) {
  return std::make_shared<StatisticsAdaptor>(std::move(upstream));
}

Statistics statistics_of(const Resource& r) { return as_adaptor(r).snapshot(); }

void reset_peak_statistics(Resource& r) { as_adaptor(r).reset_peak(); }

void push_statistics_counters(Resource& r) { as_adaptor(r).push(); }

Statistics pop_statistics_counters(Resource& r) { return as_adaptor(r).pop(); }

std::size_t statistics_depth(const Resource& r) { return as_adaptor(r).depth(); }

}  // namespace tether::core
