// The current-resource table: one slot per CUDA device plus a host slot.
//
// Generic over the reference type it stores (Ref: a copyable, RAII, owning
// reference such as std::shared_ptr or the C ABI's handle reference), so the
// same logic serves the C ABI and the core's own tests. Swaps are atomic with
// respect to gets: get() copies the reference under the slot's lock, so a
// concurrent set() can never free what get() handed out.
#pragma once

#include <array>
#include <functional>
#include <mutex>
#include <utility>

#include "tether_core/error.hpp"

namespace tether::core {

template <class Ref>
class CurrentTable {
 public:
  static constexpr int kMaxDevices = 256;
  static constexpr int kHostSlot = -1;

  // make_default(slot) creates the default resource of a slot on first use.
  explicit CurrentTable(std::function<Ref(int)> make_default) : make_default_(std::move(make_default)) {}

  // slot: kHostSlot or a device id already validated by the caller.
  Ref get(int slot) {
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.value) s.value = make_default_(slot);  // may throw; slot stays unset
    return s.value;
  }

  // Install `value` (empty: back to the default). Returns what was installed
  // (empty if the slot was unset). Throws Error(LOCKED) if the slot is locked.
  Ref set(int slot, Ref value) {
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.locked) throw Error(TETHER_ERROR_LOCKED, "the current resource of this slot is locked");
    std::swap(s.value, value);
    return value;  // the previous one; released by the caller outside the lock
  }

  void lock(int slot) {
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.value) s.value = make_default_(slot);
    s.locked = true;
  }

  bool is_locked(int slot) {
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.locked;
  }

 private:
  struct Slot {
    std::mutex mutex;
    Ref value{};
    bool locked = false;
  };

  Slot& slot_of(int slot) {
    if (slot < kHostSlot || slot >= kMaxDevices) throw_invalid_argument("device id out of range");
    return slots_[static_cast<std::size_t>(slot + 1)];
  }

  std::function<Ref(int)> make_default_;
  std::array<Slot, kMaxDevices + 1> slots_;
};

}  // namespace tether::core
