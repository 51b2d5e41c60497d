// Prefetch adaptor: forwards to an upstream of managed memory and, after each
// allocation, prefetches the memory to the upstream's device, ordered on the
// allocation's stream (cuMemPrefetchAsync), so the first kernel on that stream
// finds it resident instead of faulting it in page by page.
//
// The upstream must give managed memory: its properties say device memory
// (device >= 0) that is both device- and host-accessible (a managed resource,
// or a pool or adaptor over one). Anything else is INVALID_ARGUMENT at
// creation, naming the upstream. A device that cannot prefetch (no concurrent
// managed access) is NOT_SUPPORTED at creation. If the prefetch itself fails,
// the allocation is given back to the upstream and the error is thrown.
#pragma once

#include <cstddef>

#include "tether_core/resource.hpp"

namespace tether::core {

ResourcePtr make_prefetch_adaptor(ResourcePtr upstream);

namespace cuda {
// Enqueue a prefetch of [ptr, ptr + bytes) to `device` on `stream`. Throws
// NO_DEVICE without CUDA, CUDA on a failed driver call.
void prefetch(const void* ptr, std::size_t bytes, int device, stream_t stream);
// True if `device` can prefetch managed memory (concurrent managed access).
bool can_prefetch(int device);
}  // namespace cuda

}  // namespace tether::core
