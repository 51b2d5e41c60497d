// tether/cpp/current.hpp - the current-resource table and scoped_resource (tether/current.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_CURRENT_HPP
#define TETHER_CPP_CURRENT_HPP

#include "tether/cpp/common.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// The resource current for `device` (a new reference that a later
/// set_current_resource() cannot free under the caller).
///
/// The default is device_current, the calling thread's current CUDA device, as
/// in RMM's get_current_device_resource() and the CUDA runtime; pass
/// device_host for the host slot. On a machine without a GPU the default
/// therefore throws no_device_error.
inline resource current_resource(int device = device_current) {
  tether_resource_t* h = nullptr;
  check(tether_current_resource_get(device, &h));
  return resource::adopt(h);
}

/// Install `res` as current for `device` (the table retains it) and return
/// the resource that was current (empty if the slot was unset). An empty `res`
/// restores the slot's default. Throws locked_error if the slot is locked,
/// invalid_argument_error if the memory is not usable as `device`'s.
inline resource set_current_resource(const resource& res, int device) {
  tether_resource_t* previous = nullptr;
  check(tether_current_resource_set(device, res.get(), &previous));
  return resource::adopt(previous);
}

/// Install `res` in the slot its memory belongs to: device_host for host
/// memory (properties().device == TETHER_DEVICE_HOST), else its device's slot.
inline resource set_current_resource(const resource& res) { return set_current_resource(res, res.device()); }

/// Restore the default resource of `device`'s slot; returns what was current.
inline resource reset_current_resource(int device) { return set_current_resource(resource(), device); }

/// Lock `device`'s slot for the rest of the process (later sets throw locked_error).
inline void lock_current_resource(int device) { check(tether_current_resource_lock(device)); }

/// True if `device`'s slot is locked.
inline bool is_current_resource_locked(int device) {
  int locked = 0;
  check(tether_current_resource_is_locked(device, &locked));
  return locked != 0;
}

/// Library-safe default: install `res` in `device`'s process slot only if no
/// one has explicitly set that slot and it is not locked; true if it did. The
/// slot's lazily created default does not count as set; reset_current_resource()
/// makes a slot unset again. Throws invalid_argument_error for an empty `res`
/// or memory not usable as `device`'s.
inline bool set_current_resource_if_unset(const resource& res, int device) {
  int installed = 0;
  check(tether_current_resource_set_if_unset(device, res.get(), &installed));
  return installed != 0;
}

/// set_current_resource_if_unset() in the slot `res`'s memory belongs to (see set_current_resource(res)).
inline bool set_current_resource_if_unset(const resource& res) {
  return set_current_resource_if_unset(res, res.device());
}

/// Push `res` on the calling thread's override stack for `device`: until
/// popped, current_resource(device) on this thread returns it, other threads
/// keep seeing the process slot. The stack holds its own reference. Throws
/// locked_error if the slot is locked, invalid_argument_error for an empty
/// `res` or memory not usable as `device`'s. Prefer scoped_resource.
inline void push_current_resource(const resource& res, int device) {
  check(tether_current_resource_push(device, res.get()));
}

/// push_current_resource() onto the slot `res`'s memory belongs to (see set_current_resource(res)).
inline void push_current_resource(const resource& res) { push_current_resource(res, res.device()); }

/// Pop the calling thread's top override for `device` (the stack's reference
/// is released). Throws invalid_argument_error if this thread pushed nothing
/// for that slot.
inline void pop_current_resource(int device) { check(tether_current_resource_pop(device)); }

/// "Use this resource for this scope, on this thread": pushes `res` on the
/// calling thread's override stack for a slot and pops it when the scope ends.
/// Other threads keep seeing the process slot; a set_current_resource() from
/// anywhere meanwhile changes the process slot, not this override. Guards on
/// one slot must nest on their thread (the last one made is destroyed first),
/// and a guard must be destroyed on the thread that made it, so it is not
/// copyable or movable.
class scoped_resource {
 public:
  /// Push `res` for `device` (device_current is resolved now, once); throws
  /// like push_current_resource() (locked_error on a locked slot).
  scoped_resource(const resource& res, int device)
      : device_(device == device_current ? cuda_current_device_() : device),
        previous_(current_resource(device_)) {
    push_current_resource(res, device_);
  }
  /// Push `res` onto the slot its memory belongs to (see set_current_resource(res)).
  explicit scoped_resource(const resource& res) : scoped_resource(res, res.device()) {}
  scoped_resource(const scoped_resource&) = delete;
  scoped_resource& operator=(const scoped_resource&) = delete;
  /// Pop the override. Never throws (destructors must not).
  ~scoped_resource() { (void)tether_current_resource_pop(device_); }
  /// The slot this guard manages (device_current already resolved).
  int device() const noexcept { return device_; }
  /// What current_resource(device()) returned on this thread just before the
  /// push (an outer guard's resource, or the process slot's, its default
  /// included); what the thread sees again after this guard is destroyed,
  /// unless the process slot was set meanwhile.
  const resource& previous() const noexcept { return previous_; }

 private:
  static int cuda_current_device_() {
    int d = 0;
    check(tether_cuda_get_current_device(&d));
    return d;
  }
  int device_;
  resource previous_;
};

}  // namespace tether

#endif  // TETHER_CPP_CURRENT_HPP
