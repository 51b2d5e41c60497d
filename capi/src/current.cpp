// The process-wide current-resource table (one per process, inside libtether).
#include <string>

#include "internal.hpp"
#include "spec.hpp"
#include "tether_internal.h"
#include "tether_core/cuda.hpp"
#include "tether_core/current_table.hpp"
#include "tether_core/host.hpp"

namespace tether::capi {
namespace {

using Table = core::CurrentTable<HandleRef>;

HandleRef make_default(int slot) {
  // A spec in the environment (TETHER_RESOURCE_HOST / _<N> / TETHER_RESOURCE)
  // names the default; it is read here, at the slot's first get, never at load.
  if (HandleRef from_env = spec::default_from_environment(slot == Table::kHostSlot ? -1 : slot)) return from_env;
  if (slot == Table::kHostSlot) return HandleRef::adopt(make_resource_handle(core::make_host_resource(), nullptr));
  return HandleRef::adopt(
      make_resource_handle(core::cuda::make_cuda_resource(slot), nullptr, "device=" + std::to_string(slot)));
}

Table& table() {
  // Never destroyed: a static destructor must not release CUDA resources after
  // exit has begun, and late releases from other libraries must still work.
  static Table* t = new Table(make_default);
  return *t;
}

}  // namespace

void check_usable(const core::Properties& p, int slot) {
  if (slot == Table::kHostSlot) {
    if (!p.host_accessible)
      core::throw_invalid_argument("the host slot needs a host-accessible resource (this one gives device memory)");
    return;
  }
  if (!p.device_accessible)
    core::throw_invalid_argument("device " + std::to_string(slot) +
                                 "'s slot needs a device-accessible resource (this one gives host-only memory)");
  const bool any_device = p.device == TETHER_DEVICE_HOST || p.kind == TETHER_RESOURCE_KIND_MANAGED;
  if (!any_device && p.device != slot)
    core::throw_invalid_argument("the resource's memory is on device " + std::to_string(p.device) +
                                 ", not device " + std::to_string(slot));
}

namespace {
// +1 on `resource` after checking its memory suits `slot` (what set, set_if_unset and push install).
HandleRef usable_reference(tether_resource_t* resource, int slot) {
  ResourceRef r(resource);
  check_usable(r->core->properties(), slot);
  return retained(r);
}
}  // namespace

int resolve_device(int device) {
  if (device == TETHER_DEVICE_HOST) return Table::kHostSlot;
  if (device == TETHER_DEVICE_CURRENT) return core::cuda::current_device();
  if (device < 0 || device >= Table::kMaxDevices)
    core::throw_invalid_argument("invalid device id " + std::to_string(device) +
                                 ": use a CUDA device id, TETHER_DEVICE_HOST (-1) or TETHER_DEVICE_CURRENT (-2)");
  core::cuda::check_device(device);
  return device;
}

HandleRef current_resource(int device) {
  const int slot = resolve_device(device);
  HandleRef r = table().get(slot);
  // get() copies the slot's reference; the copy is empty only if the slot's
  // handle is dead: a caller released the table's reference as its own (one
  // release too many). Never hand that value out as live.
  if (!r)
    throw core::Error(TETHER_ERROR_INVALID_HANDLE,
                      "the current resource's handle was released while installed (released once too often by a "
                      "caller); install a live resource with tether_current_resource_set");
  return r;
}

namespace {
// The table's previous reference, or an empty one if its handle died under
// the table (released once too often by a caller): never returned as owned.
HandleRef live_or_empty(HandleRef previous) noexcept {
  if (!previous) return previous;
  HandleRef copy = previous;  // empty if the handle is dead
  if (!copy) (void)previous.release();  // nothing to drop: the reference is gone
  return copy;
}
}  // namespace

}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_current_resource_get(int device, tether_resource_t** out) {
  return guard("tether_current_resource_get", [&] {
    require_out(out);
    *out = nullptr;
    *out = current_resource(device).release();
  });
}

// The quick path (tether_internal.h): what tether_current_resource_get does
// once the slot has a value and nobody holds its mutex. Refused for anything
// else - an unset slot (its default is made under the mutex, with CUDA
// calls), a held mutex, a bad device, a dead handle - with nothing recorded;
// the public call then does the work and reports the error.
TETHER_API int tether_internal_current_resource_get_quick(int device, tether_resource_t** out) {
  if (out == nullptr) return TETHER_QUICK_REFUSED;
  try {
    HandleRef r;
    if (!table().try_get(resolve_device(device), r) || !r) return TETHER_QUICK_REFUSED;
    *out = r.release();
    return TETHER_QUICK_DONE;
  } catch (...) {
    return TETHER_QUICK_REFUSED;
  }
}

TETHER_API tether_status_t tether_current_resource_set(int device, tether_resource_t* resource,
                                                       tether_resource_t** out_previous) {
  return guard("tether_current_resource_set", [&] {
    if (out_previous != nullptr) *out_previous = nullptr;
    const int slot = resolve_device(device);
    HandleRef next;
    if (resource != nullptr) next = usable_reference(resource, slot);
    HandleRef previous = live_or_empty(table().set(slot, std::move(next)));
    if (out_previous != nullptr) *out_previous = previous.release();
  });
}

TETHER_API tether_status_t tether_current_resource_lock(int device) {
  return guard("tether_current_resource_lock", [&] { table().lock(resolve_device(device)); });
}

TETHER_API tether_status_t tether_current_resource_is_locked(int device, int* out) {
  return guard("tether_current_resource_is_locked", [&] {
    require_out(out);
    *out = table().is_locked(resolve_device(device)) ? 1 : 0;
  });
}

TETHER_API tether_status_t tether_current_resource_set_if_unset(int device, tether_resource_t* resource,
                                                                int* out_installed) {
  return guard("tether_current_resource_set_if_unset", [&] {
    if (out_installed != nullptr) *out_installed = 0;
    if (resource == nullptr)
      core::throw_invalid_argument("resource must not be NULL (to make a slot unset, use tether_current_resource_set(device, NULL, ...))");
    const int slot = resolve_device(device);
    HandleRef next = usable_reference(resource, slot);
    const bool installed = table().set_if_unset(slot, std::move(next));
    if (out_installed != nullptr) *out_installed = installed ? 1 : 0;
  });
}

TETHER_API tether_status_t tether_current_resource_push(int device, tether_resource_t* resource) {
  return guard("tether_current_resource_push", [&] {
    if (resource == nullptr)
      core::throw_invalid_argument("resource must not be NULL (tether_current_resource_pop ends an override)");
    const int slot = resolve_device(device);
    HandleRef next = usable_reference(resource, slot);
    table().push(slot, std::move(next));
  });
}

TETHER_API tether_status_t tether_current_resource_pop(int device) {
  return guard("tether_current_resource_pop", [&] {
    HandleRef popped = table().pop(resolve_device(device));
    (void)popped;  // the stack's reference, released here
  });
}

}  // extern "C"
