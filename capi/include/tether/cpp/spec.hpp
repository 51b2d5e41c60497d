// tether/cpp/spec.hpp - resource stacks named by specs (tether/spec.h).
#ifndef TETHER_CPP_SPEC_HPP
#define TETHER_CPP_SPEC_HPP

#include <string>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// The resource stack a spec names, e.g. "pool(cuda(), initial_size=80%)"
/// (tether_resource_create_from_spec; grammar in tether/spec.h). Throws
/// invalid_argument_error naming the position and token of a bad spec.
inline resource resource_from_spec(const std::string& spec) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_resource_create_from_spec(spec.c_str(), out); });
}

}  // namespace tether

#endif  // TETHER_CPP_SPEC_HPP
