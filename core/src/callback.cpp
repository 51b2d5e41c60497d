// CallbackResource: user functions do the work; this class keeps the books.
// Each live allocation is recorded (pointer -> size, alignment, owner) so a
// free of anything else, a double free or a free with the wrong size is
// refused with INVALID_ARGUMENT before the user's deallocate runs. The
// callbacks run without any lock held (they may take their time, or call
// other resources).
#include "tether_core/callback.hpp"

#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace tether::core {

namespace {

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

Properties callback_properties(const CallbackFunctions& f, const CallbackProperties& p) {
  if (!f.allocate) throw_invalid_argument("callback resource: the allocate callback must not be empty");
  if (!f.deallocate) throw_invalid_argument("callback resource: the deallocate callback must not be empty");
  if (p.device < TETHER_DEVICE_HOST)
    throw_invalid_argument("callback resource: device must be TETHER_DEVICE_HOST (-1) or a device id, not " +
                           std::to_string(p.device));
  return Properties{TETHER_RESOURCE_KIND_CALLBACK, p.device, p.device_accessible, p.host_accessible};
}

class CallbackResource final : public Resource {
 public:
  CallbackResource(CallbackFunctions f, CallbackProperties p)
      : Resource(callback_properties(f, p)), fns_(std::move(f)) {}

  ~CallbackResource() override {
    if (fns_.destroy) {
      try {
        fns_.destroy();
      } catch (...) {  // a destroy callback must not throw; nothing to report it to
      }
    }
  }

  const char* name() const noexcept override { return "callback"; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_t stream) override {
    return do_allocate_for(kCaller, bytes, alignment, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    do_deallocate_for(kCaller, ptr, bytes, alignment, stream);
  }

  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    void* p = fns_.allocate(bytes, alignment, stream);
    if (p == nullptr)
      throw OutOfMemory("callback resource: the allocate callback returned no memory for " +
                        std::to_string(bytes) + " bytes");
    if (reinterpret_cast<std::uintptr_t>(p) % alignment != 0) {
      give_back(p, bytes, alignment, stream);
      throw_invalid_argument("callback resource: the allocate callback returned " + pointer_text(p) +
                             ", which is not aligned to the " + std::to_string(alignment) +
                             " bytes asked for (given back to the callback)");
    }
    bool inserted = false;
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      auto [it, fresh] = live_.emplace(p, Record{bytes, alignment, owner, false, ++sequence_});
      if (!fresh && it->second.freeing) {
        // Its deallocate callback has run (the user reused the address) but
        // that thread has not erased the record yet: this record replaces it.
        it->second = Record{bytes, alignment, owner, false, sequence_};
        fresh = true;
      }
      inserted = fresh;
    } catch (...) {  // no memory for the record: the allocation must not be lost
      give_back(p, bytes, alignment, stream);
      throw;
    }
    if (!inserted)  // never give it back: it is someone's live allocation
      throw Error(TETHER_ERROR_INTERNAL, "callback resource: the allocate callback returned " + pointer_text(p) +
                                             ", which it had handed out before and which is still allocated");
    return p;
  }

  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    std::uint64_t sequence = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(ptr);
      if (it == live_.end() || it->second.owner != owner || it->second.freeing)
        throw_invalid_argument("callback resource: pointer " + pointer_text(ptr) +
                               " was not allocated by this resource for this caller (or was already freed)");
      if (it->second.bytes != bytes || it->second.alignment != alignment)
        throw_invalid_argument("callback resource: pointer " + pointer_text(ptr) + " was allocated with size " +
                               std::to_string(it->second.bytes) + " and alignment " +
                               std::to_string(it->second.alignment) + ", freed with size " +
                               std::to_string(bytes) + " and alignment " + std::to_string(alignment));
      it->second.freeing = true;  // a concurrent free of the same pointer is refused meanwhile
      sequence = it->second.sequence;
    }
    try {
      fns_.deallocate(ptr, bytes, alignment, stream);
    } catch (...) {  // refused: the allocation stays recorded, as if nothing happened
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(ptr);
      if (it != live_.end() && it->second.sequence == sequence) it->second.freeing = false;
      throw;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it != live_.end() && it->second.sequence == sequence) live_.erase(it);  // else: already handed out again
  }

 private:
  struct Record {
    std::size_t bytes = 0;
    std::size_t alignment = 0;
    owner_t owner = kCaller;
    bool freeing = false;  // the deallocate callback is running
    std::uint64_t sequence = 0;  // which allocation of this address
  };

  void give_back(void* p, std::size_t bytes, std::size_t alignment, stream_t stream) noexcept {
    try {
      fns_.deallocate(p, bytes, alignment, stream);
    } catch (...) {  // the callback refused its own memory: nothing more we can do
    }
  }

  CallbackFunctions fns_;
  std::mutex mutex_;
  std::unordered_map<void*, Record> live_;
  std::uint64_t sequence_ = 0;  // guarded by mutex_
};

}  // namespace

ResourcePtr make_callback_resource(CallbackFunctions functions, CallbackProperties properties) {
  return std::make_shared<CallbackResource>(std::move(functions), properties);
}

}  // namespace tether::core
