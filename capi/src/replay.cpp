// The replay engine of tether/replay.h: a trace of allocate/free operations
// run against a resource on several threads, timed, with the trace's thread
// and stream structure kept (the `tether bench` and `tether replay` commands).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "internal.hpp"

namespace tether::capi {
namespace {

constexpr std::uint32_t kMaxThreads = 1024;
const tether_replay_options_t kReplayDefaults = TETHER_REPLAY_OPTIONS_INIT;

enum : std::uint8_t { kPending = 0, kDone = 1, kFailed = 2 };

struct Plan {
  std::vector<std::vector<std::size_t>> per_thread;  // op indices of each thread, in trace order
  std::vector<std::size_t> allocation_of;           // for a free: the index of its allocate op
};

Plan plan(const tether_replay_op_t* ops, std::size_t count, const tether_replay_options_t& o) {
  const std::uint32_t threads = o.threads == 0 ? 1 : o.threads;
  if (threads > kMaxThreads)
    core::throw_invalid_argument("options.threads is " + std::to_string(threads) + " (at most " +
                                 std::to_string(kMaxThreads) + ")");
  if (count > 0 && ops == nullptr) core::throw_invalid_argument("ops is NULL but count is " + std::to_string(count));
  const std::size_t streams = o.streams == nullptr ? 1 : o.stream_count;
  if (o.streams != nullptr && o.stream_count == 0) core::throw_invalid_argument("options.streams is set but stream_count is 0");
  if (o.slot_count > (std::uint64_t{1} << 32))
    core::throw_invalid_argument("options.slot_count " + std::to_string(o.slot_count) + " is too large (at most 2^32)");
  Plan p;
  p.per_thread.resize(threads);
  p.allocation_of.assign(count, SIZE_MAX);
  std::vector<std::size_t> live(static_cast<std::size_t>(o.slot_count), SIZE_MAX);  // slot -> its allocate op
  for (std::size_t i = 0; i < count; ++i) {
    const tether_replay_op_t& op = ops[i];
    const std::string at = "ops[" + std::to_string(i) + "]";
    if (op.slot >= o.slot_count)
      core::throw_invalid_argument(at + ".slot " + std::to_string(op.slot) + " is not below options.slot_count " +
                                   std::to_string(o.slot_count));
    if (op.thread >= threads)
      core::throw_invalid_argument(at + ".thread " + std::to_string(op.thread) + " is not below options.threads " +
                                   std::to_string(threads));
    if (op.stream >= streams)
      core::throw_invalid_argument(at + ".stream " + std::to_string(op.stream) + " is not below the stream count " +
                                   std::to_string(streams));
    std::size_t& slot = live[static_cast<std::size_t>(op.slot)];
    if (op.action == TETHER_REPLAY_ALLOCATE) {
      if (slot != SIZE_MAX)
        core::throw_invalid_argument(at + " allocates slot " + std::to_string(op.slot) + ", which ops[" +
                                     std::to_string(slot) + "] allocated and nothing freed since");
      slot = i;
    } else if (op.action == TETHER_REPLAY_DEALLOCATE) {
      if (slot == SIZE_MAX)
        core::throw_invalid_argument(at + " frees slot " + std::to_string(op.slot) + ", which holds no allocation then");
      p.allocation_of[i] = slot;
      slot = SIZE_MAX;
    } else {
      core::throw_invalid_argument(at + ".action is " + std::to_string(op.action) +
                                   " (TETHER_REPLAY_ALLOCATE = 1 or TETHER_REPLAY_DEALLOCATE = 2)");
    }
    p.per_thread[op.thread].push_back(i);
  }
  return p;
}

struct Run {
  tether_resource_t* resource;
  const tether_replay_op_t* ops;
  const tether_replay_options_t* o;
  const Plan* plan;
  std::unique_ptr<std::atomic<std::uint8_t>[]> state;  // per allocate op
  std::vector<void*> ptr;                               // per allocate op
  std::atomic<std::int64_t> live{0}, peak{0};
  std::atomic<std::uint64_t> done{0}, allocations{0}, deallocations{0}, failed{0}, skipped{0};
  std::atomic<std::uint64_t> samples{0}, failed_written{0};
  std::atomic<tether_status_t> free_error{TETHER_OK};
  std::atomic<bool> go{false}, abort{false};
  std::chrono::steady_clock::time_point start;

  tether_stream_t stream_of(const tether_replay_op_t& op) const {
    return o->streams == nullptr ? 0 : o->streams[op.stream];
  }

  void sample(std::uint64_t n) {
    if (o->sample_every == 0 || n % o->sample_every != 0 || o->samples == nullptr) return;
    const std::uint64_t k = samples.fetch_add(1);
    if (k >= o->sample_capacity) return;
    tether_replay_sample_t& s = o->samples[k];
    s.ops_done = n;
    s.time_ns = std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    const std::int64_t l = live.load(std::memory_order_relaxed);
    s.live_bytes = l > 0 ? std::uint64_t(l) : 0;
    s.footprint_bytes = 0;
    if (o->footprint != nullptr) {
      tether_statistics_t st = TETHER_STATISTICS_INIT;
      if (tether_resource_get_statistics(o->footprint, &st) == TETHER_OK) s.footprint_bytes = st.current_bytes;
    }
  }

  void thread_main(std::uint32_t t) {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    if (abort.load(std::memory_order_acquire)) return;
    for (std::size_t i : plan->per_thread[t]) {
      const tether_replay_op_t& op = ops[i];
      if (op.action == TETHER_REPLAY_ALLOCATE) {
        void* p = nullptr;
        if (tether_resource_allocate(resource, static_cast<std::size_t>(op.size), 0, stream_of(op), &p) == TETHER_OK) {
          ptr[i] = p;
          allocations.fetch_add(1, std::memory_order_relaxed);
          const std::int64_t now = live.fetch_add(std::int64_t(op.size), std::memory_order_relaxed) + std::int64_t(op.size);
          std::int64_t seen = peak.load(std::memory_order_relaxed);
          while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
          }
          state[i].store(kDone, std::memory_order_release);
        } else {
          failed.fetch_add(1, std::memory_order_relaxed);
          if (o->failed_ops != nullptr) {
            const std::uint64_t k = failed_written.fetch_add(1);
            if (k < o->failed_capacity) o->failed_ops[k] = i;
          }
          state[i].store(kFailed, std::memory_order_release);
        }
      } else {
        const std::size_t a = plan->allocation_of[i];
        std::uint8_t s;
        while ((s = state[a].load(std::memory_order_acquire)) == kPending) std::this_thread::yield();
        if (s == kFailed) {
          skipped.fetch_add(1, std::memory_order_relaxed);
        } else {
          const tether_status_t st = tether_resource_deallocate(resource, ptr[a], static_cast<std::size_t>(ops[a].size), 0, stream_of(op));
          if (st != TETHER_OK) {
            tether_status_t none = TETHER_OK;
            free_error.compare_exchange_strong(none, st);
          } else {
            deallocations.fetch_add(1, std::memory_order_relaxed);
            live.fetch_sub(std::int64_t(ops[a].size), std::memory_order_relaxed);
          }
          state[a].store(kFailed + 1, std::memory_order_release);  // freed
        }
      }
      sample(done.fetch_add(1, std::memory_order_relaxed) + 1);
    }
  }
};

}  // namespace
}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_replay_options_init(tether_replay_options_t* options, size_t struct_size) {
  return guard("tether_replay_options_init", [&] { init_options(options, struct_size, kReplayDefaults, "options"); });
}

TETHER_API tether_status_t tether_replay_run(tether_resource_t* resource, const tether_replay_op_t* ops, size_t count,
                                             const tether_replay_options_t* options, tether_replay_result_t* out) {
  return guard("tether_replay_run", [&] {
    require_out(out);
    check_struct_size<tether_replay_result_t>(out->struct_size, "out");
    { ResourceRef check_handle(resource); }  // INVALID_HANDLE before anything runs
    const tether_replay_options_t o = read_options(options, kReplayDefaults, "options");
    if (o.footprint != nullptr) { ResourceRef check_footprint(o.footprint); }
    const Plan p = plan(ops, count, o);
    Run run;
    run.resource = resource;
    run.ops = ops;
    run.o = &o;
    run.plan = &p;
    run.state.reset(new std::atomic<std::uint8_t>[count == 0 ? 1 : count]);
    for (std::size_t i = 0; i < count; ++i) run.state[i].store(kPending, std::memory_order_relaxed);
    run.ptr.assign(count, nullptr);
    if (o.footprint != nullptr) (void)tether_resource_reset_peak_statistics(o.footprint);

    const std::uint32_t threads = o.threads == 0 ? 1 : o.threads;
    std::vector<std::thread> pool;
    pool.reserve(threads);
    try {
      for (std::uint32_t t = 1; t < threads; ++t) pool.emplace_back([&run, t] { run.thread_main(t); });
    } catch (...) {
      run.abort.store(true, std::memory_order_release);  // started threads return without replaying
      run.go.store(true, std::memory_order_release);
      for (auto& th : pool) th.join();
      throw;
    }
    run.start = std::chrono::steady_clock::now();
    run.go.store(true, std::memory_order_release);
    run.thread_main(0);
    for (auto& th : pool) th.join();
    const auto elapsed = std::chrono::steady_clock::now() - run.start;

    // Free what the trace left live (in its own stream), so nothing leaks.
    for (std::size_t i = 0; i < count; ++i) {
      if (ops[i].action == TETHER_REPLAY_ALLOCATE && run.state[i].load() == kDone) {
        if (tether_resource_deallocate(resource, run.ptr[i], static_cast<std::size_t>(ops[i].size), 0,
                                       run.stream_of(ops[i])) == TETHER_OK)
          run.deallocations.fetch_add(1);
      }
    }
    tether_replay_result_t r = TETHER_REPLAY_RESULT_INIT;
    r.elapsed_ns = std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
    r.allocations = run.allocations.load();
    r.deallocations = run.deallocations.load();
    r.failed_allocations = run.failed.load();
    r.skipped_deallocations = run.skipped.load();
    r.peak_live_bytes = std::uint64_t(run.peak.load());
    r.samples_written = std::min<std::uint64_t>(run.samples.load(), o.samples ? o.sample_capacity : 0);
    r.failed_written = std::min<std::uint64_t>(run.failed_written.load(), o.failed_ops ? o.failed_capacity : 0);
    if (o.footprint != nullptr) {
      tether_statistics_t st = TETHER_STATISTICS_INIT;
      if (tether_resource_get_statistics(o.footprint, &st) == TETHER_OK) r.peak_footprint_bytes = st.peak_bytes;
    }
    write_info(out, r, "out");
    if (const tether_status_t e = run.free_error.load(); e != TETHER_OK)
      throw core::Error(e, "a free of the replay was refused (the resource's books disagree with the trace)");
  });
}

}  // extern "C"
