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

}  // namespace

std::size_t Resource::normalize_alignment(std::size_t alignment) { return checked_alignment(alignment); }

void* Resource::allocate(std::size_t bytes, std::size_t alignment, stream_t stream) {
  alignment = checked_alignment(alignment);
  if (bytes == 0) return nullptr;
  if (bytes > kLargestRequest) {
    throw OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes: larger than any resource can provide");
  }
  void* p = do_allocate(bytes, alignment, stream);
  // Counted only once do_allocate succeeded; relaxed: they are statistics,
  // not synchronisation.
  outstanding_count_.fetch_add(1, std::memory_order_relaxed);
  outstanding_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

void Resource::deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) {
  if (ptr == nullptr) {
    if (bytes == 0) return;
    throw_invalid_argument("cannot free a NULL pointer of " + std::to_string(bytes) + " bytes");
  }
  if (bytes == 0) throw_invalid_argument("cannot free a non-NULL pointer with size 0");
  alignment = checked_alignment(alignment);
  do_deallocate(ptr, bytes, alignment, stream);
  outstanding_count_.fetch_sub(1, std::memory_order_relaxed);
  outstanding_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace tether::core
