// The free-time checks and the address formatter of free_check.hpp.
#include "tether_core/free_check.hpp"

#include <cinttypes>
#include <cstdio>

#include "tether_core/error.hpp"

namespace tether::core {

std::string pointer_text(const void* p) {
  char buf[2 + 16 + 1];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, reinterpret_cast<std::uintptr_t>(p));
  return buf;
}

void throw_not_allocated(const char* who, const char* self, const void* p) {
  throw_invalid_argument(std::string(who) + ": pointer " + pointer_text(p) + " was not allocated by " + self +
                         " (or was already freed)");
}

void throw_free_mismatch(const char* who, const char* self, const void* p, const Allocated& a, owner_t freed_by,
                         std::size_t bytes, std::size_t alignment) {
  const std::string at = std::string(who) + ": ";
  if (a.owner != freed_by) {
    if (freed_by == kCaller)
      throw_invalid_argument(at + "pointer " + pointer_text(p) +
                             " is held by a resource over this one (a pool's chunk or an adaptor's allocation); "
                             "free it into the resource that handed it out");
    if (a.owner == kCaller)
      throw_invalid_argument(at + "pointer " + pointer_text(p) + " was allocated directly from " + self +
                             ", not through the resource it was freed into; free it into " + self);
    throw_invalid_argument(at + "pointer " + pointer_text(p) +
                           " was handed out through another resource over this one than the one it was freed into");
  }
  if (a.bytes != bytes)
    throw_invalid_argument(at + "size mismatch freeing " + pointer_text(p) + ": allocated " + std::to_string(a.bytes) +
                           " bytes, freed with " + std::to_string(bytes) + " bytes");
  if (a.alignment != alignment)
    throw_invalid_argument(at + "alignment mismatch freeing " + pointer_text(p) + ": allocated with alignment " +
                           std::to_string(a.alignment) + ", freed with " + std::to_string(alignment));
  throw Error(TETHER_ERROR_INTERNAL, at + "throw_free_mismatch called for a free that matches");
}

}  // namespace tether::core
