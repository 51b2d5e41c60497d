/*
 * test_replay.c - the replay engine (tether/replay.h): validation before
 * anything runs, cross-thread frees, failures recorded with their op index,
 * the footprint through a statistics adaptor, timeline samples, nothing leaked.
 */
#include "test_support.h"

#define A TETHER_REPLAY_ALLOCATE
#define F TETHER_REPLAY_DEALLOCATE

static tether_replay_op_t op(uint32_t action, uint64_t slot, uint64_t size, uint32_t thread, uint32_t stream) {
  tether_replay_op_t o;
  memset(&o, 0, sizeof o);
  o.action = action;
  o.slot = slot;
  o.size = size;
  o.thread = thread;
  o.stream = stream;
  return o;
}

static void validates_before_running(void) {
  tether_resource_t* stats = NULL;
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &stats));
  tether_replay_options_t o = TETHER_REPLAY_OPTIONS_INIT;
  o.slot_count = 2;
  tether_replay_result_t r = TETHER_REPLAY_RESULT_INIT;
  tether_replay_op_t bad_slot[] = {op(A, 2, 8, 0, 0)};
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, bad_slot, 1, &o, &r), "ops[0].slot 2");
  tether_replay_op_t bad_thread[] = {op(A, 0, 8, 0, 0), op(F, 0, 0, 3, 0)};
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, bad_thread, 2, &o, &r), "ops[1].thread 3");
  tether_replay_op_t bad_stream[] = {op(A, 0, 8, 0, 1)};
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, bad_stream, 1, &o, &r), "ops[0].stream 1");
  tether_replay_op_t twice[] = {op(A, 0, 8, 0, 0), op(A, 0, 8, 0, 0)};
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, twice, 2, &o, &r), "ops[1] allocates slot 0");
  tether_replay_op_t unpaired[] = {op(F, 1, 0, 0, 0)};
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, unpaired, 1, &o, &r), "ops[0] frees slot 1");
  tether_replay_op_t bad_action[] = {op(7, 0, 8, 0, 0)};
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, bad_action, 1, &o, &r), "ops[0].action is 7");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, NULL, 3, &o, &r), "ops is NULL");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_replay_run(stats, bad_slot, 1, &o, NULL), "out");
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_replay_run((tether_resource_t*)(uintptr_t)0x1234, bad_slot, 1, &o, &r));
  /* nothing ran: the adaptor saw no allocation */
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  CHECK_OK(tether_resource_get_statistics(stats, &s));
  CHECK(s.total_count == 0);
  tether_resource_release(stats);
  tether_resource_release(host);
}

/* 4 threads; each thread frees what the next one allocated (cross-thread frees wait for their allocation). */
static void threads_free_each_others_memory(void) {
  enum { T = 4, N = 2000 };
  static tether_replay_op_t ops[T * N * 2];
  size_t n = 0;
  for (uint64_t i = 0; i < N; ++i)
    for (uint32_t t = 0; t < T; ++t) ops[n++] = op(A, i * T + t, 64 + 8 * (i % 50), t, 0);
  for (uint64_t i = 0; i < N; ++i)
    for (uint32_t t = 0; t < T; ++t) ops[n++] = op(F, i * T + ((t + 1) % T), 0, t, 0);
  tether_resource_t *host, *pool, *stats;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &stats));  /* the footprint: what the pool holds */
  REQUIRE_OK(tether_pool_resource_create(stats, NULL, &pool));
  tether_replay_options_t o = TETHER_REPLAY_OPTIONS_INIT;
  o.threads = T;
  o.slot_count = (uint64_t)T * N;
  o.footprint = stats;
  tether_replay_sample_t samples[64];
  o.sample_every = n / 32;
  o.samples = samples;
  o.sample_capacity = 64;
  tether_replay_result_t r = TETHER_REPLAY_RESULT_INIT;
  REQUIRE_OK(tether_replay_run(pool, ops, n, &o, &r));
  CHECK(r.allocations == (uint64_t)T * N);
  CHECK(r.deallocations == (uint64_t)T * N);
  CHECK(r.failed_allocations == 0 && r.skipped_deallocations == 0);
  CHECK(r.elapsed_ns > 0);
  uint64_t all = 0;
  for (uint64_t i = 0; i < N; ++i) all += T * (64 + 8 * (i % 50));
  CHECK(r.peak_live_bytes <= all && r.peak_live_bytes >= all / 4);
  CHECK(r.peak_footprint_bytes >= r.peak_live_bytes);
  CHECK(r.samples_written >= 30 && r.samples_written <= 33);
  for (uint64_t k = 1; k < r.samples_written; ++k) CHECK(samples[k].ops_done != samples[k - 1].ops_done);
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  CHECK_OK(tether_resource_get_statistics(stats, &s));
  CHECK(s.total_count >= 1);
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  CHECK_OK(tether_resource_get_pool_info(pool, &info));
  CHECK(info.free_bytes == info.pool_size);  /* everything came back */
  tether_resource_release(pool);
  tether_resource_release(stats);
  tether_resource_release(host);
}

/* A bounded pool runs out: failures are recorded by op index, their frees skipped, the rest goes on. */
static void failures_are_recorded(void) {
  tether_resource_t *host, *pool;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_pool_options_t po = TETHER_POOL_OPTIONS_INIT;
  po.maximum_size = 1 << 20;
  po.growth_size = 1 << 20;
  REQUIRE_OK(tether_pool_resource_create(host, &po, &pool));
  tether_replay_op_t ops[] = {op(A, 0, 600 << 10, 0, 0), op(A, 1, 600 << 10, 0, 0), op(F, 1, 0, 0, 0),
                              op(F, 0, 0, 0, 0), op(A, 2, 900 << 10, 0, 0)};
  uint64_t failed[4] = {99, 99, 99, 99};
  tether_replay_options_t o = TETHER_REPLAY_OPTIONS_INIT;
  o.slot_count = 3;
  o.failed_ops = failed;
  o.failed_capacity = 4;
  tether_replay_result_t r = TETHER_REPLAY_RESULT_INIT;
  REQUIRE_OK(tether_replay_run(pool, ops, 5, &o, &r));
  CHECK(r.allocations == 2 && r.failed_allocations == 1 && r.skipped_deallocations == 1);
  CHECK(r.failed_written == 1 && failed[0] == 1 && failed[1] == 99);
  CHECK(r.deallocations == 2); /* slot 0 freed by the trace, slot 2 left live: freed by the engine */
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  CHECK_OK(tether_resource_get_pool_info(pool, &info));
  CHECK(info.free_bytes == info.pool_size);
  tether_resource_release(pool);
  tether_resource_release(host);
}

int main(void) {
  const size_t before = tt_baseline();
  RUN(validates_before_running);
  RUN(threads_free_each_others_memory);
  RUN(failures_are_recorded);
  CHECK_LIVE(TETHER_OBJECT_ANY, before);
  return tt_finish("test_replay");
}
