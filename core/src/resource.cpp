// Resource: argument checks and outstanding-allocation counters shared by
// every resource, so subclasses only ever see well-formed requests.
#include "tether_core/resource.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tether_core/process.hpp"

namespace tether::core {

namespace {

// The error paths are out of line and cold, so the hot paths that check
// for them carry no string-building code (fewer saved registers per call).
[[noreturn]] __attribute__((noinline, cold)) void throw_bad_alignment(std::size_t alignment) {
  throw_invalid_argument("alignment " + std::to_string(alignment) + " is not a power of two no larger than " +
                         std::to_string(kMaxAlignment));
}

// Inlined into allocate_as()/deallocate_as(): they are on every allocation's path.
inline std::size_t checked_alignment(std::size_t alignment) {
  if (alignment == 0) return kDefaultAlignment;
  if ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) throw_bad_alignment(alignment);
  return alignment;
}

// The stripe of the calling thread, picked on its first update: the first
// `owned` threads of the process each get one of their own for good (never
// handed to another thread, so its one writer needs no read-modify-write);
// later threads share the `shared` stripes after those, round robin. The
// thread_local is constant-initialised (no TLS wrapper or guard on the hot path).
std::atomic<unsigned> g_next_stripe{0};
thread_local unsigned t_stripe_plus_one = 0;  // 0: not picked yet

inline unsigned this_thread_stripe(unsigned owned, unsigned shared) noexcept {
  unsigned s = t_stripe_plus_one;
  if (s == 0) {
    const unsigned n = g_next_stripe.fetch_add(1, std::memory_order_relaxed);
    s = (n < owned ? n : owned + n % shared) + 1;
    t_stripe_plus_one = s;
  }
  return s - 1;
}

// Adds d to a counter: a plain load and store when this thread is its only
// writer (no lock prefix: about 20 cycles saved per counter), else fetch_add.
inline void bump(std::atomic<std::int64_t>& c, std::int64_t d, bool owned) noexcept {
  if (owned) {
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  } else {
    c.fetch_add(d, std::memory_order_relaxed);
  }
}

std::atomic<owner_t> g_next_id{1};

std::uint64_t clamp(std::int64_t v) noexcept { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

}  // namespace

Resource::Resource(Properties p) noexcept : Resource(p, false) {}

Resource::Resource(Properties p, bool self_counted) noexcept
    : props_(p), id_(g_next_id.fetch_add(1, std::memory_order_relaxed)), self_counted_(self_counted) {}

// Relaxed sums: the counters are statistics. Exact once the calls that
// changed them happened-before this read; racing reads are clamped at 0 (a
// free counted in one stripe may be seen before its allocation in another).
// Sums are unsigned: they wrap instead of overflowing, and are read back as signed.
std::int64_t Resource::tally_count() const noexcept {
  if (self_counted_) return self_tally().count;
  std::uint64_t sum = 0;
  for (const CounterStripe& s : stripes_) sum += static_cast<std::uint64_t>(s.count.load(std::memory_order_relaxed));
  return static_cast<std::int64_t>(sum);
}

std::int64_t Resource::tally_bytes() const noexcept {
  if (self_counted_) return self_tally().bytes;
  std::uint64_t sum = 0;
  for (const CounterStripe& s : stripes_) sum += static_cast<std::uint64_t>(s.bytes.load(std::memory_order_relaxed));
  return static_cast<std::int64_t>(sum);
}

std::uint64_t Resource::outstanding_count() const noexcept { return clamp(tally_count()); }

std::uint64_t Resource::outstanding_bytes() const noexcept { return clamp(tally_bytes()); }

std::size_t Resource::normalize_alignment(std::size_t alignment) { return checked_alignment(alignment); }

std::uint64_t Resource::caller_outstanding_count() const noexcept {
  if (self_counted_) {
    const Tally t = self_tally();
    return clamp(t.count - t.dependent_count);
  }
  return clamp(static_cast<std::int64_t>(outstanding_count()) - dependent_count_.load(std::memory_order_relaxed));
}

std::uint64_t Resource::caller_outstanding_bytes() const noexcept {
  if (self_counted_) {
    const Tally t = self_tally();
    return clamp(t.bytes - t.dependent_bytes);
  }
  return clamp(static_cast<std::int64_t>(outstanding_bytes()) - dependent_bytes_.load(std::memory_order_relaxed));
}

// Counted only once do_allocate succeeded; relaxed: they are statistics,
// not synchronisation. The update is on this thread's stripe, a line no
// other thread writes (an owned one), or one of the few shared ones.
inline void Resource::count_allocation(owner_t owner, std::size_t bytes) noexcept {
  if (self_counted_) return;  // the subclass counted it
  const unsigned i = this_thread_stripe(kCounterStripes, kSharedStripes);
  CounterStripe& s = stripes_[i];
  const bool owned = i < kCounterStripes;
  bump(s.count, +1, owned);
  bump(s.bytes, +static_cast<std::int64_t>(bytes), owned);
  if (owner != kCaller) {
    dependent_count_.fetch_add(1, std::memory_order_relaxed);
    dependent_bytes_.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }
}

inline void Resource::count_free(owner_t owner, std::size_t bytes) noexcept {
  if (self_counted_) return;  // the subclass counted it
  const unsigned i = this_thread_stripe(kCounterStripes, kSharedStripes);
  CounterStripe& s = stripes_[i];
  const bool owned = i < kCounterStripes;
  bump(s.count, -1, owned);
  bump(s.bytes, -static_cast<std::int64_t>(bytes), owned);
  if (owner != kCaller) {
    dependent_count_.fetch_sub(1, std::memory_order_relaxed);
    dependent_bytes_.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }
}

namespace {

[[noreturn]] __attribute__((noinline, cold)) void throw_bad_owner() { throw_invalid_argument("allocate_for/deallocate_for: owner must be a resource id"); }

[[noreturn]] __attribute__((noinline, cold)) void throw_too_large(std::size_t bytes) {
  throw OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes: larger than any resource can provide");
}

inline void check_request(std::size_t bytes) {
  if (bytes > kLargestRequest) throw_too_large(bytes);
}

[[noreturn]] __attribute__((noinline, cold)) void throw_bad_free(const void* ptr, std::size_t bytes) {
  if (ptr == nullptr) throw_invalid_argument("cannot free a NULL pointer of " + std::to_string(bytes) + " bytes");
  throw_invalid_argument("cannot free a non-NULL pointer with size 0");
}

inline void check_free(const void* ptr, std::size_t bytes) {
  if (ptr == nullptr || bytes == 0) throw_bad_free(ptr, bytes);
}

}  // namespace

// Inlined into allocate()/allocate_for() and deallocate()/deallocate_for(),
// their only callers besides the deferred-free paths: one call fewer per call.
inline __attribute__((always_inline)) void* Resource::allocate_as(owner_t owner, std::size_t bytes,
                                                                  std::size_t alignment, stream_t stream) {
  alignment = checked_alignment(alignment);
  if (bytes == 0) return nullptr;
  check_request(bytes);
  if (deferred_count_.load(std::memory_order_relaxed) != 0) poll_deferred(stream);
  void* p;
  try {
    p = do_allocate_for(owner, bytes, alignment, stream);
  } catch (const OutOfMemory&) {
    return allocate_after_out_of_memory(owner, bytes, alignment, stream);
  }
  count_allocation(owner, bytes);
  return p;
}

void* Resource::allocate_after_out_of_memory(owner_t owner, std::size_t bytes, std::size_t alignment,
                                             stream_t stream) {
  if (deferred_count_.load(std::memory_order_acquire) == 0 &&
      deferred_in_flight_.load(std::memory_order_acquire) == 0)
    throw;  // called inside the handler of the OutOfMemory: it goes on to the caller
  return allocate_after_draining(owner, bytes, alignment, stream);
}

inline __attribute__((always_inline)) void Resource::deallocate_as(owner_t owner, void* ptr, std::size_t bytes,
                                                                   std::size_t alignment, stream_t stream) {
  if (ptr == nullptr && bytes == 0) return;
  check_free(ptr, bytes);
  alignment = checked_alignment(alignment);
  do_deallocate_for(owner, ptr, bytes, alignment, stream);
  count_free(owner, bytes);
}

void* Resource::do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
  (void)owner;
  return do_allocate(bytes, alignment, stream);
}

void Resource::do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                                 stream_t stream) {
  (void)owner;
  do_deallocate(ptr, bytes, alignment, stream);
}

// The quick path: the checks of allocate()/deallocate()'s inline part (a
// request that is not plain goes to allocate_as(), which the quick path
// refuses to do), the subclass's hook, and the same counting as
// allocate_as()/deallocate_as() when it succeeded.
void* Resource::try_allocate_quick(std::size_t bytes, std::size_t alignment, stream_t stream) noexcept {
  if (alignment == 0) alignment = kDefaultAlignment;
  // Waiting frees would be drained first (poll_deferred: event queries).
  if (!plain_request(bytes, alignment) || deferred_count_.load(std::memory_order_relaxed) != 0) return nullptr;
  void* p = do_try_allocate_quick(bytes, alignment, stream);
  if (p != nullptr) count_allocation(kCaller, bytes);
  return p;
}

bool Resource::try_deallocate_quick(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) noexcept {
  if (alignment == 0) alignment = kDefaultAlignment;
  if (!plain_free(ptr, bytes, alignment) || !do_try_deallocate_quick(ptr, bytes, alignment, stream)) return false;
  count_free(kCaller, bytes);
  return true;
}

void* Resource::allocate_general(std::size_t bytes, std::size_t alignment, stream_t stream) {
  return allocate_as(kCaller, bytes, alignment, stream);
}

void Resource::deallocate_general(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
  deallocate_as(kCaller, ptr, bytes, alignment, stream);
}

void* Resource::allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
  if (owner == kCaller) throw_bad_owner();
  return allocate_as(owner, bytes, alignment, stream);
}

void Resource::deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
  if (owner == kCaller) throw_bad_owner();
  deallocate_as(owner, ptr, bytes, alignment, stream);
}

// ---- Deferred frees (deallocate_after) ---------------------------------------------
//
// A block freed with uses on other streams waits here with one event per
// stream: events[0] on the stream it was freed on, the rest on the uses. It
// is freed into the resource (do_deallocate_for, on a live stream: the one
// that asks for memory now, or 0) once every event is complete; a block
// freed onto the very stream it was freed on needs only the uses' events
// (stream order covers the rest). The list keeps its resource alive while
// it is not empty, and is then entered in a process-wide registry, so that
// other resources' calls drain it even after the user released it. Spare
// events are destroyed when the list empties: by then the resource may be
// destroyed, and with it the StreamOrder (owned by an upstream) they belong to.

namespace {

// How many waiting blocks one allocation examines (the oldest first).
constexpr std::size_t kDeferredScan = 8;

std::mutex g_deferred_mutex;
std::vector<Resource*> g_deferred_resources;  // one entry per non-empty list with a keepalive

void register_deferred(Resource* r) {
  std::lock_guard<std::mutex> lock(g_deferred_mutex);
  g_deferred_resources.push_back(r);
}

void unregister_deferred(Resource* r, bool all) noexcept {
  std::lock_guard<std::mutex> lock(g_deferred_mutex);
  auto& v = g_deferred_resources;
  if (all) {
    v.erase(std::remove(v.begin(), v.end(), r), v.end());
  } else if (auto it = std::find(v.begin(), v.end(), r); it != v.end()) {
    v.erase(it);
  }
}

}  // namespace

struct Resource::DeferredFrees {
  struct Entry {
    void* ptr;
    std::size_t bytes;
    std::size_t alignment;
    stream_t stream;                          // freed on
    std::vector<StreamOrder::event_t> events;  // [0] on `stream`, then one per use
    std::size_t next = 1;                      // events[1..next) are known complete
    bool own_done = false;                     // events[0] is known complete
  };

  explicit DeferredFrees(StreamOrder* o) noexcept : order(o) {}

  // Whether e may be freed onto stream `on` now (wait: block until it may).
  bool ready(Entry& e, stream_t on, bool wait) {
    if (!e.own_done && on != e.stream) {
      if (wait) {
        order->synchronize_event(e.events[0]);
      } else if (!order->event_done(e.events[0])) {
        return false;
      }
      e.own_done = true;
    }
    for (; e.next < e.events.size(); ++e.next) {
      if (wait) {
        order->synchronize_event(e.events[e.next]);
      } else if (!order->event_done(e.events[e.next])) {
        return false;
      }
    }
    return true;
  }

  StreamOrder* const order;
  std::mutex mutex;
  std::vector<Entry> entries;                // oldest first
  std::vector<StreamOrder::event_t> spares;  // recorded-and-done events, to record again
  std::shared_ptr<Resource> keepalive;       // while entries is not empty
};

Resource::~Resource() {
  DeferredFrees* d = deferred_.load(std::memory_order_acquire);
  if (d == nullptr) return;
  unregister_deferred(this, true);
  // Blocks still waiting here (a resource not owned by a shared_ptr, or the
  // process is exiting) are leaked with their events: the subclass, and the
  // StreamOrder they belong to, may be gone.
  delete d;
}

Resource::DeferredFrees* Resource::deferred_list() {
  DeferredFrees* d = deferred_.load(std::memory_order_acquire);
  if (d != nullptr) return d;
  auto fresh = std::make_unique<DeferredFrees>(stream_order());
  if (deferred_.compare_exchange_strong(d, fresh.get(), std::memory_order_acq_rel)) return fresh.release();
  return d;  // another thread's
}

std::size_t Resource::deferred_frees() const noexcept { return deferred_count_.load(std::memory_order_relaxed); }

void Resource::deallocate_after(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream,
                                const stream_t* uses, std::size_t n_uses) {
  if (ptr == nullptr && bytes == 0) return;
  check_free(ptr, bytes);
  alignment = checked_alignment(alignment);
  if (n_uses != 0 && uses == nullptr) throw_invalid_argument("deallocate_after: uses is NULL with a count");
  StreamOrder* order = stream_order();
  std::vector<stream_t> others;
  if (order != nullptr) {
    for (std::size_t i = 0; i < n_uses; ++i)
      if (uses[i] != stream && std::find(others.begin(), others.end(), uses[i]) == others.end())
        others.push_back(uses[i]);
  }
  if (others.empty()) return deallocate_as(kCaller, ptr, bytes, alignment, stream);

  DeferredFrees& d = *deferred_list();
  DeferredFrees::Entry e{ptr, bytes, alignment, stream, {}};
  const std::size_t n_events = others.size() + 1;
  try {
    e.events.reserve(n_events);
    {
      std::lock_guard<std::mutex> lock(d.mutex);
      while (e.events.size() < n_events && !d.spares.empty()) {
        e.events.push_back(d.spares.back());
        d.spares.pop_back();
      }
    }
    while (e.events.size() < n_events) e.events.push_back(d.order->create_event());
    d.order->record_event(e.events[0], stream);
    for (std::size_t i = 0; i < others.size(); ++i) d.order->record_event(e.events[i + 1], others[i]);
  } catch (...) {
    for (StreamOrder::event_t ev : e.events) d.order->destroy_event(ev);
    // No event to defer on: order the free by waiting for the whole device
    // (the fault path may block). If even that fails, the memory is kept.
    d.order->synchronize_device();
    return deallocate_as(kCaller, ptr, bytes, alignment, stream);
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    d.entries.push_back(std::move(e));  // strong guarantee: on bad_alloc nothing changed, the events leak
    if (d.entries.size() == 1) {
      d.keepalive = weak_from_this().lock();  // empty for a resource no shared_ptr owns
      first = d.keepalive != nullptr;
    }
    deferred_count_.fetch_add(1, std::memory_order_relaxed);
  }
  if (first) {
    try {
      register_deferred(this);
    } catch (...) {
      // Not entered in the registry: only this resource's own calls drain it.
    }
  }
  // Let blocks waiting elsewhere go too (never blocks).
  (void)finish_all_deferred_frees(false);
}

std::size_t Resource::finish_deferred_frees(bool wait) { return drain_deferred(0, wait); }

void Resource::poll_deferred(stream_t stream) noexcept {
  try {
    (void)drain_deferred(stream, false);
  } catch (...) {
    // A failed query: the blocks keep waiting; the allocation goes on.
  }
}

void* Resource::allocate_after_draining(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
  // Out of memory with frees waiting: wait for their streams (this path may
  // block), free them onto this stream, and try again. Frees another thread's
  // drain has taken but not given back yet count too: wait for that drain to
  // finish (it never waits for us: it holds no lock we take here), then try
  // again. Other threads keep allocating meanwhile, so the rounds are bounded;
  // the last OutOfMemory goes to the caller.
  constexpr int kRounds = 8;
  for (int round = 1;; ++round) {
    (void)drain_deferred(stream, true);
    try {
      void* p = do_allocate_for(owner, bytes, alignment, stream);
      count_allocation(owner, bytes);
      return p;
    } catch (const OutOfMemory&) {
      const bool more = deferred_count_.load(std::memory_order_acquire) != 0 ||
                        deferred_in_flight_.load(std::memory_order_acquire) != 0;
      if (!more || round == kRounds) throw;
    }
    while (deferred_in_flight_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
}

std::size_t finish_all_deferred_frees(bool wait) noexcept {
  std::vector<ResourcePtr> pending;
  try {
    std::lock_guard<std::mutex> lock(g_deferred_mutex);
    pending.reserve(g_deferred_resources.size());
    for (Resource* r : g_deferred_resources)
      if (ResourcePtr p = r->weak_from_this().lock()) pending.push_back(std::move(p));
  } catch (...) {
    return 0;
  }
  std::size_t n = 0;
  for (const ResourcePtr& r : pending) {
    try {
      n += r->finish_deferred_frees(wait);
    } catch (...) {
      // That resource's blocks keep waiting.
    }
  }
  return n;
}

std::size_t Resource::drain_deferred(stream_t on, bool wait) {
  DeferredFrees* d = deferred_.load(std::memory_order_acquire);
  if (d == nullptr || deferred_count_.load(std::memory_order_relaxed) == 0 || process_is_exiting()) return 0;
  std::vector<DeferredFrees::Entry> ready;
  std::vector<StreamOrder::event_t> dead_spares;
  std::shared_ptr<Resource> keepalive;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(d->mutex);
    std::size_t kept = 0, scanned = 0;
    auto& v = d->entries;
    for (std::size_t i = 0; i < v.size(); ++i) {
      bool go = false;
      if (!error && (wait || scanned < kDeferredScan)) {
        ++scanned;
        try {
          go = d->ready(v[i], on, wait);
        } catch (...) {
          error = std::current_exception();
        }
      }
      if (go) {
        ready.push_back(std::move(v[i]));
      } else {
        if (kept != i) v[kept] = std::move(v[i]);
        ++kept;
      }
    }
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(kept), v.end());
    for (auto& r : ready)
      for (StreamOrder::event_t ev : r.events) d->spares.push_back(ev);
    // In flight before off the list: the two never read 0 together while a
    // taken block is not back yet.
    deferred_in_flight_.fetch_add(ready.size(), std::memory_order_acq_rel);
    deferred_count_.fetch_sub(ready.size(), std::memory_order_relaxed);
    if (v.empty()) {
      dead_spares.swap(d->spares);
      keepalive = std::move(d->keepalive);
    }
  }
  // Whatever happens below, the taken blocks stop counting as in flight once
  // they have been given back (or lost), before keepalive may destroy *this.
  class InFlight {
   public:
    InFlight(std::atomic<std::size_t>& n, std::size_t k) noexcept : n_(n), k_(k) {}
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    ~InFlight() { n_.fetch_sub(k_, std::memory_order_acq_rel); }

   private:
    std::atomic<std::size_t>& n_;
    std::size_t k_;
  };
  std::optional<InFlight> in_flight;
  if (!ready.empty()) in_flight.emplace(deferred_in_flight_, ready.size());
  if (keepalive) unregister_deferred(this, false);
  for (StreamOrder::event_t ev : dead_spares) d->order->destroy_event(ev);
  for (auto& r : ready) {
    try {
      do_deallocate_for(kCaller, r.ptr, r.bytes, r.alignment, on);
      count_free(kCaller, r.bytes);
    } catch (...) {
      // The block cannot be given back (the resource refused it): it is lost.
    }
  }
  const std::size_t n = ready.size();
  in_flight.reset();
  keepalive.reset();  // may destroy *this: nothing below touches it
  if (error) std::rethrow_exception(error);
  return n;
}

}  // namespace tether::core
