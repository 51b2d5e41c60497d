// The current-resource table: one slot per CUDA device plus a host slot, and
// per thread, an override stack per slot.
//
// Generic over the reference type it stores (Ref: a copyable, RAII, owning
// reference such as std::shared_ptr or the C ABI's handle reference), so the
// same logic serves the C ABI and the core's own tests. Swaps are atomic with
// respect to gets: get() copies the reference under the slot's lock, so a
// concurrent set() can never free what get() handed out.
//
// Process slot. Holds the installed value (or the lazily created default),
// whether someone explicitly set it (the default does not count; set(empty)
// clears it again) and whether it is locked. Every process-slot operation runs
// under the slot's mutex; references that leave the slot are dropped after the
// mutex is released.
//
// Thread overrides. push() puts a reference on the calling thread's stack for
// a slot; while that stack is non-empty, get() on that thread returns its top
// and every other thread still sees the process slot. Only the owning thread
// touches its stacks, so they need no lock. The no-override fast path of get()
// costs one thread-local load (t_active_, null while the thread has no
// override in any table). A thread that exits with overrides still pushed
// drops them when it exits (a pthread key destructor; see storage()).
#pragma once

#include <pthread.h>

#include <array>
#include <cstdlib>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "tether_core/error.hpp"

namespace tether::core {

template <class Ref>
class CurrentTable {
 public:
  static constexpr int kMaxDevices = 256;
  static constexpr int kHostSlot = -1;

  // make_default(slot) creates the default resource of a slot on first use.
  explicit CurrentTable(std::function<Ref(int)> make_default)
      : make_default_(std::move(make_default)), id_(next_id()) {}
  // Overrides a thread still holds for a destroyed table are dropped when that
  // thread exits (they are keyed by a never-reused id, not by address).
  ~CurrentTable() = default;
  CurrentTable(const CurrentTable&) = delete;
  CurrentTable& operator=(const CurrentTable&) = delete;

  // slot: kHostSlot or a device id already validated by the caller.
  // The calling thread's override for the slot if it has one, else the process slot.
  Ref get(int slot) {
    Slot& s = slot_of(slot);
    if (Overrides* o = t_active_) {  // the only extra cost while a thread has no override
      if (const Ref* top = o->top(id_, slot)) return *top;
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.value) s.value = make_default_(slot);  // may throw; slot stays unset
    return s.value;
  }

  // get() that never waits and never creates: the thread's override, else a
  // copy of the process slot's reference if its mutex is free and the slot
  // has a value. False (out untouched) otherwise - the caller then calls
  // get(). For callers that must not block (the quick paths that keep
  // Python's GIL: capi/src/tether_internal.h). `out` must be empty.
  bool try_get(int slot, Ref& out) {
    Slot& s = slot_of(slot);
    if (Overrides* o = t_active_) {
      if (const Ref* top = o->top(id_, slot)) {
        out = *top;
        return true;
      }
    }
    std::unique_lock<std::mutex> lock(s.mutex, std::try_to_lock);
    if (!lock.owns_lock() || !s.value) return false;
    out = s.value;
    return true;
  }

  // Install `value` in the process slot (empty: back to the default, and the
  // slot counts as unset again). Returns what was installed (empty if the slot
  // was unset). Throws Error(LOCKED) if the slot is locked. Threads' overrides
  // are untouched.
  Ref set(int slot, Ref value) {
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.locked) throw Error(TETHER_ERROR_LOCKED, "the current resource of this slot is locked");
    std::swap(s.value, value);
    s.explicitly_set = static_cast<bool>(s.value);
    return value;  // the previous one; released by the caller outside the lock
  }

  // Install `value` (non-empty) in the process slot only if no one explicitly
  // set it and it is not locked; returns whether it did. A default created
  // earlier is replaced (and dropped after the lock is released).
  bool set_if_unset(int slot, Ref value) {
    if (!value) throw_invalid_argument("set_if_unset needs a resource");
    Slot& s = slot_of(slot);
    Ref replaced;  // declared before the lock: destroyed after it is released
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.locked || s.explicitly_set) return false;
    replaced = std::move(s.value);
    s.value = std::move(value);
    s.explicitly_set = true;
    return true;
  }

  // Lock the process slot (an unset one locks its default). Threads'
  // existing overrides stay until they are popped; new pushes are refused.
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

  // True if the process slot was explicitly set (set_if_unset would install nothing
  // there unless it is also unlocked and unset).
  bool is_set(int slot) {
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.explicitly_set;
  }

  // Push `value` (non-empty) on the calling thread's override stack for
  // `slot`. Throws Error(LOCKED) if the process slot is locked (a scoped
  // override would circumvent the lock). Checked and pushed under the slot's
  // mutex, so a push and a concurrent lock() are ordered.
  void push(int slot, Ref value) {
    if (!value) throw_invalid_argument("push needs a resource");
    Slot& s = slot_of(slot);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.locked)
      throw Error(TETHER_ERROR_LOCKED, "the current resource of " + slot_name(slot) +
                                           " is locked; a thread-scoped override would circumvent the lock");
    if (t_gone_) throw Error(TETHER_ERROR_SHUTTING_DOWN, "this thread is exiting (its overrides are gone)");
    Overrides& o = *storage();
    o.push(id_, slot, value);
    t_active_ = &o;
  }

  // Pop the calling thread's top override for `slot` and return it (the
  // caller drops it). Always allowed, also on a locked slot. Throws
  // INVALID_ARGUMENT if this thread has nothing pushed for the slot.
  Ref pop(int slot) {
    slot_of(slot);  // validates
    Overrides* o = t_active_;
    Ref top;
    if (o == nullptr || !o->pop(id_, slot, top))
      throw_invalid_argument("nothing was pushed for " + slot_name(slot) + " on this thread");
    if (o->empty()) t_active_ = nullptr;
    return top;
  }

  // How many overrides the calling thread has pushed for `slot`.
  std::size_t depth(int slot) {
    slot_of(slot);
    Overrides* o = t_active_;
    return o == nullptr ? 0 : o->depth(id_, slot);
  }

  static std::string slot_name(int slot) {
    return slot == kHostSlot ? std::string("the host slot") : "device " + std::to_string(slot);
  }

 private:
  struct Slot {
    std::mutex mutex;
    Ref value{};
    bool explicitly_set = false;  // set() with a value, or set_if_unset(); not the default
    bool locked = false;
  };

  // One thread's override stacks: one entry per (table, slot) with a non-empty stack.
  struct Overrides {
    struct Entry {
      std::uint64_t table;
      int slot;
      std::vector<Ref> stack;  // never empty
    };
    std::vector<Entry> entries;

    const Ref* top(std::uint64_t table, int slot) const noexcept {
      for (const Entry& e : entries)
        if (e.table == table && e.slot == slot) return &e.stack.back();
      return nullptr;
    }
    std::size_t depth(std::uint64_t table, int slot) const noexcept {
      for (const Entry& e : entries)
        if (e.table == table && e.slot == slot) return e.stack.size();
      return 0;
    }
    // Moves from `value` only on success: on a throw the caller still holds it
    // (and drops it after the slot's mutex is released).
    void push(std::uint64_t table, int slot, Ref& value) {
      for (Entry& e : entries)
        if (e.table == table && e.slot == slot) {
          e.stack.push_back(std::move(value));  // strong guarantee
          return;
        }
      entries.push_back(Entry{table, slot, {}});
      try {
        entries.back().stack.push_back(std::move(value));
      } catch (...) {
        entries.pop_back();
        throw;
      }
    }
    bool pop(std::uint64_t table, int slot, Ref& out) {
      for (std::size_t i = 0; i < entries.size(); ++i) {
        Entry& e = entries[i];
        if (e.table != table || e.slot != slot) continue;
        out = std::move(e.stack.back());
        e.stack.pop_back();
        if (e.stack.empty()) entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
      return false;
    }
    bool empty() const noexcept { return entries.empty(); }
    // Thread exit: overrides still pushed are dropped. get() on this thread
    // (say, from a resource's destructor) sees the process slots from here on,
    // and push() refuses.
    ~Overrides() {
      t_active_ = nullptr;
      t_gone_ = true;
      std::vector<Entry> doomed;
      doomed.swap(entries);
      while (!doomed.empty()) {  // innermost first, as pops would have
        Entry& e = doomed.back();
        while (!e.stack.empty()) e.stack.pop_back();
        doomed.pop_back();
      }
    }
  };

  Slot& slot_of(int slot) {
    if (slot < kHostSlot || slot >= kMaxDevices) throw_invalid_argument("device id out of range");
    return slots_[static_cast<std::size_t>(slot + 1)];
  }

  static std::uint64_t next_id() noexcept {
    static std::atomic<std::uint64_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  // The calling thread's overrides, created on its first push and destroyed
  // when the thread exits (or, for the thread that calls exit(), in an atexit
  // handler). Held through a pthread key, not a thread_local object:
  // registering a thread_local destructor allocates, and glibc aborts the
  // process when that allocation fails; here the push fails with
  // OUT_OF_MEMORY instead.
  struct StorageKey {
    pthread_key_t key{};
    bool ok = false;
    StorageKey() noexcept {
      ok = pthread_key_create(&key, &drop_storage) == 0;
      if (ok) (void)std::atexit(&drop_exiting_thread);
    }
  };
  static const StorageKey& storage_key() noexcept {
    static const StorageKey k;
    return k;
  }
  static void drop_storage(void* p) noexcept { delete static_cast<Overrides*>(p); }
  static void drop_exiting_thread() noexcept {
    const StorageKey& k = storage_key();
    if (void* p = pthread_getspecific(k.key)) {
      (void)pthread_setspecific(k.key, nullptr);
      drop_storage(p);
    }
  }
  static Overrides* storage() {
    const StorageKey& k = storage_key();
    if (!k.ok) throw std::bad_alloc();
    if (void* p = pthread_getspecific(k.key)) return static_cast<Overrides*>(p);
    auto* o = new Overrides;  // may throw std::bad_alloc: nothing changed
    if (pthread_setspecific(k.key, o) != 0) {
      delete o;
      throw std::bad_alloc();
    }
    return o;
  }

  // Constant-initialised and trivially destructible: read without a TLS guard.
  static inline thread_local Overrides* t_active_ = nullptr;  // storage() while non-empty
  static inline thread_local bool t_gone_ = false;           // storage() was destroyed

  std::function<Ref(int)> make_default_;
  const std::uint64_t id_;
  std::array<Slot, kMaxDevices + 1> slots_;
};

}  // namespace tether::core
