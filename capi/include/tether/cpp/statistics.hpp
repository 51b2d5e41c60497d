// tether/cpp/statistics.hpp - statistics_adaptor() (tether/statistics.h). Its glue is uniform, so
// ci/gen_kinds.py writes it from the registry into tether/cpp/kinds.hpp; this
// header stays so that code including it keeps compiling.
#ifndef TETHER_CPP_STATISTICS_HPP
#define TETHER_CPP_STATISTICS_HPP

#include "tether/cpp/kinds.hpp"

#endif  // TETHER_CPP_STATISTICS_HPP
