// The conformance suite's list of resource configurations: every resource and
// adaptor tether has, alone and stacked. The checks are in conformance.cpp.
//
// HOW TO ADD A RESOURCE: add one entry to the list in all_factories() below:
//
//   {"name", [] { return <build it>; }, Needs::host|Needs::gpu, capacity, traits},
//
//   name      letters, digits, '_' (it becomes the test's name: Host/Conformance.Sizes/name).
//   build     a Handle; the builders below stack resources: pool(host()), statistics(cuda()).
//             For a new type call its C creator through create():
//               [] { auto up = host();
//                    tether_limiting_options_t o = TETHER_LIMITING_OPTIONS_INIT;
//                    o.limit = 64 * MiB;
//                    return create("limiting", [&](tether_resource_t** out) {
//                      return tether_limiting_adaptor_create(up.get(), &o, out); }); }
//             (the local `up` is released when the lambda returns; the adaptor retains it).
//   needs     Needs::host runs everywhere; Needs::gpu is skipped with the reason without a
//             CUDA device (ctest label gpu) - list every GPU configuration unconditionally.
//   capacity  bytes it can hold at once if bounded (a pool's maximum_size, a limit), else 0:
//             larger sizes are skipped and a request above it must be OUT_OF_MEMORY.
//   traits    kNoTraits, or kTwinsShareFrees if two instances accept each other's frees.
//             Whether the stack caches upstream memory (and is trimmed before the last
//             balance check) is not stated here: it follows from the kinds in the stack
//             (caches_upstream_memory(): a caching kind says "caches": true in capi/kinds.json).
//   max_request  (optional) the largest single request it serves (a fixed-size block), else 0.
//
// A configuration that is one spec can instead be stated in the registry, next to its kind:
// "conformance": [{"name": ..., "spec": ..., "twins_share_frees": true}] in capi/kinds.json
// (ci/gen_kinds.py writes registry_factories.inc; with_registry_entries() builds them from the spec).
//
// Entries in the Host group run in every CI job (Release, ASan+UBSan, TSan); entries in
// the Gpu group run on a GPU machine (ci/gpu.sh). Nothing else needs editing: not
// CMake, not the checks.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "conformance.hpp"

namespace tether_conformance {

Handle create(const char* what, const std::function<tether_status_t(tether_resource_t**)>& call) {
  tether_resource_t* out = nullptr;
  const tether_status_t s = call(&out);
  if (s != TETHER_OK) {
    const std::string m =
        std::string("creating ") + what + " failed: " + tether_status_name(s) + ": " + tether_last_error_message();
    if (s == TETHER_ERROR_NOT_SUPPORTED) throw NotSupported(m);
    throw std::runtime_error(m);
  }
  if (out == nullptr) throw std::runtime_error(std::string("creating ") + what + " gave NULL");
  return Handle(out);
}

Handle host() {
  return create("host", [](tether_resource_t** out) { return tether_host_resource_create(out); });
}

Handle pool(Handle upstream, std::size_t initial_size, std::size_t maximum_size, std::size_t growth_size) {
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.initial_size = initial_size;
  o.maximum_size = maximum_size;
  o.growth_size = growth_size;
  return create("pool", [&](tether_resource_t** out) { return tether_pool_resource_create(upstream.get(), &o, out); });
}

Handle statistics(Handle upstream) {
  return create("statistics",
                [&](tether_resource_t** out) { return tether_statistics_adaptor_create(upstream.get(), out); });
}

Handle cuda(int device) {
  return create("cuda", [&](tether_resource_t** out) { return tether_cuda_resource_create(device, out); });
}

Handle async(int device, bool use_default_pool, std::size_t initial_pool_size, std::size_t maximum_pool_size) {
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  o.use_default_pool = use_default_pool ? 1 : 0;
  o.initial_pool_size = initial_pool_size;
  o.maximum_pool_size = maximum_pool_size;
  return create("async", [&](tether_resource_t** out) { return tether_async_resource_create(device, &o, out); });
}

Handle managed(int device) {
  return create("managed", [&](tether_resource_t** out) { return tether_managed_resource_create(device, out); });
}

Handle pinned_host(int device) {
  return create("pinned_host",
                [&](tether_resource_t** out) { return tether_pinned_host_resource_create(device, out); });
}

Handle limiting(Handle upstream, std::size_t limit) {
  tether_limiting_options_t o = TETHER_LIMITING_OPTIONS_INIT;
  o.limit = limit;
  return create("limiting",
                [&](tether_resource_t** out) { return tether_limiting_adaptor_create(upstream.get(), &o, out); });
}

Handle tracking(Handle upstream, bool capture_stacks) {
  tether_tracking_options_t o = TETHER_TRACKING_OPTIONS_INIT;
  o.capture_stacks = capture_stacks ? 1 : 0;
  return create("tracking",
                [&](tether_resource_t** out) { return tether_tracking_adaptor_create(upstream.get(), &o, out); });
}

Handle aligned(Handle upstream, std::size_t alignment, std::size_t threshold) {
  tether_aligned_options_t o = TETHER_ALIGNED_OPTIONS_INIT;
  o.alignment = alignment;
  o.threshold = threshold;
  return create("aligned",
                [&](tether_resource_t** out) { return tether_aligned_adaptor_create(upstream.get(), &o, out); });
}

Handle prefetch(Handle upstream) {
  return create("prefetch", [&](tether_resource_t** out) { return tether_prefetch_adaptor_create(upstream.get(), out); });
}

Handle arena(Handle upstream, std::size_t arena_size = 0, std::size_t superblock_size = 0) {
  tether_arena_options_t o = TETHER_ARENA_OPTIONS_INIT;
  o.arena_size = arena_size;
  o.superblock_size = superblock_size;
  return create("arena", [&](tether_resource_t** out) { return tether_arena_resource_create(upstream.get(), &o, out); });
}

Handle binning(Handle upstream, unsigned min_exponent, unsigned max_exponent, std::size_t blocks,
               tether_resource_t* fallback = nullptr) {
  tether_binning_options_t o = TETHER_BINNING_OPTIONS_INIT;
  o.min_size_exponent = min_exponent;
  o.max_size_exponent = max_exponent;
  o.blocks_to_preallocate = blocks;
  o.fallback = fallback;
  return create("binning",
                [&](tether_resource_t** out) { return tether_binning_resource_create(upstream.get(), &o, out); });
}

Handle fixed_size(Handle upstream, std::size_t block_size, std::size_t blocks) {
  tether_fixed_size_options_t o = TETHER_FIXED_SIZE_OPTIONS_INIT;
  o.block_size = block_size;
  o.blocks_to_preallocate = blocks;
  return create("fixed_size",
                [&](tether_resource_t** out) { return tether_fixed_size_resource_create(upstream.get(), &o, out); });
}

// A resource written in C: a vtable over aligned_alloc/free (what another language would write).
Handle callback_over_malloc() {
  tether_callback_vtable_t v = TETHER_CALLBACK_VTABLE_INIT;
  v.allocate = [](void*, size_t size, size_t alignment, tether_stream_t, void** out) -> tether_status_t {
    *out = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
    return *out ? TETHER_OK : TETHER_ERROR_OUT_OF_MEMORY;
  };
  v.deallocate = [](void*, void* ptr, size_t, size_t, tether_stream_t) -> tether_status_t {
    std::free(ptr);
    return TETHER_OK;
  };
  return create("callback",
                [&](tether_resource_t** out) { return tether_callback_resource_create(&v, nullptr, nullptr, out); });
}

Handle logging_to_nowhere(Handle upstream) {
  tether_logging_options_t o = TETHER_LOGGING_OPTIONS_INIT;
  o.callback = [](const char*, size_t, void*) {};
  return create("logging",
                [&](tether_resource_t** out) { return tether_logging_adaptor_create(upstream.get(), &o, out); });
}

Handle failure_callback_never_retrying(Handle upstream) {
  tether_failure_callback_options_t o = TETHER_FAILURE_CALLBACK_OPTIONS_INIT;
  o.callback = [](size_t, void*) { return 0; };
  return create("failure_callback", [&](tether_resource_t** out) {
    return tether_failure_callback_adaptor_create(upstream.get(), &o, out);
  });
}

// The entries the registry states (a kind's "conformance" in capi/kinds.json), each built from its spec.
struct RegistryEntry {
  const char* name;
  const char* spec;
  bool gpu;
  bool twins_share_frees;
  std::size_t capacity;
};
const RegistryEntry kRegistryEntries[] = {
#include "registry_factories.inc"
};

Handle from_spec(const char* spec) {
  return create(spec, [&](tether_resource_t** out) { return tether_resource_create_from_spec(spec, out); });
}

std::vector<Factory> with_registry_entries(std::vector<Factory> list) {
  for (const RegistryEntry& e : kRegistryEntries) {
    for (const Factory& f : list)
      if (f.name == e.name) throw std::logic_error(std::string("conformance entry ") + e.name + " is listed twice");
    const char* spec = e.spec;
    list.push_back(Factory{e.name, [spec] { return from_spec(spec); }, e.gpu ? Needs::gpu : Needs::host, e.capacity,
                           e.twins_share_frees ? kTwinsShareFrees : kNoTraits});
  }
  return list;
}

const std::vector<Factory>& all_factories() {
  static const std::vector<Factory> list = with_registry_entries({
      // ---- host ---------------------------------------------------------------------------
      {"host", [] { return host(); }, Needs::host},
      {"pool_host", [] { return pool(host()); }, Needs::host},
      {"pool_host_small_growth", [] { return pool(host(), 0, 0, 16 * KiB); }, Needs::host},
      {"pool_host_bounded", [] { return pool(host(), 4 * MiB, 96 * MiB); }, Needs::host, 96 * MiB},
      {"pool_pool_host", [] { return pool(pool(host())); }, Needs::host},
      {"pool_pool_host_bounded", [] { return pool(pool(host(), 0, 64 * MiB), 0, 0, 64 * KiB); }, Needs::host,
       64 * MiB},
      {"statistics_host", [] { return statistics(host()); }, Needs::host},
      {"statistics_pool_host", [] { return statistics(pool(host())); }, Needs::host},
      {"pool_statistics_host", [] { return pool(statistics(host())); }, Needs::host},
      {"statistics_statistics_host", [] { return statistics(statistics(host())); }, Needs::host},
      {"arena_host", [] { return arena(host()); }, Needs::host},
      {"arena_host_fixed", [] { return arena(host(), 64 * MiB); }, Needs::host, 64 * MiB},
      {"arena_host_small_superblocks", [] { return arena(host(), 0, 64 * KiB); }, Needs::host},
      {"arena_pool_host", [] { return arena(pool(host())); }, Needs::host},
      {"binning_host", [] { return binning(host(), 8, 16, 4); }, Needs::host},
      {"binning_no_bins_host", [] { return binning(host(), 0, 0, 4); }, Needs::host},
      {"binning_arena_fallback",
       [] {
         Handle up = host();
         Handle fallback = arena(host());
         return binning(std::move(up), 10, 14, 2, fallback.get());  // the binning resource retains it
       },
       Needs::host},
      // blocks of 8 MiB: a larger request is OUT_OF_MEMORY
      {"fixed_size_host", [] { return fixed_size(host(), 8 * MiB, 4); }, Needs::host, 0, kNoTraits, 8 * MiB},
      {"statistics_arena_host", [] { return statistics(arena(host())); }, Needs::host},
      // statistics under a caching resource: after trim it must have given everything back
      {"arena_statistics_host", [] { return arena(statistics(host())); }, Needs::host},
      {"binning_statistics_host", [] { return binning(statistics(host()), 8, 16, 4); }, Needs::host},
      {"fixed_size_statistics_host", [] { return fixed_size(statistics(host()), 8 * MiB, 4); }, Needs::host, 0,
       kNoTraits, 8 * MiB},
      {"callback_malloc", [] { return callback_over_malloc(); }, Needs::host},
      {"pool_callback_malloc", [] { return pool(callback_over_malloc()); }, Needs::host},
      {"logging_host", [] { return logging_to_nowhere(host()); }, Needs::host},
      {"logging_pool_host", [] { return logging_to_nowhere(pool(host())); }, Needs::host},
      {"failure_callback_host", [] { return failure_callback_never_retrying(host()); }, Needs::host},
      {"pool_failure_callback_host", [] { return pool(failure_callback_never_retrying(host())); }, Needs::host},
      {"limiting_host", [] { return limiting(host(), 256 * MiB); }, Needs::host, 256 * MiB},
      {"pool_limiting_host", [] { return pool(limiting(host(), 256 * MiB)); }, Needs::host, 256 * MiB},
      {"limiting_pool_host", [] { return limiting(pool(host()), 256 * MiB); }, Needs::host, 256 * MiB},
      {"tracking_host", [] { return tracking(host(), false); }, Needs::host},
      {"tracking_stacks_host", [] { return tracking(host(), true); }, Needs::host},
      {"pool_tracking_host", [] { return pool(tracking(host(), false)); }, Needs::host},
      // threshold above the 8 KiB allocation whose free with another alignment must be refused:
      // at or above it, every alignment up to `alignment` is one (docs/resources/aligned.rst)
      {"aligned_host", [] { return aligned(host(), 64 * KiB, 16 * KiB); }, Needs::host},
      {"aligned_pool_host", [] { return aligned(pool(host()), 4 * KiB, 16 * KiB); }, Needs::host},
      // ---- CUDA (skipped without a device) --------------------------------------------------
      {"cuda", [] { return cuda(); }, Needs::gpu, 0, kTwinsShareFrees},
      {"async_owned", [] { return async(); }, Needs::gpu, 0, kTwinsShareFrees},
      {"async_owned_bounded", [] { return async(0, false, 32 * MiB, 512 * MiB); }, Needs::gpu, 512 * MiB,
       kTwinsShareFrees},
      {"async_default_pool", [] { return async(0, true); }, Needs::gpu, 0, kTwinsShareFrees},
      {"managed", [] { return managed(); }, Needs::gpu, 0, kTwinsShareFrees},
      {"pinned_host", [] { return pinned_host(); }, Needs::gpu, 0, kTwinsShareFrees},
      {"pool_cuda", [] { return pool(cuda()); }, Needs::gpu},
      {"pool_cuda_bounded", [] { return pool(cuda(), 4 * MiB, 96 * MiB); }, Needs::gpu, 96 * MiB},
      {"pool_async", [] { return pool(async()); }, Needs::gpu},
      {"pool_async_default_pool", [] { return pool(async(0, true)); }, Needs::gpu},
      {"pool_managed", [] { return pool(managed()); }, Needs::gpu},
      {"pool_pinned_host", [] { return pool(pinned_host()); }, Needs::gpu},
      {"pool_pool_cuda", [] { return pool(pool(cuda())); }, Needs::gpu},
      {"statistics_cuda", [] { return statistics(cuda()); }, Needs::gpu},
      {"statistics_async", [] { return statistics(async()); }, Needs::gpu},
      {"statistics_managed", [] { return statistics(managed()); }, Needs::gpu},
      {"statistics_pool_cuda", [] { return statistics(pool(cuda())); }, Needs::gpu},
      {"pool_statistics_async", [] { return pool(statistics(async())); }, Needs::gpu},
      {"arena_cuda", [] { return arena(cuda()); }, Needs::gpu},
      {"arena_cuda_fixed", [] { return arena(cuda(), 256 * MiB); }, Needs::gpu, 256 * MiB},
      {"arena_async", [] { return arena(async()); }, Needs::gpu},
      {"binning_cuda", [] { return binning(cuda(), 8, 16, 8); }, Needs::gpu},
      {"binning_pool_cuda", [] { return binning(pool(cuda()), 8, 16, 8); }, Needs::gpu},
      {"logging_cuda", [] { return logging_to_nowhere(cuda()); }, Needs::gpu},
      {"failure_callback_cuda", [] { return failure_callback_never_retrying(cuda()); }, Needs::gpu},
      {"pool_logging_async", [] { return pool(logging_to_nowhere(async())); }, Needs::gpu},
      {"limiting_cuda", [] { return limiting(cuda(), 4 * GiB); }, Needs::gpu, 4 * GiB, kTwinsShareFrees},
      {"tracking_async", [] { return tracking(async(), false); }, Needs::gpu},
      {"aligned_cuda", [] { return aligned(cuda(), 64 * KiB, 16 * KiB); }, Needs::gpu},
      {"prefetch_managed", [] { return prefetch(managed()); }, Needs::gpu},
      {"pool_prefetch_managed", [] { return pool(prefetch(managed())); }, Needs::gpu},
      {"prefetch_pool_managed", [] { return prefetch(pool(managed())); }, Needs::gpu},
  });
  return list;
}

}  // namespace tether_conformance
