// Pool internals: stream ordering. How a stream-ordered pool makes memory
// freed on one stream safe to hand to another (pool.cpp, "Stream ordering").
#pragma once

#include <algorithm>
#include <vector>

#include "pool_arena.hpp"
#include "stream_reuse.hpp"
#include "tether_core/resource.hpp"

namespace tether::core::pool_detail {

// A stream's frees are covered by an event recorded on the stream every this
// many frees (and at once when another stream asked for that stream's memory,
// or when the pool is bounded or has run out: see "Stream ordering" in pool.cpp).
inline constexpr unsigned kRecordEvery = 64;

// Memory freed on stream A goes to another stream S only once A's work up to
// the free is done. A may have been destroyed since (CuPy and PyTorch streams
// die with their Python objects), and a destroyed stream's handle must never
// be used, so S waits on A's event (recorded while A was surely alive: at a
// free on A), never on A. The wait never blocks the host. Each arena is
// waited for at most once per operation. Frees not covered by an event yet
// (fresh blocks) can only be ordered by waiting for the whole device
// (device()), once; every wait after that is a no-op.
// The waits themselves are stream_reuse::Handover (core/src/stream_reuse.hpp),
// shared with the arena and fixed-size resources; pool.cpp calls it Waits.

}  // namespace tether::core::pool_detail
