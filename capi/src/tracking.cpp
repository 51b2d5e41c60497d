// C glue of the tracking adaptor (tether/tracking.h).
#include <algorithm>
#include <cstring>

#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/tracking.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_tracking_adaptor_create(tether_resource_t* upstream,
                                                          const tether_tracking_options_t* options,
                                                          tether_resource_t** out) {
  return create_over_upstream(
      "tether_tracking_adaptor_create", upstream, options, kTrackingDefaults, "tracking", out,
      [&](const core::ResourcePtr& upstream_core, const tether_tracking_options_t& o) {
        return core::make_tracking_adaptor(upstream_core, o.capture_stacks != 0);
      });
}

TETHER_API tether_status_t tether_tracking_adaptor_get_outstanding(tether_resource_t* resource,
                                                                   tether_tracking_record_t* records,
                                                                   size_t capacity, size_t* out_count) {
  return guard("tether_tracking_adaptor_get_outstanding", [&] {
    require_out(out_count, "out_count");
    if (records == nullptr && capacity > 0) core::throw_invalid_argument("records must not be NULL when capacity > 0");
    std::uint32_t stride = 0;
    if (capacity > 0) {
      stride = records[0].struct_size;
      check_struct_size<tether_tracking_record_t>(stride, "records[0]");
    }
    ResourceRef r(resource);
    const std::vector<core::TrackingRecord> all = core::tracking_outstanding(*r->core);
    const std::size_t n = std::min(all.size(), capacity);
    auto* base = reinterpret_cast<unsigned char*>(records);
    for (std::size_t i = 0; i < n; ++i) {
      const core::TrackingRecord& t = all[i];
      tether_tracking_record_t c = TETHER_TRACKING_RECORD_INIT;
      c.ptr = t.ptr;
      c.size = t.size;
      c.alignment = t.alignment;
      c.stream = t.stream;
      c.thread_id = t.thread_id;
      c.sequence = t.sequence;
      c.stack_depth = static_cast<std::uint32_t>(t.frames.size());
      unsigned char* dst = base + i * stride;
      std::memset(dst, 0, stride);  // fields of newer layouts we do not know: zero
      std::memcpy(dst, &c, sizeof c);
      reinterpret_cast<tether_tracking_record_t*>(dst)->struct_size = stride;
    }
    *out_count = all.size();
  });
}

TETHER_API tether_status_t tether_tracking_adaptor_get_stack(tether_resource_t* resource, const void* ptr,
                                                             char* buffer, size_t capacity, size_t* out_needed) {
  return guard("tether_tracking_adaptor_get_stack", [&] {
    require_out(out_needed, "out_needed");
    ResourceRef r(resource);
    const std::vector<core::TrackingRecord> all = core::tracking_outstanding(*r->core);
    auto it = std::find_if(all.begin(), all.end(), [&](const core::TrackingRecord& t) { return t.ptr == ptr; });
    if (it == all.end()) core::throw_invalid_argument("ptr is not an outstanding allocation of this tracking adaptor");
    write_text(core::tracking_stack_text(it->frames), buffer, capacity, out_needed);
  });
}

TETHER_API tether_status_t tether_tracking_adaptor_report(tether_resource_t* resource, char* buffer,
                                                          size_t capacity, size_t* out_needed) {
  return guard("tether_tracking_adaptor_report", [&] {
    require_out(out_needed, "out_needed");
    ResourceRef r(resource);
    write_text(core::tracking_report(*r->core), buffer, capacity, out_needed);
  });
}

}  // extern "C"
