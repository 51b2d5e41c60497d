// The resource conformance suite over the C ABI: one set of checks
// (conformance.cpp) that every tether resource and adaptor must pass, run over
// one list of resource configurations (factories.cpp).
//
// Adding a resource (or a new configuration of one) = adding ONE entry to the
// list in factories.cpp; nothing else changes. See the top of factories.cpp for
// the entry format and the helpers that build stacks (pool(host()), ...).
//
// Everything here goes through the public C ABI (tether/tether.h): what a C,
// C++ or Python user of the library relies on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tether/tether.h"

namespace tether_conformance {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

// An owned resource reference (+1); released when it goes out of scope.
struct Release {
  void operator()(tether_resource_t* r) const noexcept { (void)tether_resource_release(r); }
};
using Handle = std::unique_ptr<tether_resource_t, Release>;

// What a configuration needs to run. Entries needing a GPU are skipped, with
// the reason, where no CUDA device is usable (their ctest entries carry the
// label `gpu`).
enum class Needs { host, gpu };

// Bits of Factory::traits.
enum Trait : unsigned {
  kNoTraits = 0,
  // Two resources made by this factory accept each other's allocations (raw
  // CUDA resources of one kind and device share one allocation table, see
  // tether_resource_deallocate()): the "twin's memory" free check is skipped.
  kTwinsShareFrees = 1u << 0,
};

// Whether a resource of this kind keeps upstream memory after its callers
// freed everything, until trim() or its destruction: pools, arenas, binning
// and fixed-size resources. A stack caches upstream memory when any of its
// links does, so an adaptor inherits the trait from its upstream and no list
// entry states it. Such stacks are trimmed before the fixture's last balance
// check; every other stack must balance without a trim. The registry of
// kinds decides it ("caches" in capi/kinds.json), for this suite and the Python one.
inline bool caches_upstream_memory(uint32_t kind) {
  // The kinds marked "caches" in the registry, capi/kinds.json (ci/gen_kinds.py writes the list).
  for (const uint32_t k : {
#include "caching_kinds.inc"
       })
    if (k == kind) return true;
  return false;
}

struct Factory {
  // Letters, digits and '_' only (it becomes part of the test name).
  std::string name;
  // Builds the resource; throws std::runtime_error (with the tether message)
  // on failure. Intermediate handles are released by the helpers, so the
  // result is the only caller reference: every stack is built "upstream
  // released before the adaptor".
  std::function<Handle()> make;
  Needs needs = Needs::host;
  // The largest total number of bytes the configuration can hold at once
  // (e.g. a pool's maximum_size); 0 = no stated limit. Sizes and alignments it
  // cannot serve are skipped (and logged); a request above it must fail with
  // OUT_OF_MEMORY and leave the resource unchanged.
  std::size_t capacity = 0;
  unsigned traits = kNoTraits;
  // The largest single request it serves (a fixed-size resource's block), 0 = no
  // such limit: larger sizes are skipped, and a request above it must be OUT_OF_MEMORY.
  std::size_t max_request = 0;
};

// The list (factories.cpp).
const std::vector<Factory>& all_factories();

// What create() throws when the call returns TETHER_ERROR_NOT_SUPPORTED: this
// machine lacks what the configuration needs (a GPU without pageable memory
// access for system, a driver before CUDA 13 for managed_async). A GPU entry
// is then skipped with the message as the reason, not failed.
struct NotSupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Calls a tether_*_create function: `call(&out)` must return its status.
// Throws std::runtime_error naming `what` and the tether message on failure
// (NotSupported for TETHER_ERROR_NOT_SUPPORTED).
Handle create(const char* what, const std::function<tether_status_t(tether_resource_t**)>& call);

// Builders used by the list (factories.cpp). Each takes its upstream by value
// and releases it once the new resource retains it.
Handle host();
Handle pool(Handle upstream, std::size_t initial_size = 0, std::size_t maximum_size = 0,
            std::size_t growth_size = 0);
Handle statistics(Handle upstream);
Handle cuda(int device = 0);
Handle async(int device = 0, bool use_default_pool = false, std::size_t initial_pool_size = 0,
             std::size_t maximum_pool_size = 0);
Handle managed(int device = 0);
Handle pinned_host(int device = 0);

// "" if CUDA device 0 is usable, else why not (the skip reason).
std::string gpu_skip_reason();

inline void PrintTo(const Factory& f, std::ostream* os) { *os << f.name; }

}  // namespace tether_conformance
