// The resource interface every tether memory resource implements.
//
// Resources are shared through std::shared_ptr: a pool or adaptor holds its
// upstream, a buffer (in the C ABI layer) holds the resource it came from.
// The non-virtual allocate()/deallocate() validate arguments and keep the
// outstanding-allocation counters; subclasses implement do_allocate()/
// do_deallocate() and may assume: bytes > 0, alignment is a power of two
// >= 1 (0 was replaced by kDefaultAlignment), ptr != nullptr on deallocate.
//
// Who may free what. A resource accepts a free only of memory it handed out
// itself, and only from the one it handed it to: a caller of allocate() frees
// with deallocate(); a dependent resource (a pool's chunk, an adaptor's
// forwarded allocation) takes memory with allocate_for(its id()) and gives it
// back with deallocate_for(its id()). A caller's deallocate() of a dependent's
// memory, or a dependent's free of memory it did not take, is
// INVALID_ARGUMENT with nothing changed - for resources that record their
// allocations (host, pool, statistics adaptor via its upstream). Subclasses
// that record owners override do_allocate_for()/do_deallocate_for(); the
// default forwards to do_allocate()/do_deallocate() and ignores the owner.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tether/resource.h"
#include "tether_core/error.hpp"

namespace tether::core {

using stream_t = std::uintptr_t;  // a CUstream value; 0 = default stream

inline constexpr std::size_t kDefaultAlignment = 256;
// Largest alignment accepted (1 GiB); larger requests are INVALID_ARGUMENT.
inline constexpr std::size_t kMaxAlignment = std::size_t{1} << 30;

struct Properties {
  tether_resource_kind_t kind;
  int device;              // TETHER_DEVICE_HOST (-1) for host memory
  bool device_accessible;
  bool host_accessible;
};

// Services a stream-ordered pool needs from a CUDA upstream. Host upstreams
// have none (Resource::stream_order() returns nullptr) and their pools treat
// every stream as one.
class StreamOrder {
 public:
  virtual ~StreamOrder() = default;
  // Block the host until all work enqueued so far on `stream` is done.
  virtual void synchronize(stream_t stream) = 0;
  // Block the host until all work enqueued so far on every stream of the
  // device is done (cuCtxSynchronize). Touches no stream handle.
  virtual void synchronize_device() = 0;

  // Events let a pool order memory across streams without ever touching a
  // stream handle after the free that made the memory available: the stream
  // is alive when memory is freed on it (the caller just used it), but may be
  // destroyed before the memory is reused (CuPy and PyTorch streams die with
  // their Python objects). An event stays valid after its stream is gone.
  using event_t = void*;
  // A new event (CU_EVENT_DISABLE_TIMING). Throws.
  virtual event_t create_event() = 0;
  virtual void destroy_event(event_t event) noexcept = 0;
  // Record `event` on the live stream `stream` (re-recording replaces the
  // previous capture). Called with the pool's lock held.
  virtual void record_event(event_t event, stream_t stream) = 0;
  // Make future work on `waiter` wait for what `event` captured. Never blocks
  // the host. Called with the pool's lock held.
  virtual void wait_event(stream_t waiter, event_t event) = 0;
};

// Who holds an allocation: kCaller (0) for a caller of allocate(), else the
// id() of the dependent resource that took it with allocate_for().
using owner_t = std::uint64_t;
inline constexpr owner_t kCaller = 0;

class Resource {
 public:
  explicit Resource(Properties p) noexcept;
  virtual ~Resource() = default;
  Resource(const Resource&) = delete;
  Resource& operator=(const Resource&) = delete;

  // size 0 returns nullptr. alignment 0 means kDefaultAlignment.
  // Throws Error(INVALID_ARGUMENT) for a bad alignment, OutOfMemory when exhausted.
  void* allocate(std::size_t bytes, std::size_t alignment, stream_t stream);
  // nullptr with size 0 is a no-op. Throws Error(INVALID_ARGUMENT) for
  // nullptr with a size, a pointer with size 0, or what the subclass rejects.
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream);
  // The same for a dependent resource whose id() is `owner` (never kCaller):
  // memory taken this way is refused to deallocate() and to any other owner.
  void* allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream);
  void deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream);

  // Unique for the process (never reused, never kCaller): the owner tag of
  // what this resource takes from its upstream.
  owner_t id() const noexcept { return id_; }

  const Properties& properties() const noexcept { return props_; }
  virtual const char* name() const noexcept = 0;
  // True if the two resources are interchangeable for comparison (same kind,
  // sharing one memory source). Equality does not make frees portable: memory
  // goes back to the resource that handed it out (see the top of this file).
  virtual bool is_equal(const Resource& other) const noexcept { return this == &other; }
  // Give unused memory back upstream. Default: nothing held, nothing to do.
  virtual void trim() {}
  // The resource this one draws from, or nullptr.
  virtual const std::shared_ptr<Resource>* upstream() const noexcept { return nullptr; }
  // Stream-ordering services (CUDA resources), or nullptr.
  virtual StreamOrder* stream_order() noexcept { return nullptr; }

  // Allocations made through allocate() and not yet given back, and their
  // bytes. Exact when no allocate()/deallocate() is in flight (and once those
  // that were have happened-before the call, e.g. the threads were joined).
  // A read racing them sums per-thread counters taken at slightly different
  // times: some value the counters passed through or close to it, never
  // negative (clamped to 0).
  std::uint64_t outstanding_count() const noexcept;
  std::uint64_t outstanding_bytes() const noexcept;
  // Of those, the ones taken by callers (not by dependents through
  // allocate_for()): what an orphan report is about. Same exactness rules.
  std::uint64_t caller_outstanding_count() const noexcept;
  std::uint64_t caller_outstanding_bytes() const noexcept;

  static std::size_t normalize_alignment(std::size_t alignment);  // throws on bad alignment

 protected:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) = 0;
  // With the owner (kCaller or a dependent's id()). A resource that records
  // owners overrides both and refuses a free whose owner differs from the
  // allocation's with INVALID_ARGUMENT, changing nothing.
  virtual void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
    (void)owner;
    return do_allocate(bytes, alignment, stream);
  }
  virtual void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                                 stream_t stream) {
    (void)owner;
    do_deallocate(ptr, bytes, alignment, stream);
  }

 private:
  // The one path of allocate()/allocate_for() and deallocate()/deallocate_for().
  void* allocate_as(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream);
  void deallocate_as(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream);
  // The outstanding counters are striped: each thread updates the stripe it
  // picked once (round robin), so threads allocating from one resource do not
  // bounce one cache line between them. Deltas are signed: memory allocated on
  // one thread and freed on another leaves +1 in one stripe and -1 in another.
  struct alignas(64) CounterStripe {
    std::atomic<std::int64_t> count{0};
    std::atomic<std::int64_t> bytes{0};
  };
  static constexpr std::size_t kCounterStripes = 16;

  void count_allocation(owner_t owner, std::size_t bytes) noexcept;
  void count_free(owner_t owner, std::size_t bytes) noexcept;

  Properties props_;
  const owner_t id_;
  CounterStripe stripes_[kCounterStripes];
  // What dependents hold (allocate_for): chunk-sized, rare, one line suffices.
  std::atomic<std::int64_t> dependent_count_{0};
  std::atomic<std::int64_t> dependent_bytes_{0};
};

using ResourcePtr = std::shared_ptr<Resource>;

}  // namespace tether::core
