// C glue of the prefetch adaptor (tether/prefetch.h).
#include "internal.hpp"
#include "tether_core/prefetch.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_prefetch_adaptor_create(tether_resource_t* upstream, tether_resource_t** out) {
  return create_over_upstream("tether_prefetch_adaptor_create", upstream, out,
                              [](const core::ResourcePtr& upstream_core) { return core::make_prefetch_adaptor(upstream_core); });
}

}  // extern "C"
