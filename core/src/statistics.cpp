// StatisticsAdaptor: forwards to its upstream and counts what succeeded.
// Only what came through the adaptor may be freed through it, and what came
// through it may not be freed around it (ForwardingAdaptor tags upstream
// allocations with the adaptor's id, so the upstream refuses any other free
// before a counter here moves).
//
// The hot path takes no lock and reads no stack. Allocations and frees move
// one set of cumulative counters (atomics: current, total and the running
// peak, since the adaptor was made). The counter stack is a stack of
// baselines: a pushed set records the cumulative current and total at its
// push and reports "cumulative now minus baseline". The running peak always
// belongs to the set on top (in cumulative terms: the highest cumulative
// current since that set's push or its last reset_peak); a push saves the
// peak of the set below and restarts the running peak at the current value,
// a pop restores max(saved peak, running peak). That is RMM's fold exactly:
// below.peak = max(below.peak, below.current + popped.peak), and current and
// total need no fold at all (the cumulative counters already hold them).
//
// A push or pop must see every call either wholly or not at all (a call
// counts into exactly one set). The current count shares one word, `gate_`,
// with a count of calls in flight and a busy bit: a call enters with one
// fetch_add on it (count and in-flight at once) and leaves with one
// fetch_sub, and backs off while the busy bit is set. A push or pop (under
// mutex_, as are reset_peak and reads) sets the bit, waits until no call is
// in flight - calls are a handful of atomic adds; the upstream's work is done
// before a call enters - then reads and restarts counters with nothing
// moving, and clears the bit. A snapshot taken while other threads allocate
// may mix values from different instants, each exact.
#include "tether_core/statistics.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
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

// gate_: bits 0-39 the cumulative current count (never negative: only what
// was counted in can be freed), bits 40-62 calls in flight, bit 63 busy.
constexpr std::uint64_t kCountMask = (std::uint64_t{1} << 40) - 1;
constexpr std::uint64_t kInFlight = std::uint64_t{1} << 40;
constexpr std::uint64_t kInFlightMask = ((std::uint64_t{1} << 63) - 1) & ~kCountMask;
constexpr std::uint64_t kBusy = std::uint64_t{1} << 63;

void pause(unsigned& spins) noexcept {
  if (++spins > 64) std::this_thread::yield();
}

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
    return figures(stack_.back(), count(gate_.load(std::memory_order_acquire)),
                   peak_bytes_.load(std::memory_order_relaxed), peak_count_.load(std::memory_order_relaxed));
  }
  void reset_peak() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::int64_t n = quiesce();
    peak_bytes_.store(current_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    peak_count_.store(n, std::memory_order_relaxed);
    reopen();
  }
  void push() {
    std::lock_guard<std::mutex> lock(mutex_);
    // Grow geometrically (amortised O(1) per push; reserve(size() + 1) copied the
    // whole stack on every push). May throw: before anything changes.
    if (stack_.size() == stack_.capacity()) stack_.reserve(2 * stack_.capacity() + 1);
    const std::int64_t n = quiesce();
    Level next;
    next.base_current_bytes = current_bytes_.load(std::memory_order_relaxed);
    next.base_current_count = n;
    next.base_total_bytes = total_bytes_.load(std::memory_order_relaxed);
    next.base_total_count = total_count_.load(std::memory_order_relaxed);
    // The running peak now belongs to the new set: it starts at the current value.
    Level& below = stack_.back();
    below.saved_peak_bytes = peak_bytes_.exchange(next.base_current_bytes, std::memory_order_relaxed);
    below.saved_peak_count = peak_count_.exchange(n, std::memory_order_relaxed);
    stack_.push_back(next);
    reopen();
  }
  Statistics pop() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stack_.size() < 2)
      throw_invalid_argument("statistics adaptor: no counter set to pop (push_counters was not called)");
    const std::int64_t n = quiesce();
    const Level popped = stack_.back();
    stack_.pop_back();
    const Level& below = stack_.back();
    const Statistics out = figures(popped, n, peak_bytes_.load(std::memory_order_relaxed),
                                   peak_count_.load(std::memory_order_relaxed));
    raise_peak(peak_bytes_, below.saved_peak_bytes);  // the fold: max(below's peak, popped peak)
    raise_peak(peak_count_, below.saved_peak_count);
    reopen();
    return out;
  }
  std::size_t depth() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return stack_.size();
  }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = forward_allocate(owner, bytes, alignment, stream);  // counts nothing if this throws
    const auto n = static_cast<std::int64_t>(bytes);
    const std::uint64_t before = enter(kInFlight + 1);
    raise_peak(peak_count_, count(before) + 1);
    raise_peak(peak_bytes_, current_bytes_.fetch_add(n, std::memory_order_relaxed) + n);
    total_bytes_.fetch_add(n, std::memory_order_relaxed);
    total_count_.fetch_add(1, std::memory_order_relaxed);
    gate_.fetch_sub(kInFlight, std::memory_order_release);
    return p;
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    forward_deallocate(owner, ptr, bytes, alignment, stream);  // a rejected free changes nothing
    enter(kInFlight - 1);  // one call in flight, one allocation fewer
    current_bytes_.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    gate_.fetch_sub(kInFlight, std::memory_order_release);
  }

 private:
  static std::int64_t count(std::uint64_t gate) noexcept { return static_cast<std::int64_t>(gate & kCountMask); }

  // A call's entry: add `delta` (its in-flight mark and count change) unless a
  // push or pop holds the gate; then undo and wait. Returns the gate before.
  std::uint64_t enter(std::uint64_t delta) noexcept {
    for (;;) {
      const std::uint64_t before = gate_.fetch_add(delta, std::memory_order_acquire);
      if ((before & kBusy) == 0) return before;
      gate_.fetch_sub(delta, std::memory_order_relaxed);
      unsigned spins = 0;
      while ((gate_.load(std::memory_order_relaxed) & kBusy) != 0) pause(spins);
    }
  }
  // Close the gate (mutex_ held) and wait until no call is in flight; returns
  // the current count. Every counter is still until reopen().
  std::int64_t quiesce() noexcept {
    std::uint64_t g = gate_.fetch_or(kBusy, std::memory_order_acq_rel) | kBusy;
    unsigned spins = 0;
    while ((g & kInFlightMask) != 0) {
      pause(spins);
      g = gate_.load(std::memory_order_acquire);
    }
    return count(g);
  }
  void reopen() noexcept { gate_.fetch_and(~kBusy, std::memory_order_release); }

  // The figures of `level` given the current count and the running peak (the
  // set on top's, or a popped set's last).
  Statistics figures(const Level& level, std::int64_t current_count, std::int64_t peak_bytes,
                     std::int64_t peak_count) const noexcept {
    Statistics s;
    s.current_bytes = clamped(current_bytes_.load(std::memory_order_relaxed) - level.base_current_bytes);
    s.current_count = clamped(current_count - level.base_current_count);
    s.total_bytes = clamped(total_bytes_.load(std::memory_order_relaxed) - level.base_total_bytes);
    s.total_count = clamped(total_count_.load(std::memory_order_relaxed) - level.base_total_count);
    s.peak_bytes = clamped(peak_bytes - level.base_current_bytes);
    s.peak_count = clamped(peak_count - level.base_current_count);
    return s;
  }

  // What allocate and deallocate move, cumulative since the adaptor was made.
  alignas(64) std::atomic<std::uint64_t> gate_{0};  // current count | in flight | busy (above)
  std::atomic<std::int64_t> current_bytes_{0}, total_bytes_{0}, total_count_{0};
  std::atomic<std::int64_t> peak_bytes_{0}, peak_count_{0};  // the running peak of the set on top
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
