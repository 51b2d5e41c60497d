// C glue of tether/statistics.h: creation and counters of the statistics adaptor.
#include "internal.hpp"
#include "tether_core/statistics.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_statistics_adaptor_create(tether_resource_t* upstream,
                                                            tether_resource_t** out) {
  return guard("tether_statistics_adaptor_create", [&] {
    require_out(out);
    *out = nullptr;
    ResourceRef up(upstream);
    *out = make_resource_handle(core::make_statistics_adaptor(up->core), upstream);
  });
}

TETHER_API tether_status_t tether_resource_get_statistics(tether_resource_t* resource,
                                                          tether_statistics_t* out) {
  return guard("tether_resource_get_statistics", [&] {
    ResourceRef r(resource);
    const core::Statistics s = core::statistics_of(*r->core);
    tether_statistics_t c = TETHER_STATISTICS_INIT;
    c.current_bytes = s.current_bytes;
    c.peak_bytes = s.peak_bytes;
    c.total_bytes = s.total_bytes;
    c.current_count = s.current_count;
    c.peak_count = s.peak_count;
    c.total_count = s.total_count;
    write_info(out, c, "out");
  });
}

TETHER_API tether_status_t tether_resource_reset_peak_statistics(tether_resource_t* resource) {
  return guard("tether_resource_reset_peak_statistics", [&] {
    ResourceRef r(resource);
    core::reset_peak_statistics(*r->core);
  });
}

}  // extern "C"
