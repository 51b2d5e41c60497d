// C glue of tether/statistics.h: creation and counters of the statistics adaptor.
#include "internal.hpp"
#include "tether_core/statistics.hpp"

using namespace tether;
using namespace tether::capi;

namespace {
// The C struct of a core statistics snapshot (get_statistics and pop_counters).
tether_statistics_t to_c(const core::Statistics& s) noexcept {
  tether_statistics_t c = TETHER_STATISTICS_INIT;
  c.current_bytes = s.current_bytes;
  c.peak_bytes = s.peak_bytes;
  c.total_bytes = s.total_bytes;
  c.current_count = s.current_count;
  c.peak_count = s.peak_count;
  c.total_count = s.total_count;
  return c;
}
}  // namespace

extern "C" {

TETHER_API tether_status_t tether_statistics_adaptor_create(tether_resource_t* upstream,
                                                            tether_resource_t** out) {
  return create_over_upstream("tether_statistics_adaptor_create", upstream, out,
                              [](const core::ResourcePtr& upstream_core) { return core::make_statistics_adaptor(upstream_core); });
}

TETHER_API tether_status_t tether_resource_get_statistics(tether_resource_t* resource,
                                                          tether_statistics_t* out) {
  return guard("tether_resource_get_statistics", [&] {
    ResourceRef r(resource);
    const core::Statistics s = core::statistics_of(*r->core);
    write_info(out, to_c(s), "out");
  });
}

TETHER_API tether_status_t tether_resource_reset_peak_statistics(tether_resource_t* resource) {
  return guard("tether_resource_reset_peak_statistics", [&] {
    ResourceRef r(resource);
    core::reset_peak_statistics(*r->core);
  });
}

TETHER_API tether_status_t tether_statistics_adaptor_push_counters(tether_resource_t* resource) {
  return guard("tether_statistics_adaptor_push_counters", [&] {
    ResourceRef r(resource);
    core::push_statistics_counters(*r->core);
  });
}

TETHER_API tether_status_t tether_statistics_adaptor_pop_counters(tether_resource_t* resource,
                                                                  tether_statistics_t* out) {
  return guard("tether_statistics_adaptor_pop_counters", [&] {
    if (out != nullptr) check_struct_size<tether_statistics_t>(out->struct_size, "out");
    ResourceRef r(resource);
    const core::Statistics s = core::pop_statistics_counters(*r->core);
    if (out == nullptr) return;
    write_info(out, to_c(s), "out");
  });
}

}  // extern "C"
