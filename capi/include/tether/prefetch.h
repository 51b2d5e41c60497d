/*
 * tether/prefetch.h - the prefetch adaptor: managed memory moved to its device
 * as it is allocated.
 *
 * After each allocation from its upstream the adaptor enqueues a prefetch of
 * the memory to the upstream's device on the allocation's stream
 * (cuMemPrefetchAsync): stream-ordered, the host does not wait, and the first
 * kernel on that stream finds the pages resident instead of faulting them in.
 * Frees are forwarded unchanged; the adaptor accepts frees only of memory it
 * handed out (INVALID_ARGUMENT otherwise, nothing changed). Thread-safe.
 *
 * The upstream must give managed memory: device memory (its properties'
 * device >= 0) that is also host-accessible - a managed resource or a pool or
 * adaptor over one. Any other upstream (host, pinned host, plain device
 * memory) is refused at creation with INVALID_ARGUMENT. A device without
 * concurrent managed access (it cannot prefetch) is NOT_SUPPORTED at
 * creation. If a prefetch fails, the memory goes back to the upstream and the
 * allocation fails with that error.
 */
#ifndef TETHER_PREFETCH_H
#define TETHER_PREFETCH_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A prefetch adaptor over `upstream` (not taken: the adaptor retains it).
 * Errors: INVALID_HANDLE for a bad upstream; INVALID_ARGUMENT if it does not
 * give managed memory; NOT_SUPPORTED if its device cannot prefetch; NO_DEVICE
 * without CUDA. out: receives +1.
 */
TETHER_API tether_status_t tether_prefetch_adaptor_create(tether_resource_t* upstream, tether_resource_t** out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_PREFETCH_H */
