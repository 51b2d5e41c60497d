// The checks every resource makes when memory is given back, written once, and
// the one formatter of addresses in error messages.
//
// A resource that records its allocations (host, pool, CUDA, every adaptor)
// looks the pointer up, then:
//   * not found                      -> throw_not_allocated(...)
//   * found, !free_matches(...)      -> throw_free_mismatch(...)
//   * found and matching             -> forget the record and free.
// Both throws are INVALID_ARGUMENT with a message naming the pointer; a
// resource calls them before changing anything (and may build the message
// after dropping its lock: they only format). Order of the reasons reported:
// the wrong party ("Who may free what" in resource.hpp), then size, then
// alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tether_core/resource.hpp"

namespace tether::core {

// "0x7f12a4000000": every message that names an address uses this.
std::string pointer_text(const void* p);
inline std::string pointer_text(std::uintptr_t p) { return pointer_text(reinterpret_cast<const void*>(p)); }

// What a resource recorded when it handed memory out.
struct Allocated {
  owner_t owner = kCaller;  // kCaller or the id() of the dependent that took it
  std::size_t bytes = 0;
  std::size_t alignment = 0;  // normalised (never 0)
};

// True if a free by `freed_by` with (bytes, alignment) gives back exactly `a`.
inline bool free_matches(const Allocated& a, owner_t freed_by, std::size_t bytes, std::size_t alignment) noexcept {
  return a.owner == freed_by && a.bytes == bytes && a.alignment == alignment;
}

// `who` starts the message ("host", "pool", "cuda", "limiting", ...); `self`
// names the resource in a sentence ("this host resource", "this pool").
// Throws INVALID_ARGUMENT: "<who>: pointer P was not allocated by <self> (or
// was already freed)".
[[noreturn]] void throw_not_allocated(const char* who, const char* self, const void* p);

// Throws INVALID_ARGUMENT for the first reason the free does not match `a`:
// the wrong party, the size, or the alignment. Call only when
// !free_matches(a, freed_by, bytes, alignment).
[[noreturn]] void throw_free_mismatch(const char* who, const char* self, const void* p, const Allocated& a,
                                      owner_t freed_by, std::size_t bytes, std::size_t alignment);

// Both steps: nothing if the free matches, else throw_free_mismatch().
inline void check_free(const char* who, const char* self, const void* p, const Allocated& a, owner_t freed_by,
                       std::size_t bytes, std::size_t alignment) {
  if (!free_matches(a, freed_by, bytes, alignment)) throw_free_mismatch(who, self, p, a, freed_by, bytes, alignment);
}

}  // namespace tether::core
