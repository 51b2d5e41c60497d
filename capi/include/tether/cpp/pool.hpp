// tether/cpp/pool.hpp - pool_options and pool_resource() (tether/pool.h). Its glue is uniform, so
// ci/gen_kinds.py writes it from the registry into tether/cpp/kinds.hpp; this
// header stays so that code including it keeps compiling.
#ifndef TETHER_CPP_POOL_HPP
#define TETHER_CPP_POOL_HPP

#include "tether/cpp/kinds.hpp"

#endif  // TETHER_CPP_POOL_HPP
