// Resource: argument checks and outstanding-allocation counters shared by
// every resource, so subclasses only ever see well-formed requests.
#include "tether_core/resource.hpp"

#include <cstdint>
#include <string>

namespace tether::core {

namespace {

// Any request this close to SIZE_MAX cannot be satisfied, and rejecting it
// here lets every subclass round sizes up (by up to kMaxAlignment twice)
// without overflow checks of its own.
constexpr std::size_t kLargestRequest = SIZE_MAX - 2 * kMaxAlignment;

[[noreturn]] void throw_bad_alignment(std::size_t alignment) {
  throw_invalid_argument("alignment " + std::to_string(alignment) + " is not a power of two no larger than " +
                         std::to_string(kMaxAlignment));
}

// Inlined into allocate()/deallocate(): they are on every allocation's path.
inline std::size_t checked_alignment(std::size_t alignment) {
  if (alignment == 0) return kDefaultAlignment;
  if ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) throw_bad_alignment(alignment);
  return alignment;
}

// The stripe of the calling thread, picked on its first allocation: round
// robin, so up to kCounterStripes threads each get a line of their own. The
// thread_local is constant-initialised (no TLS wrapper or guard on the hot path).
std::atomic<unsigned> g_next_stripe{0};
thread_local unsigned t_stripe_plus_one = 0;  // 0: not picked yet

inline unsigned this_thread_stripe(unsigned stripes) noexcept {
  unsigned s = t_stripe_plus_one;
  if (s == 0) {
    s = g_next_stripe.fetch_add(1, std::memory_order_relaxed) % stripes + 1;
    t_stripe_plus_one = s;
  }
  return s - 1;
}

std::atomic<owner_t> g_next_id{1};

std::uint64_t clamp(std::int64_t v) noexcept { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

}  // namespace

Resource::Resource(Properties p) noexcept : props_(p), id_(g_next_id.fetch_add(1, std::memory_order_relaxed)) {}

// Relaxed sums: the counters are statistics. Exact once the calls that
// changed them happened-before this read; racing reads are clamped at 0 (a
// free counted in one stripe may be seen before its allocation in another).
std::uint64_t Resource::outstanding_count() const noexcept {
  std::uint64_t sum = 0;  // unsigned: wraps instead of overflowing; read back as signed
  for (const CounterStripe& s : stripes_) sum += static_cast<std::uint64_t>(s.count.load(std::memory_order_relaxed));
  return static_cast<std::int64_t>(sum) > 0 ? sum : 0;
}

std::uint64_t Resource::outstanding_bytes() const noexcept {
  std::uint64_t sum = 0;  // unsigned: wraps instead of overflowing; read back as signed
  for (const CounterStripe& s : stripes_) sum += static_cast<std::uint64_t>(s.bytes.load(std::memory_order_relaxed));
  return static_cast<std::int64_t>(sum) > 0 ? sum : 0;
}

std::size_t Resource::normalize_alignment(std::size_t alignment) { return checked_alignment(alignment); }

std::uint64_t Resource::caller_outstanding_count() const noexcept {
  return clamp(static_cast<std::int64_t>(outstanding_count()) - dependent_count_.load(std::memory_order_relaxed));
}

std::uint64_t Resource::caller_outstanding_bytes() const noexcept {
  return clamp(static_cast<std::int64_t>(outstanding_bytes()) - dependent_bytes_.load(std::memory_order_relaxed));
}

// Counted only once do_allocate succeeded; relaxed: they are statistics,
// not synchronisation. The RMW is on this thread's stripe, a line no other
// thread writes while there are at most kCounterStripes threads.
inline void Resource::count_allocation(owner_t owner, std::size_t bytes) noexcept {
  CounterStripe& s = stripes_[this_thread_stripe(kCounterStripes)];
  s.count.fetch_add(1, std::memory_order_relaxed);
  s.bytes.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  if (owner != kCaller) {
    dependent_count_.fetch_add(1, std::memory_order_relaxed);
    dependent_bytes_.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }
}

inline void Resource::count_free(owner_t owner, std::size_t bytes) noexcept {
  CounterStripe& s = stripes_[this_thread_stripe(kCounterStripes)];
  s.count.fetch_sub(1, std::memory_order_relaxed);
  s.bytes.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  if (owner != kCaller) {
    dependent_count_.fetch_sub(1, std::memory_order_relaxed);
    dependent_bytes_.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }
}

namespace {

[[noreturn]] void throw_bad_owner() { throw_invalid_argument("allocate_for/deallocate_for: owner must be a resource id"); }

inline void check_request(std::size_t bytes) {
  if (bytes > kLargestRequest) {
    throw OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes: larger than any resource can provide");
  }
}

inline void check_free(const void* ptr, std::size_t bytes) {
  if (ptr == nullptr) throw_invalid_argument("cannot free a NULL pointer of " + std::to_string(bytes) + " bytes");
  if (bytes == 0) throw_invalid_argument("cannot free a non-NULL pointer with size 0");
}

}  // namespace

void* Resource::allocate_as(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) {
  alignment = checked_alignment(alignment);
  if (bytes == 0) return nullptr;
  check_request(bytes);
  void* p = do_allocate_for(owner, bytes, alignment, stream);
  count_allocation(owner, bytes);
  return p;
}

void Resource::deallocate_as(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
  if (ptr == nullptr && bytes == 0) return;
  check_free(ptr, bytes);
  alignment = checked_alignment(alignment);
  do_deallocate_for(owner, ptr, bytes, alignment, stream);
  count_free(owner, bytes);
}

void* Resource::allocate(std::size_t bytes, std::size_t alignment, stream_t stream) {
  return allocate_as(kCaller, bytes, alignment, stream);
}

void Resource::deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
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

}  // namespace tether::core
