// StatisticsAdaptor: forwards to its upstream and counts what succeeded.
// Only what came through the adaptor may be freed through it, and what came
// through it may not be freed around it (see do_allocate_for below).
// Counters are independent relaxed atomics: each is exact, but a snapshot
// taken while other threads allocate may mix values from different instants.
#include "tether_core/statistics.hpp"

#include <atomic>
#include <string>
#include <utility>

namespace tether::core {

namespace {

Properties adapted(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("statistics adaptor: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_STATISTICS;
  return p;
}

// Raise `peak` to at least `value`.
void raise_peak(std::atomic<std::uint64_t>& peak, std::uint64_t value) noexcept {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (seen < value && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

class StatisticsAdaptor final : public Resource {
 public:
  explicit StatisticsAdaptor(ResourcePtr upstream)
      : Resource(adapted(upstream)), upstream_(std::move(upstream)) {}

  const char* name() const noexcept override { return "statistics"; }
  void trim() override { upstream_->trim(); }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  // A pool over this adaptor must stay stream-ordered if the upstream is.
  StreamOrder* stream_order() noexcept override { return upstream_->stream_order(); }

  Statistics snapshot() const noexcept {
    Statistics s;
    s.current_bytes = current_bytes_.load(std::memory_order_relaxed);
    s.peak_bytes = peak_bytes_.load(std::memory_order_relaxed);
    s.total_bytes = total_bytes_.load(std::memory_order_relaxed);
    s.current_count = current_count_.load(std::memory_order_relaxed);
    s.peak_count = peak_count_.load(std::memory_order_relaxed);
    s.total_count = total_count_.load(std::memory_order_relaxed);
    return s;
  }

  void reset_peak() noexcept {
    peak_bytes_.store(current_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    peak_count_.store(current_count_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  // The adaptor keeps no table of its own: it takes memory from upstream in
  // the name of whoever asked it (itself for a caller, else the dependent
  // that asked), so the upstream's records say which allocations came
  // through this adaptor. A free of anything else - upstream memory taken
  // directly, another adaptor's, a dependent's chunk - is refused by the
  // upstream before any counter here moves.
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = upstream_->allocate_for(tag(owner), bytes, alignment, stream);  // counts nothing if this throws
    raise_peak(peak_bytes_, current_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    raise_peak(peak_count_, current_count_.fetch_add(1, std::memory_order_relaxed) + 1);
    total_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    total_count_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    upstream_->deallocate_for(tag(owner), ptr, bytes, alignment, stream);  // a rejected free changes nothing
    current_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    current_count_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  owner_t tag(owner_t owner) const noexcept { return owner == kCaller ? id() : owner; }

  ResourcePtr upstream_;
  std::atomic<std::uint64_t> current_bytes_{0}, peak_bytes_{0}, total_bytes_{0};
  std::atomic<std::uint64_t> current_count_{0}, peak_count_{0}, total_count_{0};
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

}  // namespace tether::core
