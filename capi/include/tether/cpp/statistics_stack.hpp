// tether/cpp/statistics_stack.hpp - the counter stack of a statistics adaptor
// (tether_statistics_adaptor_push_counters / _pop_counters). Included by
// tether/tether.hpp; usable on its own.
#ifndef TETHER_CPP_STATISTICS_STACK_HPP
#define TETHER_CPP_STATISTICS_STACK_HPP

#include "tether/tether.hpp"

namespace tether {

/// Push a new, zeroed counter set on a statistics adaptor; not_supported_error
/// for other resources.
inline void push_counters(const resource& statistics) {
  check(tether_statistics_adaptor_push_counters(statistics.get()));
}

/// Pop the top counter set, fold it into the one below and return its
/// figures; invalid_argument_error if nothing was pushed.
inline tether_statistics_t pop_counters(const resource& statistics) {
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  check(tether_statistics_adaptor_pop_counters(statistics.get(), &s));
  return s;
}

/// A counter set for the guard's scope: pushed by the constructor, popped
/// (and folded) by pop() or the destructor.
class scoped_counters {
 public:
  /// Push a counter set on `statistics` (kept alive by the guard).
  explicit scoped_counters(resource statistics) : res_(std::move(statistics)) { push_counters(res_); }
  scoped_counters(const scoped_counters&) = delete;
  scoped_counters& operator=(const scoped_counters&) = delete;
  /// Pop the set now and return its figures (the destructor then does nothing).
  tether_statistics_t pop() {
    popped_ = true;
    return pop_counters(res_);
  }
  /// Pop the set unless pop() did; never throws.
  ~scoped_counters() {
    if (!popped_) (void)tether_statistics_adaptor_pop_counters(res_.get(), nullptr);
  }

 private:
  resource res_;
  bool popped_ = false;
};

}  // namespace tether

#endif  // TETHER_CPP_STATISTICS_STACK_HPP
