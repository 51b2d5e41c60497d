// BinningResource: size classes routed to bin resources, larger requests to
// a fallback. A request goes to the smallest bin at least its size that
// can honour its alignment (a fixed-size bin: up to its blocks' alignment).
//
// The bins form an immutable sorted list published through one atomic
// pointer: allocate/deallocate read it without a lock; add_bin builds a new
// list under a mutex and keeps the old ones until the resource dies (bins
// are added a handful of times, so that costs nothing). A free is routed the
// way its size is routed now; if the bins changed since the allocation and
// that resource refuses the pointer, the other resources that could have
// served that size are asked in turn (each refuses a foreign pointer with
// nothing changed), so adding bins never strands an allocation.
#include "tether_core/binning.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tether_core/fixed_size.hpp"

namespace tether::core {

namespace {

struct Bin {
  std::size_t size;
  ResourcePtr resource;
  std::size_t max_alignment;  // a fixed-size bin's block alignment; any other bin: every alignment
};
using BinList = std::vector<Bin>;

Properties binning_properties(const ResourcePtr& upstream) {
  if (!upstream) throw_invalid_argument("binning: upstream must not be null");
  Properties p = upstream->properties();
  p.kind = TETHER_RESOURCE_KIND_BINNING;
  return p;
}

void check_compatible(const Resource& upstream, const Resource& other, const char* what) {
  const Properties& a = upstream.properties();
  const Properties& b = other.properties();
  if (a.device != b.device || a.device_accessible != b.device_accessible || a.host_accessible != b.host_accessible)
    throw_invalid_argument(std::string("binning: ") + what + " '" + other.name() +
                           "' hands out memory of another kind than the upstream '" + upstream.name() +
                           "' (device or accessibility differ)");
}

class BinningResource final : public Resource {
 public:
  BinningResource(ResourcePtr upstream, ResourcePtr fallback, const BinningOptions& o)
      : Resource(binning_properties(upstream)),
        upstream_(std::move(upstream)),
        fallback_(fallback ? std::move(fallback) : upstream_),
        blocks_to_preallocate_(o.blocks_to_preallocate) {
    check_compatible(*upstream_, *fallback_, "fallback");
    if (o.min_size_exponent != 0 || o.max_size_exponent != 0) {
      if (o.min_size_exponent > o.max_size_exponent || o.max_size_exponent > 40)
        throw_invalid_argument("binning: size exponents must satisfy min_size_exponent (" +
                               std::to_string(o.min_size_exponent) + ") <= max_size_exponent (" +
                               std::to_string(o.max_size_exponent) + ") <= 40");
      for (unsigned e = o.min_size_exponent; e <= o.max_size_exponent; ++e) add_bin(std::size_t{1} << e, nullptr);
    }
    if (lists_.empty()) publish(std::make_unique<BinList>());
  }

  const char* name() const noexcept override { return "binning"; }
  const std::shared_ptr<Resource>* upstream() const noexcept override { return &upstream_; }
  StreamOrder* stream_order() noexcept override { return upstream_->stream_order(); }

  void trim() override {
    for (const Bin& b : *bins()) b.resource->trim();
    fallback_->trim();
    if (fallback_ != upstream_) upstream_->trim();
  }

  void add_bin(std::size_t size, ResourcePtr bin) {
    if (size == 0) throw_invalid_argument("binning: bin size must be greater than 0");
    if (size > (std::size_t{1} << 40))
      throw_invalid_argument("binning: bin size " + std::to_string(size) + " is larger than 1 TiB");
    std::lock_guard<std::mutex> lock(mutex_);
    const BinList* now = lists_.empty() ? nullptr : lists_.back().get();
    if (now != nullptr)
      for (const Bin& b : *now)
        if (b.size == size) throw_invalid_argument("binning: a bin of size " + std::to_string(size) + " already exists");
    if (bin) {
      check_compatible(*upstream_, *bin, "bin resource");
    } else {
      FixedSizeOptions fo;
      fo.block_size = size;
      if (blocks_to_preallocate_ != 0) fo.blocks_to_preallocate = blocks_to_preallocate_;
      bin = make_fixed_size_resource(upstream_, fo);
    }
    auto next = std::make_unique<BinList>(now ? *now : BinList{});
    const std::size_t max_alignment = bin->properties().kind == TETHER_RESOURCE_KIND_FIXED_SIZE
                                          ? static_cast<std::size_t>(fixed_size_info(*bin).block_alignment)
                                          : kMaxAlignment;
    next->push_back(Bin{size, std::move(bin), max_alignment});
    std::sort(next->begin(), next->end(), [](const Bin& a, const Bin& b) { return a.size < b.size; });
    publish(std::move(next));
  }

  std::vector<std::size_t> sizes() const {
    std::vector<std::size_t> out;
    for (const Bin& b : *bins()) out.push_back(b.size);
    return out;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return route(bytes, alignment)->allocate_for(tag(owner), bytes, alignment, stream);
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    Resource* first = route(bytes, alignment);
    try {
      first->deallocate_for(tag(owner), ptr, bytes, alignment, stream);
      return;
    } catch (const Error& e) {
      if (e.status() != TETHER_ERROR_INVALID_ARGUMENT) throw;
      // Served before a smaller bin was added? Ask the others that could have served it.
      for (const Bin& b : *bins()) {
        if (b.size < bytes || b.resource.get() == first) continue;
        if (try_free(*b.resource, owner, ptr, bytes, alignment, stream)) return;
      }
      if (fallback_.get() != first && try_free(*fallback_, owner, ptr, bytes, alignment, stream)) return;
      throw;
    }
  }

 private:
  const BinList* bins() const noexcept { return current_.load(std::memory_order_acquire); }

  // The smallest bin of at least `bytes` that honours `alignment`, else the fallback.
  Resource* route(std::size_t bytes, std::size_t alignment) const noexcept {
    const BinList& list = *bins();
    auto it = std::lower_bound(list.begin(), list.end(), bytes, [](const Bin& b, std::size_t n) { return b.size < n; });
    while (it != list.end() && it->max_alignment < alignment) ++it;
    return it == list.end() ? fallback_.get() : it->resource.get();
  }

  bool try_free(Resource& r, owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
    try {
      r.deallocate_for(tag(owner), ptr, bytes, alignment, stream);
      return true;
    } catch (const Error& e) {
      if (e.status() != TETHER_ERROR_INVALID_ARGUMENT) throw;
      return false;
    }
  }

  void publish(std::unique_ptr<BinList> list) {
    current_.store(list.get(), std::memory_order_release);
    lists_.push_back(std::move(list));
  }

  owner_t tag(owner_t owner) const noexcept { return owner == kCaller ? id() : owner; }

  const ResourcePtr upstream_;
  const ResourcePtr fallback_;
  const std::size_t blocks_to_preallocate_;
  std::mutex mutex_;                               // add_bin
  std::vector<std::unique_ptr<BinList>> lists_;    // every list ever published (readers may hold old ones)
  std::atomic<const BinList*> current_{nullptr};
};

BinningResource& as_binning(const Resource& r) {
  auto* b = dynamic_cast<const BinningResource*>(&r);
  if (b == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a binning resource");
  return const_cast<BinningResource&>(*b);
}

}  // namespace

ResourcePtr make_binning_resource(ResourcePtr upstream, ResourcePtr fallback, const BinningOptions& options) {
  return std::make_shared<BinningResource>(std::move(upstream), std::move(fallback), options);
}

void binning_add_bin(Resource& r, std::size_t size, ResourcePtr bin) { as_binning(r).add_bin(size, std::move(bin)); }

std::vector<std::size_t> binning_bin_sizes(const Resource& r) { return as_binning(r).sizes(); }

BinningInfo binning_info(const Resource& r) {
  const std::vector<std::size_t> s = as_binning(r).sizes();
  BinningInfo i;
  i.bin_count = s.size();
  if (!s.empty()) {
    i.smallest_bin = s.front();
    i.largest_bin = s.back();
  }
  return i;
}

}  // namespace tether::core
