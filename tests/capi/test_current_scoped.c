/*
 * Thread-scoped overrides (push/pop) and the library-safe default
 * (set_if_unset) of the current-resource table (DESIGN.md 2.3): a stack per
 * thread and per slot; other threads keep seeing the process slot; set and
 * lock touch the process slot only; every reference comes back. Locking is
 * irreversible, so the lock interplay runs last.
 */
#include <pthread.h>
#include <sched.h>

#include "test_support.h"

#ifndef ROUNDS
#define ROUNDS 2000
#endif
#define THREADS 8

static size_t g_base;

static tether_resource_t* current_host(void) {
  tether_resource_t* r = NULL;
  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &r));
  return r; /* +1: the caller releases it */
}

/* True if the host slot currently reads as `expected` on this thread. */
static int host_is(tether_resource_t* expected) {
  tether_resource_t* r = current_host();
  int same = r == expected;
  tether_resource_release(r);
  return same;
}

/* Back to an unset host slot whose default exists (what g_base counts). */
static void reset_host_slot(void) {
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL));
  tether_resource_release(current_host());
}

/* ---- a thread that reads (or pushes) and reports ------------------------------ */

struct probe {
  tether_resource_t* seen; /* +1, what get returned on that thread */
  tether_resource_t* push; /* if set: pushed, read, then left pushed when the thread exits */
  tether_status_t status;
};

static void* probe_main(void* arg) {
  struct probe* p = (struct probe*)arg;
  if (p->push != NULL) p->status = tether_current_resource_push(TETHER_DEVICE_HOST, p->push);
  if (p->status == TETHER_OK) p->status = tether_current_resource_get(TETHER_DEVICE_HOST, &p->seen);
  return NULL;
}

static tether_resource_t* seen_by_other_thread(void) {
  struct probe p = {NULL, NULL, TETHER_OK};
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, probe_main, &p) == 0);
  pthread_join(t, NULL);
  CHECK_OK(p.status);
  tether_resource_release(p.seen); /* the process slot holds it: still valid as an identity */
  return p.seen;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_push_pop_nest_on_this_thread_only(void) {
  tether_resource_t *dflt = current_host(), *a = NULL, *b = NULL;
  REQUIRE_OK(tether_host_resource_create(&a));
  REQUIRE_OK(tether_pool_resource_create(a, NULL, &b));
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, a));
  CHECK(host_is(a));
  CHECK(seen_by_other_thread() == dflt); /* other threads: the process slot */
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, b));
  CHECK(host_is(b));
  CHECK(seen_by_other_thread() == dflt);
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  CHECK(host_is(a));
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  CHECK(host_is(dflt));
  CHECK_OK(tether_resource_release(dflt));
  CHECK_OK(tether_resource_release(b));
  CHECK_OK(tether_resource_release(a));
  CHECK(!tt_resource_alive(a) && !tt_resource_alive(b)); /* the stacks gave their references back */
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_push_retains_and_pop_releases(void) {
  tether_resource_t* a = NULL;
  tether_resource_t* got = NULL;
  tether_buffer_t* buf = NULL;
  REQUIRE_OK(tether_host_resource_create(&a));
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, a));
  CHECK_OK(tether_resource_release(a)); /* only the stack holds it now */
  CHECK(tt_resource_alive(a));
  CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 64, 0, &buf)); /* table allocations see it */
  CHECK_OK(tether_buffer_get_resource(buf, &got));
  CHECK(got == a); /* borrowed */
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  CHECK(tt_resource_alive(a)); /* the buffer keeps its resource */
  CHECK_OK(tether_buffer_release(buf));
  CHECK(!tt_resource_alive(a));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_argument_errors(void) {
  tether_resource_t *h = NULL, *stale = NULL;
  int installed = -1;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_pop(TETHER_DEVICE_HOST),
              "nothing was pushed for the host slot on this thread");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_pop(TETHER_DEVICE_HOST),
              "tether_current_resource_pop");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_push(TETHER_DEVICE_HOST, NULL), "resource");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, NULL, &installed),
              "resource");
  CHECK(installed == 0);
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_host_resource_create(&stale));
  REQUIRE_OK(tether_resource_release(stale));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_current_resource_push(TETHER_DEVICE_HOST, stale));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, stale, NULL));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_push(-3, h), "device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_pop(100000), "device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_set_if_unset(256, h, NULL), "device");
  if (!tt_have_gpu()) {
    CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_push(0, h));
    CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_push(TETHER_DEVICE_CURRENT, h));
    CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_pop(0));
    CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_set_if_unset(0, h, NULL));
  }
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* With a GPU: stacks are per slot, and the memory rule of set applies to push. */
static void test_per_device_stacks(void) {
  tether_resource_t *cuda = NULL, *host = NULL, *got = NULL;
  if (!tt_have_gpu()) {
    printf("    (skipped: no CUDA device)\n");
    return;
  }
  REQUIRE_OK(tether_cuda_resource_create(0, &cuda));
  REQUIRE_OK(tether_host_resource_create(&host));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_push(TETHER_DEVICE_HOST, cuda), "host");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_push(0, host), "device");
  CHECK_OK(tether_current_resource_push(0, cuda));
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, host));
  CHECK_OK(tether_current_resource_get(0, &got));
  CHECK(got == cuda);
  CHECK_OK(tether_resource_release(got));
  CHECK_OK(tether_current_resource_pop(0));
  CHECK(host_is(host)); /* the host stack is its own */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_pop(0), "nothing was pushed for device 0");
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  CHECK_OK(tether_resource_release(cuda));
  CHECK_OK(tether_resource_release(host));
  CHECK_OK(tether_current_resource_get(0, &got)); /* the device default may have been made: count it */
  CHECK_OK(tether_resource_release(got));
  g_base = tether_debug_live_objects(TETHER_OBJECT_ANY);
}

static void test_set_while_overridden(void) {
  tether_resource_t *dflt = current_host(), *mine = NULL, *app = NULL, *prev = NULL;
  REQUIRE_OK(tether_host_resource_create(&mine));
  REQUIRE_OK(tether_host_resource_create(&app));
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, mine));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, app, &prev));
  CHECK(prev == dflt); /* set reports the process slot, not the override */
  CHECK_OK(tether_resource_release(prev));
  CHECK(host_is(mine));                 /* this thread: still its override */
  CHECK(seen_by_other_thread() == app); /* everyone else: the new process value */
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  CHECK(host_is(app));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, dflt, NULL));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL)); /* unset again */
  CHECK_OK(tether_resource_release(dflt));
  tether_resource_release(current_host()); /* a fresh default */
  CHECK_OK(tether_resource_release(mine));
  CHECK_OK(tether_resource_release(app));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_set_if_unset(void) {
  tether_resource_t *dflt = current_host(), *lib = NULL, *lib2 = NULL, *app = NULL, *prev = NULL;
  int installed = -1;
  REQUIRE_OK(tether_host_resource_create(&lib));
  REQUIRE_OK(tether_host_resource_create(&lib2));
  REQUIRE_OK(tether_host_resource_create(&app));

  /* The default was created (by get) but never set: the library's resource goes in. */
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, lib, &installed));
  CHECK(installed == 1);
  CHECK(host_is(lib));
  CHECK(tt_resource_alive(dflt)); /* our +1 from get keeps the replaced default */
  CHECK_OK(tether_resource_release(dflt));
  CHECK(!tt_resource_alive(dflt)); /* the table let go of it */

  /* Set (by that call) now: a second library installs nothing. */
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, lib2, &installed));
  CHECK(installed == 0);
  CHECK(host_is(lib));

  /* The application's explicit choice wins over any later set_if_unset. */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, app, &prev));
  CHECK(prev == lib);
  CHECK_OK(tether_resource_release(prev));
  installed = -1;
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, lib2, &installed));
  CHECK(installed == 0);
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, lib2, NULL)); /* out may be NULL */
  CHECK(host_is(app));

  /* set(NULL) makes the slot unset again. */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL));
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, lib2, &installed));
  CHECK(installed == 1);
  CHECK(host_is(lib2));

  /* set_if_unset changes the process slot, not this thread's override. */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL));
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, app));
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, lib, &installed));
  CHECK(installed == 1);
  CHECK(host_is(app));
  CHECK(seen_by_other_thread() == lib);
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  CHECK(host_is(lib));

  reset_host_slot();
  CHECK_OK(tether_resource_release(lib));
  CHECK_OK(tether_resource_release(lib2));
  CHECK_OK(tether_resource_release(app));
  CHECK(!tt_resource_alive(lib) && !tt_resource_alive(lib2) && !tt_resource_alive(app));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_thread_exit_releases_overrides(void) {
  struct probe p = {NULL, NULL, TETHER_OK};
  pthread_t t;
  REQUIRE_OK(tether_host_resource_create(&p.push));
  REQUIRE(pthread_create(&t, NULL, probe_main, &p) == 0);
  pthread_join(t, NULL); /* the thread exited with its override still pushed */
  CHECK_OK(p.status);
  CHECK(p.seen == p.push);
  CHECK_OK(tether_resource_release(p.seen));
  CHECK(host_is(p.push) == 0); /* never visible here */
  CHECK_OK(tether_resource_release(p.push));
  CHECK(!tt_resource_alive(p.push)); /* the exited thread's stack gave its reference back */
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* The RMM issue: A pushes, B pushes, A pops, B pops - with a process-wide
 * save/restore A would restore its saved value over B's and B would then
 * install A's for good. With per-thread stacks the process slot never moves. */
static atomic_int g_step;
static tether_resource_t *g_ra, *g_rb;
struct interleave {
  tether_resource_t* mine;
  int push_at, pop_at;
  int saw_mine, saw_process_after;
  tether_resource_t* process;
};

static void wait_step(int s) {
  while (atomic_load(&g_step) != s) sched_yield();
}

static void* interleave_main(void* arg) {
  struct interleave* x = (struct interleave*)arg;
  wait_step(x->push_at);
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, x->mine));
  atomic_fetch_add(&g_step, 1);
  wait_step(x->pop_at);
  x->saw_mine = host_is(x->mine);
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  x->saw_process_after = host_is(x->process);
  atomic_fetch_add(&g_step, 1);
  return NULL;
}

static void test_interleaved_threads_keep_the_process_slot(void) {
  tether_resource_t* process = current_host();
  struct interleave a, b;
  pthread_t ta, tb;
  REQUIRE_OK(tether_host_resource_create(&g_ra));
  REQUIRE_OK(tether_host_resource_create(&g_rb));
  a.mine = g_ra, a.push_at = 0, a.pop_at = 2, a.process = process, a.saw_mine = a.saw_process_after = 0;
  b.mine = g_rb, b.push_at = 1, b.pop_at = 3, b.process = process, b.saw_mine = b.saw_process_after = 0;
  atomic_store(&g_step, 0);
  REQUIRE(pthread_create(&ta, NULL, interleave_main, &a) == 0);
  REQUIRE(pthread_create(&tb, NULL, interleave_main, &b) == 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK(a.saw_mine && b.saw_mine);
  CHECK(a.saw_process_after && b.saw_process_after);
  CHECK(host_is(process));
  CHECK(seen_by_other_thread() == process);
  CHECK_OK(tether_resource_release(process));
  CHECK_OK(tether_resource_release(g_ra));
  CHECK_OK(tether_resource_release(g_rb));
  CHECK(!tt_resource_alive(g_ra) && !tt_resource_alive(g_rb));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* Eight threads push and pop their own pools while the main thread sets,
 * sets-if-unset and gets: each thread only ever sees its own pool; nobody
 * else ever sees a thread's pool. */
static tether_resource_t* g_pools[THREADS];
static atomic_int g_running;
static atomic_int g_go;
static atomic_int g_bad;

static int is_a_pool(tether_resource_t* r) {
  int i;
  for (i = 0; i < THREADS; ++i)
    if (r == g_pools[i]) return 1;
  return 0;
}

static void* pusher_main(void* arg) {
  tether_resource_t* mine = g_pools[(intptr_t)arg];
  tether_resource_t* r = NULL;
  int i;
  while (!atomic_load(&g_go)) sched_yield(); /* start together with the setter */
  for (i = 0; i < ROUNDS; ++i) {
    if (tether_current_resource_push(TETHER_DEVICE_HOST, mine) != TETHER_OK) atomic_fetch_add(&g_bad, 1);
    if (i % 2 == 0 && tether_current_resource_push(TETHER_DEVICE_HOST, mine) != TETHER_OK)
      atomic_fetch_add(&g_bad, 1);
    if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK || r != mine) atomic_fetch_add(&g_bad, 1);
    tether_resource_release(r);
    if (i % 2 == 0 && tether_current_resource_pop(TETHER_DEVICE_HOST) != TETHER_OK) atomic_fetch_add(&g_bad, 1);
    if (tether_current_resource_pop(TETHER_DEVICE_HOST) != TETHER_OK) atomic_fetch_add(&g_bad, 1);
    r = NULL;
    if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK || r == NULL || is_a_pool(r))
      atomic_fetch_add(&g_bad, 1);
    tether_resource_release(r);
  }
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

static void test_eight_threads_with_a_setter(void) {
  tether_resource_t *host = NULL, *x = NULL, *y = NULL, *r = NULL;
  pthread_t threads[THREADS];
  intptr_t i;
  int round = 0;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_host_resource_create(&x));
  REQUIRE_OK(tether_host_resource_create(&y));
  for (i = 0; i < THREADS; ++i) REQUIRE_OK(tether_pool_resource_create(host, NULL, &g_pools[i]));
  atomic_store(&g_running, THREADS);
  atomic_store(&g_bad, 0);
  atomic_store(&g_go, 0);
  for (i = 0; i < THREADS; ++i) REQUIRE(pthread_create(&threads[i], NULL, pusher_main, (void*)i) == 0);
  atomic_store(&g_go, 1);
  while (atomic_load(&g_running) > 0 || round < 300) {
    int installed = 0;
    switch (round++ % 3) {
      case 0: CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL)); break;
      case 1: CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, x, NULL)); break;
      default: break;
    }
    CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, y, &installed));
    r = NULL;
    if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK || r == NULL || is_a_pool(r))
      atomic_fetch_add(&g_bad, 1);
    tether_resource_release(r);
  }
  for (i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  CHECK(atomic_load(&g_bad) == 0);
  reset_host_slot();
  for (i = 0; i < THREADS; ++i) {
    CHECK_OK(tether_resource_release(g_pools[i]));
    CHECK(!tt_resource_alive(g_pools[i]));
  }
  CHECK_OK(tether_resource_release(x));
  CHECK_OK(tether_resource_release(y));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* Last (irreversible): lock refuses pushes, keeps earlier overrides poppable,
 * and locks an unset slot's default so set_if_unset installs nothing. */
static void test_lock_interplay(void) {
  tether_resource_t *early = NULL, *late = NULL, *dflt = NULL;
  struct probe p = {NULL, NULL, TETHER_OK};
  pthread_t t;
  int installed = -1;
  REQUIRE_OK(tether_host_resource_create(&early));
  REQUIRE_OK(tether_host_resource_create(&late));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL)); /* unset, no default yet */
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, early));
  CHECK_OK(tether_current_resource_lock(TETHER_DEVICE_HOST)); /* locks the (new) default */
  CHECK_ERROR(TETHER_ERROR_LOCKED, tether_current_resource_push(TETHER_DEVICE_HOST, late), "locked");
  CHECK_ERROR(TETHER_ERROR_LOCKED, tether_current_resource_push(TETHER_DEVICE_HOST, late),
              "tether_current_resource_push");
  p.push = late; /* from another thread too */
  REQUIRE(pthread_create(&t, NULL, probe_main, &p) == 0);
  pthread_join(t, NULL);
  CHECK(p.status == TETHER_ERROR_LOCKED);
  CHECK(host_is(early)); /* the override pushed before the lock stays ... */
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST)); /* ... and can be popped */
  dflt = current_host();
  CHECK(dflt != early && dflt != late);
  CHECK_OK(tether_current_resource_set_if_unset(TETHER_DEVICE_HOST, late, &installed));
  CHECK(installed == 0); /* locked: nothing installed */
  CHECK(host_is(dflt));
  CHECK_OK(tether_resource_release(dflt));
  CHECK_OK(tether_resource_release(early));
  CHECK_OK(tether_resource_release(late));
  CHECK(!tt_resource_alive(early) && !tt_resource_alive(late));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

int main(void) {
  g_base = tt_baseline();
  RUN(test_push_pop_nest_on_this_thread_only);
  RUN(test_push_retains_and_pop_releases);
  RUN(test_argument_errors);
  RUN(test_per_device_stacks);
  RUN(test_set_while_overridden);
  RUN(test_set_if_unset);
  RUN(test_thread_exit_releases_overrides);
  RUN(test_interleaved_threads_keep_the_process_slot);
  RUN(test_eight_threads_with_a_setter);
  RUN(test_lock_interplay);
  return tt_finish("test_current_scoped");
}
