// The binning resource's C entry points (tether/binning.h).
#include <vector>

#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/binning.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_binning_resource_create(tether_resource_t* upstream,
                                                          const tether_binning_options_t* options,
                                                          tether_resource_t** out) {
  return create_over_upstream(
      "tether_binning_resource_create", upstream, options, kBinningDefaults, "binning", out,
      [&](const core::ResourcePtr& upstream_core, const tether_binning_options_t& o) {
        core::BinningOptions bo;
        bo.min_size_exponent = o.min_size_exponent;
        bo.max_size_exponent = o.max_size_exponent;
        bo.blocks_to_preallocate = o.blocks_to_preallocate;
        core::ResourcePtr fallback;
        if (o.fallback != nullptr) {
          ResourceRef fb(o.fallback);  // the core resource keeps the fallback alive
          fallback = fb->core;
        }
        return core::make_binning_resource(upstream_core, std::move(fallback), bo);
      });
}

TETHER_API tether_status_t tether_binning_resource_add_bin(tether_resource_t* resource, size_t size,
                                                           tether_resource_t* bin_resource) {
  return guard("tether_binning_resource_add_bin", [&] {
    ResourceRef r(resource);
    core::ResourcePtr bin;
    if (bin_resource != nullptr) {
      ResourceRef b(bin_resource);  // the core resource keeps the bin alive
      if (b->core == r->core) core::throw_invalid_argument("bin_resource must not be the binning resource itself");
      bin = b->core;
    }
    core::binning_add_bin(*r->core, size, std::move(bin));
    // What tether_resource_get_spec() writes: a new fixed-size bin is bins='...';
    // a bin given as a resource cannot be named in a spec.
    std::lock_guard<std::mutex> lock(r->spec_mutex);
    if (bin_resource != nullptr)
      r->spec_refusal = "a binning resource with a bin given as a resource (add_bin with a resource) "
                        "cannot be named in a spec";
    else
      r->spec_bins.push_back(size);
  });
}

TETHER_API tether_status_t tether_binning_get_info(tether_resource_t* resource, tether_binning_info_t* out) {
  return guard("tether_binning_get_info", [&] {
    ResourceRef r(resource);
    const core::BinningInfo i = core::binning_info(*r->core);
    tether_binning_info_t c = TETHER_BINNING_INFO_INIT;
    c.bin_count = i.bin_count;
    c.smallest_bin = i.smallest_bin;
    c.largest_bin = i.largest_bin;
    write_info(out, c, "out");
  });
}

TETHER_API tether_status_t tether_binning_get_bin_sizes(tether_resource_t* resource, size_t* sizes,
                                                        size_t capacity, size_t* count) {
  return guard("tether_binning_get_bin_sizes", [&] {
    require_out(count, "count");
    if (sizes == nullptr && capacity != 0) core::throw_invalid_argument("sizes must not be NULL when capacity is not 0");
    ResourceRef r(resource);
    const std::vector<std::size_t> s = core::binning_bin_sizes(*r->core);
    for (std::size_t i = 0; i < s.size() && i < capacity; ++i) sizes[i] = s[i];
    *count = s.size();
  });
}

}  // extern "C"
