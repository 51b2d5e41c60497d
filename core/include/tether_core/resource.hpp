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
// Largest request passed on to a subclass: any request this close to
// SIZE_MAX cannot be satisfied, and rejecting it (OutOfMemory) lets every
// subclass round sizes up (by up to kMaxAlignment twice) without overflow
// checks of its own.
inline constexpr std::size_t kLargestRequest = SIZE_MAX - 2 * kMaxAlignment;

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
  // Whether the work `event` captured is done (cuEventQuery). Never blocks the
  // host; legal while another thread captures a CUDA graph (the query runs in
  // relaxed capture mode). Throws for a failed query.
  virtual bool event_done(event_t event) = 0;
  // Block the host until the work `event` captured is done (cuEventSynchronize).
  virtual void synchronize_event(event_t event) = 0;
};

// Who holds an allocation: kCaller (0) for a caller of allocate(), else the
// id() of the dependent resource that took it with allocate_for().
using owner_t = std::uint64_t;
inline constexpr owner_t kCaller = 0;

class Resource : public std::enable_shared_from_this<Resource> {
 public:
  explicit Resource(Properties p) noexcept;
  virtual ~Resource();
  Resource(const Resource&) = delete;
  Resource& operator=(const Resource&) = delete;

  // size 0 returns nullptr. alignment 0 means kDefaultAlignment.
  // Throws Error(INVALID_ARGUMENT) for a bad alignment, OutOfMemory when exhausted.
  // (Inline, below: the common case of a resource that keeps its own counters.)
  inline void* allocate(std::size_t bytes, std::size_t alignment, stream_t stream);
  // nullptr with size 0 is a no-op. Throws Error(INVALID_ARGUMENT) for
  // nullptr with a size, a pointer with size 0, or what the subclass rejects.
  inline void deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream);
  // Free memory that was also used on other streams (record_stream). `uses`:
  // the other streams it was used on, alive at this call (duplicates, `stream`
  // itself and 0 are allowed). The memory is handed out again, on any stream,
  // only once the work enqueued before this call on `stream` and on every use
  // is done: an event is recorded on each, and the free itself is deferred
  // until they are complete (see "Deferred frees" below). Never blocks the
  // host. Without stream_order() (host memory), or when every use is `stream`
  // itself, it is deallocate(). The caller vouches for ptr/bytes/alignment
  // (buffers and hooks free only what they were handed), so a bad free is
  // caught now only where deallocate() would catch it without touching the
  // resource's records; INVALID_ARGUMENT for NULL, size 0 or a bad alignment.
  // If an event cannot be recorded, the device is synchronised and the memory
  // freed at once (the fault path may block; the common path never does).
  void deallocate_after(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream, const stream_t* uses,
                        std::size_t n_uses);

  // Deferred frees. Memory freed with deallocate_after() waits in its
  // resource, still counted as outstanding, until its events are complete.
  // Each allocate() of the resource first frees, on its own stream, every
  // waiting block whose events are complete (no host wait), and on
  // OutOfMemory waits for all of them (and for those another thread's drain
  // is giving back at that moment) and tries again, a bounded number of times. A resource with
  // waiting frees is kept alive by them (a user may release it meanwhile) and
  // is also drained by deallocate_after() and finish_all_deferred_frees()
  // calls on any resource.
  //
  // Free the waiting blocks whose events are complete (wait = false), or all
  // of them, blocking the host until their events are (wait = true). Returns
  // how many were freed. Throws what the StreamOrder throws (then the blocks
  // not freed keep waiting).
  std::size_t finish_deferred_frees(bool wait);
  // How many frees are waiting in this resource.
  std::size_t deferred_frees() const noexcept;

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

  // The quick path: allocate()/deallocate() for callers that must not block
  // (the Python frontend keeps the GIL around it; python/ffibuild.py says
  // why). Each does what allocate()/deallocate() would, with the same
  // outstanding counters and statistics (count_allocation()/count_free(),
  // or the resource's own tally), but only where that needs no wait of any
  // kind: no lock that cannot be tried, no CUDA call (no event record or
  // query, no synchronisation), no upstream call, no callback (failure
  // callbacks, Python-implemented resources, log sinks), no deferred free
  // to drain. Anything else refuses - nullptr / false, with nothing changed
  // and no error recorded - and the caller then calls allocate()/
  // deallocate(), which also report every error (a bad request, a double
  // free, a pointer this resource did not hand out are refused here, never
  // reported). Size 0 and NULL are refused too. The default (a resource
  // without a quick path: every kind but the pool) always refuses.
  void* try_allocate_quick(std::size_t bytes, std::size_t alignment, stream_t stream) noexcept;
  bool try_deallocate_quick(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) noexcept;

 protected:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) = 0;
  // With the owner (kCaller or a dependent's id()). A resource that records
  // owners overrides both and refuses a free whose owner differs from the
  // allocation's with INVALID_ARGUMENT, changing nothing.
  // (The defaults, in resource.cpp, call do_allocate()/do_deallocate(). Out
  // of line: seen here, GCC guessed them at every call through the inline
  // allocate(), and tested the guess, three instructions per call.)
  virtual void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream);
  virtual void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                                 stream_t stream);
  // The quick path's hooks (for a caller, kCaller): the request is
  // well-formed (bytes > 0 and not too large, a usual alignment, ptr not
  // NULL) and, on allocation, no free is deferred. Return nullptr / false,
  // changing nothing, for anything that would need more than the rules of
  // try_allocate_quick() allow. A resource that is not self-counted leaves
  // the counting to this class, as for do_allocate_for().
  virtual void* do_try_allocate_quick(std::size_t bytes, std::size_t alignment, stream_t stream) noexcept {
    (void)bytes, (void)alignment, (void)stream;
    return nullptr;
  }
  virtual bool do_try_deallocate_quick(void* ptr, std::size_t bytes, std::size_t alignment,
                                       stream_t stream) noexcept {
    (void)ptr, (void)bytes, (void)alignment, (void)stream;
    return false;
  }

  // A resource whose allocate and free paths take a lock of their own anyway
  // (the pool: its arena's) may keep the outstanding counters itself, under
  // that lock, instead of paying this class's per-call counter update: it
  // passes self_counted = true, counts in do_allocate_for/do_deallocate_for
  // every allocation they hand out or take back (a caller's and a
  // dependent's), and reports the sums in self_tally(). The counters it
  // keeps follow the rules of outstanding_count(): exact once the calls that
  // changed them happened-before the read, never torn (relaxed atomics
  // written under its lock, read without it).
  struct Tally {
    std::int64_t count = 0;            // all allocations (callers' and dependents')
    std::int64_t bytes = 0;
    std::int64_t dependent_count = 0;  // of those, the ones taken through allocate_for()
    std::int64_t dependent_bytes = 0;
  };
  Resource(Properties p, bool self_counted) noexcept;
  virtual Tally self_tally() const noexcept { return Tally{}; }

 private:
  struct DeferredFrees;  // resource.cpp
  DeferredFrees* deferred_list();  // created at the first deallocate_after() that defers
  // allocate_as()'s slow paths: drain the waiting frees first, or after OutOfMemory.
  void poll_deferred(stream_t stream) noexcept;
  // Free the waiting blocks that are ready (all of them, waiting, with `wait`) onto stream `on`.
  std::size_t drain_deferred(stream_t on, bool wait);
  void* allocate_after_draining(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream);

  // The one path of allocate()/allocate_for() and deallocate()/deallocate_for().
  void* allocate_as(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream);
  void deallocate_as(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream);
  // allocate()/deallocate() for what their inline part does not do: a
  // resource counted here, a request with something to check or reject,
  // waiting frees (allocate_as/deallocate_as, out of line).
  void* allocate_general(std::size_t bytes, std::size_t alignment, stream_t stream);
  void deallocate_general(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream);
  // allocate()'s OutOfMemory handler: rethrows it (called inside the
  // handler) unless frees wait, else allocate_after_draining().
  void* allocate_after_out_of_memory(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream);
  // Whether alignment (not 0) is a power of two no larger than kMaxAlignment:
  // no bit in common with alignment - 1, nor above kMaxAlignment's.
  static constexpr bool usual_alignment(std::size_t alignment) noexcept {
    return (alignment & ((alignment - 1) | ~(2 * kMaxAlignment - 1))) == 0;
  }
  // A request a subclass may see as it is (alignment 0 already replaced):
  // 1 ... kLargestRequest bytes, a usual alignment. What allocate()'s and
  // try_allocate_quick()'s inline checks test; anything else goes to the
  // general path (allocate_as), which rejects or handles it.
  static constexpr bool plain_request(std::size_t bytes, std::size_t alignment) noexcept {
    return bytes - 1 < kLargestRequest && usual_alignment(alignment);
  }
  // The same for a free: not NULL, not size 0, a usual alignment.
  static constexpr bool plain_free(const void* ptr, std::size_t bytes, std::size_t alignment) noexcept {
    return ptr != nullptr && bytes != 0 && usual_alignment(alignment);
  }
  // The outstanding counters are striped: each thread updates the stripe it
  // picked once (round robin), so threads allocating from one resource do not
  // bounce one cache line between them. Deltas are signed: memory allocated on
  // one thread and freed on another leaves +1 in one stripe and -1 in another.
  struct alignas(64) CounterStripe {
    std::atomic<std::int64_t> count{0};
    std::atomic<std::int64_t> bytes{0};
  };
  // The first kCounterStripes threads of the process each own a stripe (one
  // writer: a plain load and store, no atomic read-modify-write on the hot
  // path); later threads share the kSharedStripes after them (fetch_add).
  static constexpr std::size_t kCounterStripes = 16;
  static constexpr std::size_t kSharedStripes = 4;

  void count_allocation(owner_t owner, std::size_t bytes) noexcept;
  void count_free(owner_t owner, std::size_t bytes) noexcept;

  // The counters below, or self_tally() (see the constructor taking self_counted).
  std::int64_t tally_count() const noexcept;
  std::int64_t tally_bytes() const noexcept;

  Properties props_;
  const owner_t id_;
  const bool self_counted_ = false;
  CounterStripe stripes_[kCounterStripes + kSharedStripes];
  // What dependents hold (allocate_for): chunk-sized, rare, one line suffices.
  std::atomic<std::int64_t> dependent_count_{0};
  std::atomic<std::int64_t> dependent_bytes_{0};
  // Frees waiting for their streams (deallocate_after): how many, and the list.
  std::atomic<std::size_t> deferred_count_{0};
  // Frees a drain has taken off the list and not given back to the resource
  // yet: an allocation that runs out meanwhile waits for them, not only for
  // the list (another thread's drain may hold the memory it needs).
  std::atomic<std::size_t> deferred_in_flight_{0};
  std::atomic<DeferredFrees*> deferred_{nullptr};
};

// The common case of allocate()/deallocate() inline, for the C ABI's hot
// path: a resource that keeps its own counters (self_counted_: the pool), a
// well-formed request, no waiting frees; anything else goes out of line to
// allocate_as()/deallocate_as(), which check it all again. One call and its
// frame fewer per call: bench_capi_cost --count under callgrind, 493 -> 450
// instructions per C ABI allocate+free pair.
inline void* Resource::allocate(std::size_t bytes, std::size_t alignment, stream_t stream) {
  if (alignment == 0) alignment = kDefaultAlignment;
  if (__builtin_expect(!self_counted_ || !plain_request(bytes, alignment) ||
                           deferred_count_.load(std::memory_order_relaxed) != 0,
                       0))
    return allocate_general(bytes, alignment, stream);
  try {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  } catch (const OutOfMemory&) {
    // Frees may have begun to wait meanwhile (allocate_as() does the same).
    return allocate_after_out_of_memory(kCaller, bytes, alignment, stream);
  }
}

inline void Resource::deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
  if (alignment == 0) alignment = kDefaultAlignment;
  if (__builtin_expect(!self_counted_ || !plain_free(ptr, bytes, alignment), 0))
    return deallocate_general(ptr, bytes, alignment, stream);
  do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
}

// Drain every resource's deferred frees (Resource::finish_deferred_frees):
// those whose events are complete (wait = false), or all (wait = true, which
// blocks the host). What trim and empty-cache calls do first. Returns how
// many were freed; failures are swallowed (those blocks keep waiting).
std::size_t finish_all_deferred_frees(bool wait) noexcept;

using ResourcePtr = std::shared_ptr<Resource>;

}  // namespace tether::core
