// C glue of the prefetch adaptor (tether/prefetch.h).
#include "internal.hpp"
#include "tether_core/prefetch.hpp"

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_prefetch_adaptor_create(tether_resource_t* upstream, tether_resource_t** out) {
  return guard("tether_prefetch_adaptor_create", [&] {
    require_out(out);
    *out = nullptr;
    ResourceRef up(upstream);
    *out = make_resource_handle(core::make_prefetch_adaptor(up->core), upstream);
  });
}

}  // extern "C"
