// StatisticsAdaptor: forwards to its upstream and counts what succeeded.
// Only what came through the adaptor may be freed through it, and what came
// through it may not be freed around it (ForwardingAdaptor tags upstream
// allocations with the adaptor's id, so the upstream refuses any other free
// before a counter here moves).
//
// Counters are relaxed atomics of the set on top of the stack. Calls hold the
// stack's lock shared (so a push or pop, which take it exclusively, never
// sees a call half done, and a call never counts into a set already folded).
// Each counter is exact, but a snapshot taken while other threads allocate
// may mix values from different instants.
#include "tether_core/statistics.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
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

std::uint64_t clamped(const std::atomic<std::int64_t>& v) noexcept {
  const std::int64_t x = v.load(std::memory_order_relaxed);
  return x > 0 ? static_cast<std::uint64_t>(x) : 0;
}

struct CounterSet {
  std::atomic<std::int64_t> current_bytes{0}, peak_bytes{0}, total_bytes{0};
  std::atomic<std::int64_t> current_count{0}, peak_count{0}, total_count{0};

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
  // RMM's counter fold (called with the stack locked exclusively).
  void fold(const CounterSet& up) noexcept {
    auto fold_one = [](std::atomic<std::int64_t>& cur, std::atomic<std::int64_t>& peak, std::atomic<std::int64_t>& tot,
                       const std::atomic<std::int64_t>& ucur, const std::atomic<std::int64_t>& upeak,
                       const std::atomic<std::int64_t>& utot) {
      const std::int64_t c = cur.load(std::memory_order_relaxed);
      const std::int64_t p = peak.load(std::memory_order_relaxed);
      const std::int64_t candidate = c + upeak.load(std::memory_order_relaxed);
      peak.store(candidate > p ? candidate : p, std::memory_order_relaxed);
      cur.store(c + ucur.load(std::memory_order_relaxed), std::memory_order_relaxed);
      tot.fetch_add(utot.load(std::memory_order_relaxed), std::memory_order_relaxed);
    };
    fold_one(current_bytes, peak_bytes, total_bytes, up.current_bytes, up.peak_bytes, up.total_bytes);
    fold_one(current_count, peak_count, total_count, up.current_count, up.peak_count, up.total_count);
  }
  Statistics snapshot() const noexcept {
    Statistics s;
    s.current_bytes = clamped(current_bytes);
    s.peak_bytes = clamped(peak_bytes);
    s.total_bytes = clamped(total_bytes);
    s.current_count = clamped(current_count);
    s.peak_count = clamped(peak_count);
    s.total_count = clamped(total_count);
    return s;
  }
  void reset_peak() noexcept {
    peak_bytes.store(current_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
    peak_count.store(current_count.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
};

class StatisticsAdaptor final : public ForwardingAdaptor {
 public:
  explicit StatisticsAdaptor(ResourcePtr upstream)
      : ForwardingAdaptor(adapted_properties(upstream, TETHER_RESOURCE_KIND_STATISTICS, "statistics adaptor"),
                          std::move(upstream)) {
    stack_.push_back(std::make_unique<CounterSet>());
    top_ = stack_.back().get();
  }

  const char* name() const noexcept override { return "statistics"; }

  Statistics snapshot() const noexcept {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return top_->snapshot();
  }
  void reset_peak() noexcept {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    top_->reset_peak();
  }
  void push() {
    auto set = std::make_unique<CounterSet>();  // may throw: before anything changes
    std::unique_lock<std::shared_mutex> lock(mutex_);
    stack_.reserve(stack_.size() + 1);
    stack_.push_back(std::move(set));
    top_ = stack_.back().get();
  }
  Statistics pop() {
    std::unique_ptr<CounterSet> popped;
    {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      if (stack_.size() < 2)
        throw_invalid_argument("statistics adaptor: no counter set to pop (push_counters was not called)");
      popped = std::move(stack_.back());
      stack_.pop_back();
      top_ = stack_.back().get();
      top_->fold(*popped);
    }
    return popped->snapshot();
  }
  std::size_t depth() const noexcept {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return stack_.size();
  }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = forward_allocate(owner, bytes, alignment, stream);  // counts nothing if this throws
    std::shared_lock<std::shared_mutex> lock(mutex_);
    top_->allocated(static_cast<std::int64_t>(bytes));
    return p;
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    forward_deallocate(owner, ptr, bytes, alignment, stream);  // a rejected free changes nothing
    std::shared_lock<std::shared_mutex> lock(mutex_);
    top_->freed(static_cast<std::int64_t>(bytes));
  }

 private:
  mutable std::shared_mutex mutex_;
  std::vector<std::unique_ptr<CounterSet>> stack_;
  CounterSet* top_ = nullptr;
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
