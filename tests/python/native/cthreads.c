/*
 * cthreads.c - threads Python never created, calling a tether resource.
 *
 * Loaded with ctypes by tests/python/test_callbacks.py: the threads allocate
 * from a resource whose callbacks are Python functions, so the callbacks run
 * on foreign threads and must take the GIL themselves.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <tether/tether.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  tether_resource_t* resource;
  int rounds;
  atomic_int* failures;
} job;

static void* work(void* arg) {
  job* j = (job*)arg;
  int i;
  for (i = 0; j->rounds < 0 || i < j->rounds; ++i) {
    void* p = NULL;
    size_t n = (size_t)(i % 13) * 32 + 16;
    if (tether_resource_allocate(j->resource, n, 0, 0, &p) != TETHER_OK) {
      atomic_fetch_add(j->failures, 1);
      continue;
    }
    memset(p, 0x5a, n);
    if (tether_resource_deallocate(j->resource, p, n, 0, 0) != TETHER_OK) atomic_fetch_add(j->failures, 1);
  }
  return NULL;
}

/* Run `threads` (at most 16) threads of `rounds` allocate/free pairs each on
   `resource` and join them; returns the number of failed calls. */
EXPORT int cthreads_hammer(uintptr_t resource, int threads, int rounds) {
  pthread_t t[16];
  job jobs[16];
  atomic_int failures = 0;
  int i;
  if (threads > 16) threads = 16;
  for (i = 0; i < threads; ++i) {
    jobs[i].resource = (tether_resource_t*)resource;
    jobs[i].rounds = rounds;
    jobs[i].failures = &failures;
    pthread_create(&t[i], NULL, work, &jobs[i]);
  }
  for (i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  return atomic_load(&failures);
}

/* Start `threads` detached threads that allocate and free on `resource`
   forever (each holds its own reference): for exit-while-calling tests. */
static atomic_int g_forever_failures;
EXPORT int cthreads_start_forever(uintptr_t resource, int threads) {
  static job j;
  int i;
  j.resource = (tether_resource_t*)resource;
  j.rounds = -1;
  j.failures = &g_forever_failures;
  for (i = 0; i < threads; ++i) {
    pthread_t t;
    if (tether_resource_retain(j.resource) != TETHER_OK) return -1;
    if (pthread_create(&t, NULL, work, &j) != 0) return -1;
    pthread_detach(t);
  }
  return 0;
}
