// Resource specs (tether/spec.h): one table describes each resource type's
// parameters - the fields of its options struct - and drives parsing,
// building and describing (the round trip). The table (spec_kinds.inc) is
// written by ci/gen_kinds.py from the registry, capi/kinds.json.
#pragma once

#include <cstddef>
#include <string>

#include "internal.hpp"

namespace tether::capi::spec {

// Size: bytes ("64MiB", "80%"); Count: a plain number of things (size_t); U32/I32;
// Bool (int32 0/1); Resource: a tether_resource_t* field (a nested resource, borrowed
// by the create call).
// String: a const char* field (the create call copies it).
enum class Kind { Size, Count, U32, I32, Bool, Resource, String };

// One parameter: a field of the type's options struct.
struct Field {
  const char* name;
  Kind kind;
  std::size_t offset;        // offsetof(options struct, field)
  const char* alias;         // an accepted second spelling (RMM's), or nullptr
};

// What the single positional argument of a type is.
enum class Shape {
  Leaf,      // no positional argument (host)
  Device,    // a CUDA device id (cuda, async, managed, pinned_host)
  Upstream,  // the upstream resource (pool and every adaptor)
};

struct Type {
  const char* name;  // as tether_resource_get_name() gives it
  Shape shape;
  const Field* fields;
  std::size_t field_count;
  std::size_t options_size;   // 0: the type takes no options struct
  void (*defaults)(void* options);  // write the _INIT values (options_size bytes)
  // Create with the given upstream (Shape::Upstream), device (Shape::Device)
  // and options (nullptr when options_size is 0). A C API status.
  tether_status_t (*create)(tether_resource_t* upstream, int device, const void* options, tether_resource_t** out);
  bool bins;  // takes the extra parameter bins='4KiB,64KiB' (tether_binning_resource_add_bin)
};

// The spec of a live resource handle's whole stack (`depth`: nesting so far).
// Throws; NOT_SUPPORTED for a stack no spec can name (a callback resource, a
// logging adaptor with a callback, a bin given as a resource, too deep).
std::string describe(tether_resource_t* resource, int depth);

// The type named `name`, or nullptr.
const Type* find_type(const std::string& name) noexcept;

// "a=1, b=64MiB": the fields of `options` that differ from the type's defaults,
// in the spec syntax (what a create function records for the round trip;
// strings quoted so the parser reads them back). A resource field whose
// resource no spec can name is left out and *refusal (if not null) says why.
// Throws std::bad_alloc only (and core::Error(INTERNAL) by name, below).
std::string format_options(const Type& type, const void* options, std::string* refusal);
// The same by type name; throws core::Error(INTERNAL) for a name outside the table.
std::string format_options(const char* type_name, const void* options, std::string* refusal);

// Throws NOT_SUPPORTED unless tether_resource_create_from_spec() reads `spec`
// back: not too long, valid UTF-8, within the nesting limit, and parsing.
void check_writable(const std::string& spec);

// The default of table slot `slot` (-1: host) from the environment
// (TETHER_RESOURCE_HOST / TETHER_RESOURCE_<N> / TETHER_RESOURCE), or an empty
// reference if no variable applies. Throws core::Error naming the variable
// for a spec that fails; the first failure per slot is also written to stderr.
HandleRef default_from_environment(int slot);

}  // namespace tether::capi::spec
