// TrackingAdaptor: a sharded table of what is outstanding.
#include "tether_core/tracking.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "forwarding_adaptor.hpp"

namespace tether::core {

namespace {

constexpr int kMaxFrames = 48;
constexpr std::size_t kShards = 16;

std::uint64_t this_thread_id() noexcept {
  thread_local std::uint64_t id = 0;  // constant-initialised: no TLS guard
  if (id == 0) id = static_cast<std::uint64_t>(::syscall(SYS_gettid));
  return id;
}

std::string hex(std::uintptr_t v) {
  char buf[2 + 2 * sizeof v + 1];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

class TrackingAdaptor final : public ForwardingAdaptor {
 public:
  TrackingAdaptor(ResourcePtr upstream, bool capture_stacks)
      : ForwardingAdaptor(adapted_properties(upstream, TETHER_RESOURCE_KIND_TRACKING, "tracking adaptor"),
                          upstream),
        capture_(capture_stacks) {}

  const char* name() const noexcept override { return "tracking"; }
  bool captures_stacks() const noexcept { return capture_; }

  std::vector<TrackingRecord> outstanding() const {
    std::vector<TrackingRecord> out;
    for (const Shard& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (const auto& kv : s.records) out.push_back(to_record(kv.first, kv.second));
    }
    std::sort(out.begin(), out.end(),
              [](const TrackingRecord& a, const TrackingRecord& b) { return a.sequence < b.sequence; });
    return out;
  }

 protected:
  void* do_allocate_for(owner_t owner, std::size_t bytes, std::size_t alignment, stream_t stream) override {
    Entry e;
    e.size = bytes;
    e.alignment = alignment;
    e.stream = stream;
    e.thread_id = this_thread_id();
    if (capture_) {
      void* frames[kMaxFrames];
      const int n = ::backtrace(frames, kMaxFrames);
      // Frame 0 is this function: start at the caller.
      if (n > 1) e.frames.assign(frames + 1, frames + n);
    }
    void* p = forward_allocate(owner, bytes, alignment, stream);
    e.sequence = next_sequence_.fetch_add(1, std::memory_order_relaxed) + 1;
    try {
      Shard& s = shard(p);
      std::lock_guard<std::mutex> lock(s.mutex);
      s.records.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(e));
    } catch (...) {
      forward_deallocate(owner, p, bytes, alignment, stream);
      throw;
    }
    return p;
  }

  // Take the record out first, so memory the upstream hands out again (to
  // another thread) the moment it is freed can never meet its old record.
  void do_deallocate_for(owner_t owner, void* ptr, std::size_t bytes, std::size_t alignment,
                         stream_t stream) override {
    Shard& s = shard(ptr);
    const auto key = reinterpret_cast<std::uintptr_t>(ptr);
    std::unordered_map<std::uintptr_t, Entry>::node_type node;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      node = s.records.extract(key);
    }
    if (node.empty()) {
      throw_invalid_argument("tracking adaptor: pointer " + hex(key) +
                             " is not an outstanding allocation of this adaptor (foreign or already freed)");
    }
    try {
      forward_deallocate(owner, ptr, bytes, alignment, stream);
    } catch (...) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.records.insert(std::move(node));  // refused: nothing changed
      throw;
    }
  }

 private:
  struct Entry {
    std::size_t size = 0;
    std::size_t alignment = 0;
    stream_t stream = 0;
    std::uint64_t thread_id = 0;
    std::uint64_t sequence = 0;
    std::vector<void*> frames;
  };
  struct alignas(64) Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::uintptr_t, Entry> records;
  };

  Shard& shard(const void* p) noexcept {
    // Allocations are at least 8-aligned and often 256-aligned: mix the bits above.
    const auto v = reinterpret_cast<std::uintptr_t>(p);
    return shards_[((v >> 8) ^ (v >> 16) ^ (v >> 3)) % kShards];
  }

  static TrackingRecord to_record(std::uintptr_t key, const Entry& e) {
    TrackingRecord r;
    r.ptr = reinterpret_cast<void*>(key);
    r.size = e.size;
    r.alignment = e.alignment;
    r.stream = e.stream;
    r.thread_id = e.thread_id;
    r.sequence = e.sequence;
    r.frames = e.frames;
    return r;
  }

  const bool capture_;
  std::atomic<std::uint64_t> next_sequence_{0};
  Shard shards_[kShards];
};

const TrackingAdaptor& as_tracking(const Resource& r) {
  auto* a = dynamic_cast<const TrackingAdaptor*>(&r);
  if (a == nullptr) {
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("resource '") + r.name() + "' is not a tracking adaptor");
  }
  return *a;
}

}  // namespace

ResourcePtr make_tracking_adaptor(ResourcePtr upstream, bool capture_stacks) {
  return std::make_shared<TrackingAdaptor>(std::move(upstream), capture_stacks);
}

std::vector<TrackingRecord> tracking_outstanding(const Resource& r) { return as_tracking(r).outstanding(); }

bool tracking_captures_stacks(const Resource& r) { return as_tracking(r).captures_stacks(); }

namespace {

// The object (shared library or executable) a code address belongs to.
const void* object_of(const void* address) noexcept {
  Dl_info info;
  return ::dladdr(address, &info) != 0 ? info.dli_fbase : nullptr;
}

// How many leading frames are tether's own (allocate, the C entry point, the
// adaptor): frames in the shared library that holds this code. None when
// this code is part of the program itself (tether linked statically: its
// frames cannot be told from the caller's) or the address is unknown.
std::size_t own_leading_frames(const std::vector<void*>& frames) noexcept {
  const void* self = object_of(reinterpret_cast<const void*>(&own_leading_frames));
  const void* program = object_of(reinterpret_cast<const void*>(::getauxval(AT_ENTRY)));
  if (self == nullptr || self == program) return 0;
  std::size_t n = 0;
  while (n < frames.size() && object_of(frames[n]) == self) ++n;
  return n;
}

}  // namespace

std::string tracking_stack_text(const std::vector<void*>& frames) {
  const std::size_t skip = own_leading_frames(frames);
  if (frames.size() == skip) return {};
  std::string out;
  char** names = ::backtrace_symbols(frames.data() + skip, static_cast<int>(frames.size() - skip));
  for (std::size_t i = skip; i < frames.size(); ++i) {
    out += "  #" + std::to_string(i - skip) + " ";
    out += names != nullptr ? names[i - skip] : hex(reinterpret_cast<std::uintptr_t>(frames[i]));
    out += '\n';
  }
  std::free(names);  // NOLINT: backtrace_symbols' one malloc'd block
  return out;
}

std::string tracking_report(const Resource& r) {
  const std::vector<TrackingRecord> records = as_tracking(r).outstanding();
  std::uint64_t bytes = 0;
  for (const TrackingRecord& rec : records) bytes += rec.size;
  std::string out = "tether tracking adaptor: " + std::to_string(records.size()) + " outstanding allocation" +
                    (records.size() == 1 ? "" : "s") + ", " + std::to_string(bytes) + " bytes\n";
  for (const TrackingRecord& rec : records) {
    out += "#" + std::to_string(rec.sequence) + " ptr=" + hex(reinterpret_cast<std::uintptr_t>(rec.ptr)) +
           " size=" + std::to_string(rec.size) + " alignment=" + std::to_string(rec.alignment) +
           " stream=" + hex(rec.stream) + " thread=" + std::to_string(rec.thread_id) + "\n";
    out += tracking_stack_text(rec.frames);
  }
  return out;
}

}  // namespace tether::core
