/*
 * fork() while other threads are busy inside tether.
 *
 * Worker threads allocate and free (host resource, pool, buffers), create and
 * release resources and adaptors, and set, get, push and pop the current
 * resource, without pause. The main thread forks FORKS times meanwhile. Every
 * child must be able to use tether: create a host resource and a pool, allocate
 * and free, create and release buffers, get and set the table, release the
 * handles it inherited, see its census come back to where it started, and get
 * TETHER_ERROR_NO_DEVICE (naming fork) from CUDA, which does not survive fork().
 * With a GPU, one more thread allocates device memory at every fork, and the
 * child releases the parent's CUDA resource (no CUDA call may follow).
 * A child that does not exit 0 within CHILD_TIMEOUT_S seconds (a deadlock
 * in a lock held by a thread that does not exist in the child, or a release
 * waiting on such a thread's hazard word) fails the test.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

#ifndef FORKS
#define FORKS 150
#endif
#ifndef WORKERS
#define WORKERS 6
#endif
#define CHILD_TIMEOUT_S 20

static tether_resource_t* g_host;
static tether_resource_t* g_pool;
static tether_resource_t* g_cuda; /* with a GPU: a CUDA resource in use at every fork */
static atomic_int g_stop;
static atomic_long g_ops;

/* Any failure status in a worker is a bug too (workers only make valid calls). */
#define W(call)                                                    \
  do {                                                             \
    tether_status_t s_ = (call);                                   \
    if (s_ != TETHER_OK) {                                         \
      CHECK_OK(s_);                                                \
      fprintf(stderr, "  in worker: %s\n", #call);                 \
    }                                                              \
  } while (0)

/* With a GPU: device memory allocated and freed through tether at the fork. */
static void* cuda_worker(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    void* p = NULL;
    W(tether_resource_allocate(g_cuda, 1 << 16, 0, 0, &p));
    tether_buffer_t* b = NULL;
    W(tether_buffer_create(g_cuda, 0, 4096, 0, &b));
    W(tether_buffer_release(b));
    W(tether_resource_deallocate(g_cuda, p, 1 << 16, 0, 0));
    atomic_fetch_add(&g_ops, 1);
  }
  return NULL;
}

static void* worker(void* arg) {
  const int id = (int)(intptr_t)arg;
  unsigned seed = (unsigned)id * 2654435761u + 1;
  while (!atomic_load(&g_stop)) {
    seed = seed * 1103515245u + 12345u;
    const size_t size = 64 + (seed >> 8) % 8192;
    void* p = NULL;
    tether_resource_t* r = (seed & 1) ? g_pool : g_host;
    W(tether_resource_allocate(r, size, 0, 0, &p));
    tether_buffer_t* b = NULL;
    W(tether_buffer_create(g_pool, TETHER_DEVICE_HOST, size, 0, &b));
    switch ((seed >> 4) % 4) {
      case 0: {
        tether_resource_t* stats = NULL;
        W(tether_statistics_adaptor_create(g_pool, &stats));
        void* q = NULL;
        W(tether_resource_allocate(stats, 256, 0, 0, &q));
        W(tether_resource_deallocate(stats, q, 256, 0, 0));
        W(tether_resource_release(stats));
        break;
      }
      case 1: {
        tether_resource_t* prev = NULL;
        W(tether_current_resource_set(TETHER_DEVICE_HOST, (seed & 32) ? g_pool : g_host, &prev));
        W(tether_resource_release(prev));
        break;
      }
      case 2: {
        tether_resource_t* cur = NULL;
        W(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
        W(tether_resource_release(cur));
        W(tether_current_resource_push(TETHER_DEVICE_HOST, g_host));
        W(tether_current_resource_pop(TETHER_DEVICE_HOST));
        break;
      }
      default: {
        tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
        o.growth_size = 1 << 16;
        tether_resource_t* pool = NULL;
        W(tether_pool_resource_create(g_host, &o, &pool));
        void* q = NULL;
        W(tether_resource_allocate(pool, 4096, 0, 0, &q));
        W(tether_resource_deallocate(pool, q, 4096, 0, 0));
        W(tether_resource_release(pool));
        break;
      }
    }
    W(tether_buffer_release(b));
    W(tether_resource_deallocate(r, p, size, 0, 0));
    atomic_fetch_add(&g_ops, 1);
  }
  return NULL;
}

/* What a child does. Returns its exit status. */
static int child_work(void) {
  /* The parent's CUDA resource: releasing it makes no CUDA call (its memory is leaked). */
  if (g_cuda != NULL) CHECK_OK(tether_resource_release(g_cuda));
  const size_t baseline = tether_debug_live_objects(TETHER_OBJECT_ANY);
  tether_resource_t* host = NULL;
  tether_resource_t* pool = NULL;
  CHECK_OK(tether_host_resource_create(&host));
  CHECK_OK(tether_pool_resource_create(host, NULL, &pool));
  for (int i = 0; i < 64; ++i) {
    void* p = NULL;
    CHECK_OK(tether_resource_allocate(pool, 100 + (size_t)i * 37, 0, 0, &p));
    if (p != NULL) memset(p, 0xab, 100);
    CHECK_OK(tether_resource_deallocate(pool, p, 100 + (size_t)i * 37, 0, 0));
    /* The parent's pool and host resource, inherited mid-use. */
    CHECK_OK(tether_resource_allocate(g_pool, 512, 0, 0, &p));
    CHECK_OK(tether_resource_deallocate(g_pool, p, 512, 0, 0));
    CHECK_OK(tether_resource_allocate(g_host, 512, 0, 0, &p));
    CHECK_OK(tether_resource_deallocate(g_host, p, 512, 0, 0));
  }
  tether_buffer_t* b = NULL;
  CHECK_OK(tether_buffer_create(pool, TETHER_DEVICE_HOST, 4096, 0, &b));
  CHECK_OK(tether_buffer_release(b));
  /* The table: get, set (and put back), push/pop. */
  tether_resource_t* prev = NULL;
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, pool, &prev));
  tether_resource_t* cur = NULL;
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
  CHECK(cur == pool);
  CHECK_OK(tether_resource_release(cur));
  tether_resource_t* mine = NULL;
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, prev, &mine));
  CHECK(mine == pool);
  CHECK_OK(tether_resource_release(mine));
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_current_resource_push(TETHER_DEVICE_HOST, host));
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  /* Releases may block on hazard words of borrowing threads: none exist here. */
  tether_resource_t* extra = NULL;
  CHECK_OK(tether_statistics_adaptor_create(g_pool, &extra));
  CHECK_OK(tether_resource_release(extra));
  CHECK_OK(tether_resource_release(pool));
  CHECK_OK(tether_resource_release(host));
  CHECK(tether_debug_live_objects(TETHER_OBJECT_ANY) == baseline);
  /* CUDA contexts are not inherited: a clear error, not a hang or a crash. */
  tether_resource_t* cuda = NULL;
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_resource_create(0, &cuda), "fork");
  CHECK(cuda == NULL);
  return atomic_load(&tt_failures) == 0 ? 0 : 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Wait for `pid` at most CHILD_TIMEOUT_S seconds; kill it and fail on a hang. */
static void wait_child(pid_t pid, int round) {
  const double deadline = now_s() + CHILD_TIMEOUT_S;
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork %d: child ended with %s %d\n", round, WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        CHECK(!"the child exits 0");
      }
      return;
    }
    if (got < 0 && errno != EINTR) {
      CHECK(!"waitpid");
      return;
    }
    if (now_s() > deadline) {
      fprintf(stderr, "fork %d: child still running after %d s: hung in tether; killing it\n", round,
              CHILD_TIMEOUT_S);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      CHECK(!"the child does not hang");
      return;
    }
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

int main(void) {
  const size_t base = tt_baseline();
  REQUIRE_OK(tether_host_resource_create(&g_host));
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.growth_size = 1 << 20;
  REQUIRE_OK(tether_pool_resource_create(g_host, &o, &g_pool));
  /* Let the parent initialise CUDA (or find there is none): either way the
   * child must refuse CUDA with a message about fork. */
  int devices = 0;
  if (tether_cuda_get_device_count(&devices) == TETHER_OK && devices > 0)
    REQUIRE_OK(tether_cuda_resource_create(0, &g_cuda));

  pthread_t threads[WORKERS + 1];
  for (int i = 0; i < WORKERS; ++i) REQUIRE(pthread_create(&threads[i], NULL, worker, (void*)(intptr_t)i) == 0);
  if (g_cuda != NULL) REQUIRE(pthread_create(&threads[WORKERS], NULL, cuda_worker, NULL) == 0);

  const double t0 = now_s();
  for (int round = 0; round < FORKS; ++round) {
    /* Let the workers get going again between forks. */
    struct timespec pause = {0, 200000 + (long)(round % 7) * 100000};
    nanosleep(&pause, NULL);
    fflush(stderr);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(CHILD_TIMEOUT_S + 5); /* a hung child ends even if the parent dies */
      const int rc = child_work();
      fflush(stderr);
#if defined(__SANITIZE_ADDRESS__)
      /* LeakSanitizer would run at exit() and report what the parent's other
       * threads had allocated: the child inherits it and cannot free it. */
      _exit(rc);
#else
      if (round % 2) _exit(rc);
      exit(rc); /* atexit handlers and static destructors in the child, too */
#endif
    }
    wait_child(pid, round);
    if (atomic_load(&tt_failures) > 0) break;
  }
  const double elapsed = now_s() - t0;
  atomic_store(&g_stop, 1);
  for (int i = 0; i < WORKERS; ++i) pthread_join(threads[i], NULL);
  if (g_cuda != NULL) {
    pthread_join(threads[WORKERS], NULL);
    CHECK_OK(tether_resource_release(g_cuda));
  }

  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL));
  CHECK_OK(tether_resource_release(g_pool));
  CHECK_OK(tether_resource_release(g_host));
  CHECK(tt_baseline() == base);
  printf("test_fork: %d forks with %d busy threads%s (%ld operations) in %.1f s\n", FORKS, WORKERS,
         g_cuda ? " and one on CUDA device 0" : "", atomic_load(&g_ops), elapsed);
  return tt_finish("test_fork");
}
