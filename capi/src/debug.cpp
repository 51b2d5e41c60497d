// Census, orphans and the leak report at exit.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "internal.hpp"
#include "orphans.hpp"

namespace tether::capi::orphans {
namespace {

struct Orphan {
  core::ResourcePtr resource;
  std::int64_t count;
  std::int64_t bytes;
};

struct State {
  std::mutex mutex;
  std::vector<Orphan> list;
  std::atomic<bool> report{false};
};

State& state() {
  static State* s = new State;  // never destroyed: used from exit handlers
  return *s;
}

void report_at_exit() {
  State& s = state();
  if (!s.report.load()) return;
  std::size_t n = 0;
  long long bytes = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    n = s.list.size();
    for (const Orphan& o : s.list) bytes += o.bytes;
  }
  const std::size_t buffers = registry::live(static_cast<std::uint32_t>(ObjectType::Buffer));
  const std::size_t resources = registry::live(static_cast<std::uint32_t>(ObjectType::Resource));
  if (n == 0 && buffers == 0) return;
  std::fprintf(stderr,
               "tether: at exit: %zu orphaned resource(s) holding %lld byte(s) of raw allocations "
               "never deallocated; %zu buffer(s) and %zu resource handle(s) still live\n",
               n, bytes, buffers, resources);
}

// Registered when libtether is loaded.
struct Init {
  Init() {
    const char* env = std::getenv("TETHER_LEAK_REPORT");
    if (env != nullptr && std::strcmp(env, "0") != 0 && env[0] != '\0') state().report = true;
    std::atexit(report_at_exit);
  }
};
Init g_init;

}  // namespace

void adopt(core::ResourcePtr resource, std::int64_t count, std::int64_t bytes) noexcept {
  try {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.list.push_back(Orphan{std::move(resource), count, bytes});
  } catch (...) {
    // Could not record it: leak the resource rather than free memory in use.
    new core::ResourcePtr(std::move(resource));
  }
}

std::size_t count() noexcept {
  ForkGate gate;  // takes the orphan lock (fork.cpp)
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.list.size();
}

std::uint64_t bytes() noexcept {
  ForkGate gate;  // takes the orphan lock (fork.cpp)
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::int64_t b = 0;
  for (const Orphan& o : s.list) b += o.bytes;
  return static_cast<std::uint64_t>(b);
}

void set_report(bool on) noexcept { state().report = on; }

}  // namespace tether::capi::orphans

extern "C" {

TETHER_API size_t tether_debug_live_objects(tether_object_type_t type) {
  return tether::capi::registry::live(static_cast<std::uint32_t>(type));
}

TETHER_API size_t tether_debug_orphaned_resources(void) { return tether::capi::orphans::count(); }

TETHER_API uint64_t tether_debug_orphaned_bytes(void) { return tether::capi::orphans::bytes(); }

TETHER_API void tether_debug_set_leak_report(int enable) { tether::capi::orphans::set_report(enable != 0); }

}  // extern "C"
