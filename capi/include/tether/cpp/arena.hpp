// tether/cpp/arena.hpp - the arena resource in the C++ wrapper (tether/arena.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_ARENA_HPP
#define TETHER_CPP_ARENA_HPP

#include <cstddef>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Options of arena_resource(); 0 means "the library's default" for each field.
struct arena_options {
  /// Bytes of the global arena, taken from upstream at creation; it never grows
  /// beyond (0: grow on demand, no limit).
  std::size_t arena_size = 0;
  /// A power of two from 64 KiB to 1 GiB (0: 1 MiB).
  std::size_t superblock_size = 0;
};

/// A new arena resource over `upstream` (kept alive by the arena): per-thread
/// (host) or per-stream (CUDA) arenas over one global arena. Throws
/// invalid_argument_error for a bad superblock_size, out_of_memory_error if
/// arena_size cannot be obtained.
inline resource arena_resource(const resource& upstream, const arena_options& options = {}) {
  tether_arena_options_t o = TETHER_ARENA_OPTIONS_INIT;
  o.arena_size = options.arena_size;
  o.superblock_size = options.superblock_size;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_arena_resource_create(upstream.get(), &o, out); });
}

/// What an arena resource holds; throws not_supported_error for other resources.
inline tether_arena_info_t arena_info(const resource& arena) {
  tether_arena_info_t info = TETHER_ARENA_INFO_INIT;
  check(tether_arena_get_info(arena.get(), &info));
  return info;
}

}  // namespace tether

#endif  // TETHER_CPP_ARENA_HPP
