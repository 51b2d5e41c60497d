// tether/tether.hpp - header-only C++17 wrapper over the tether C ABI.
//
// Everything here is inline and calls only the public C functions of
// tether/tether.h, so C++ users get RAII and exceptions without depending on a
// C++ ABI: the library they link is the same libtether.so that C and Python
// use, and they share its one current-resource table.
//
// Ownership maps onto C++ value semantics:
//   * copying a tether::resource or tether::buffer retains the handle,
//   * moving transfers the reference (the source becomes empty),
//   * the destructor releases it.
// Dependents keep their dependencies alive (a pool keeps its upstream, a buffer
// keeps its resource), so objects may be destroyed in any order.
//
// Errors: every failing C call becomes a tether::error (or a subclass chosen by
// the status code) carrying the status and the library's message. Functions
// marked noexcept never throw; destructors never throw.
//
// CCCL: tether::resource provides the member functions of the cuda::mr
// resource concepts (both the CCCL 3.0 names - allocate(bytes, alignment),
// allocate_async(bytes, alignment, stream) - and the CCCL >= 3.1 names -
// allocate_sync(bytes, alignment), allocate(stream, bytes, alignment)). Whether
// memory is device- or host-accessible is a run-time fact of a tether resource,
// so tether::resource itself claims no static property; the checked view
// tether::resource_with<Properties...> does (see the end of this file).
//
// This umbrella includes one header per module, tether/cpp/<module>.hpp: error,
// common, handle (the one handle-wrapper template behind resource and buffer),
// resource, one per resource type (pool, statistics, cuda, ...), buffer,
// current, debug and properties (CCCL).
#ifndef TETHER_TETHER_HPP
#define TETHER_TETHER_HPP

#include "tether/tether.h"

#include "tether/cpp/error.hpp"
#include "tether/cpp/common.hpp"
#include "tether/cpp/handle.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/cpp/kinds.hpp"
#include "tether/cpp/pool.hpp"
#include "tether/cpp/statistics.hpp"
#include "tether/cpp/cuda.hpp"
#include "tether/cpp/callback.hpp"
#include "tether/cpp/logging.hpp"
#include "tether/cpp/failure_callback.hpp"
#include "tether/cpp/buffer.hpp"
#include "tether/cpp/current.hpp"
#include "tether/cpp/debug.hpp"
#include "tether/cpp/properties.hpp"
#include "tether/cpp/spec.hpp"

// Per-module factories and queries of the resource catalogue.
#include "tether/cpp/limiting.hpp"
#include "tether/cpp/tracking.hpp"
#include "tether/cpp/aligned.hpp"
#include "tether/cpp/prefetch.hpp"
#include "tether/cpp/statistics_stack.hpp"
#include "tether/cpp/arena.hpp"
#include "tether/cpp/binning.hpp"
#include "tether/cpp/fixed_size.hpp"

#endif  // TETHER_TETHER_HPP
