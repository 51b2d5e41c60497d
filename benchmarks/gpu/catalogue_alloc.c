/*
 * catalogue_alloc: allocation speed of tether's suballocators - the arena
 * and binning resources, with the pool for reference - on the random pattern
 * of benchmarks/c/random_pattern.h (sizes log-uniform 256 B - 4 MiB, fixed
 * seed, at most 1000 live, random free order; memory never touched). 1, 4
 * and 8 threads, each with its own stream and its own pattern, share one
 * resource. Reports the median aggregate ns per allocate+free pair (wall
 * time / all pairs of all threads) and the ratio to the reference pool
 * measured in the same run (< 1: faster than the pool).
 *
 * Contenders (through the public C ABI only):
 *   pool 8GiB (reference)     tether_pool_resource_create, initial_size 8 GiB on the GPU
 *                             (what dask-cuda's rmm_pool_size gives; 2 GiB over host memory)
 *   pool default              the same with default options
 *   arena default             tether_arena_resource_create with default options
 *   arena 8GiB                arena_size 8 GiB (2 GiB over host memory), as RMM's arena takes it
 *   binning 2^18..2^22 / pool fixed-size bins of 256 KiB .. 4 MiB over the 8 GiB pool, the pool
 *                             as fallback (RMM's benchmark configuration)
 *   binning 2^18..2^22 / arena the same over a default arena
 *
 * Over a CUDA device (device 0, if the driver and a device are present) the
 * upstream is tether_cuda_resource_create and every thread gets its own
 * non-blocking stream (created with the driver, resolved with dlopen, so
 * nothing from CUDA is linked). Without one the upstream is host memory and
 * the streams are distinct values (host resources ignore them), so the
 * program can be checked anywhere. It never fails on speed; exit status 0
 * unless an allocation fails.
 *
 * usage: bench_catalogue_alloc [ops per thread (default 20000)] [repetitions (default 5)] [--host]
 *                              [--only TEXT]   (only the contenders whose name contains TEXT, and the reference)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_pattern.h"
#include "tether/tether.h"

#define MAX_THREADS 8
#define GiB ((size_t)1 << 30)

/* ---- the driver (GPU runs only): streams and the primary context ----------- */

static struct {
  int (*Init)(unsigned);
  int (*DeviceGet)(int*, int);
  int (*PrimaryCtxRetain)(void**, int);
  int (*CtxSetCurrent)(void*);
  int (*StreamCreate)(void**, unsigned);
  int (*StreamDestroy)(void*);
  int (*StreamSynchronize)(void*);
} cu;
static void* g_ctx;
static int g_gpu;

static int load_driver(void) {
  int dev = 0;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return -1;
  *(void**)&cu.Init = dlsym(lib, "cuInit");
  *(void**)&cu.DeviceGet = dlsym(lib, "cuDeviceGet");
  *(void**)&cu.PrimaryCtxRetain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void**)&cu.CtxSetCurrent = dlsym(lib, "cuCtxSetCurrent");
  *(void**)&cu.StreamCreate = dlsym(lib, "cuStreamCreate");
  *(void**)&cu.StreamDestroy = dlsym(lib, "cuStreamDestroy_v2");
  *(void**)&cu.StreamSynchronize = dlsym(lib, "cuStreamSynchronize");
  if (!cu.Init || !cu.DeviceGet || !cu.PrimaryCtxRetain || !cu.CtxSetCurrent || !cu.StreamCreate ||
      !cu.StreamDestroy || !cu.StreamSynchronize)
    return -1;
  if (cu.Init(0) != 0 || cu.DeviceGet(&dev, 0) != 0 || cu.PrimaryCtxRetain(&g_ctx, dev) != 0) return -1;
  return cu.CtxSetCurrent(g_ctx) == 0 ? 0 : -1;
}

/* ---- contenders ---------------------------------------------------------------- */

typedef struct contender {
  const char* name;
  tether_resource_t* resource;
  double ns[3]; /* median per thread count; < 0: failed */
} contender;

static tether_resource_t* make_pool(tether_resource_t* up, size_t initial) {
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  tether_resource_t* r = NULL;
  o.initial_size = initial;
  return tether_pool_resource_create(up, &o, &r) == TETHER_OK ? r : NULL;
}

static tether_resource_t* make_arena(tether_resource_t* up, size_t arena_size) {
  tether_arena_options_t o = TETHER_ARENA_OPTIONS_INIT;
  tether_resource_t* r = NULL;
  o.arena_size = arena_size;
  return tether_arena_resource_create(up, &o, &r) == TETHER_OK ? r : NULL;
}

/* Bins of 2^18 .. 2^22 bytes over `bins_up`, which is also the fallback. */
static tether_resource_t* make_binning(tether_resource_t* bins_up) {
  tether_binning_options_t o = TETHER_BINNING_OPTIONS_INIT;
  tether_resource_t* r = NULL;
  if (bins_up == NULL) return NULL;
  o.min_size_exponent = 18;
  o.max_size_exponent = 22;
  r = tether_binning_resource_create(bins_up, &o, &r) == TETHER_OK ? r : NULL;
  tether_resource_release(bins_up); /* the binning resource holds it */
  return r;
}

/* ---- one timed pass ------------------------------------------------------------- */

typedef struct worker {
  pthread_t thread;
  tether_resource_t* resource;
  tether_stream_t stream;
  const bench_pattern* pattern;
  void** live;
  size_t* sizes;
  pthread_barrier_t* start;
  double t0, t1; /* this thread's first and last op (the pass is min t0 .. max t1) */
  int failed;
} worker;

static void* run_worker(void* arg) {
  worker* w = arg;
  size_t i, n_live = 0;
  if (g_gpu) cu.CtxSetCurrent(g_ctx);
  pthread_barrier_wait(w->start);
  w->t0 = bench_now_ns();
  for (i = 0; i < w->pattern->n_ops; ++i) {
    const bench_op op = w->pattern->ops[i];
    if (op.is_alloc) {
      if (tether_resource_allocate(w->resource, op.arg, 0, w->stream, &w->live[n_live]) != TETHER_OK) {
        w->failed = 1;
        break;
      }
      w->sizes[n_live++] = op.arg;
    } else {
      tether_resource_deallocate(w->resource, w->live[op.arg], w->sizes[op.arg], 0, w->stream);
      w->live[op.arg] = w->live[--n_live];
      w->sizes[op.arg] = w->sizes[n_live];
    }
  }
  while (n_live > 0) {
    --n_live;
    tether_resource_deallocate(w->resource, w->live[n_live], w->sizes[n_live], 0, w->stream);
  }
  w->t1 = bench_now_ns();
  return NULL;
}

/* ns per allocate+free pair, aggregate over `threads` threads; < 0 if an allocation failed. */
static double timed_pass(tether_resource_t* r, int threads, const bench_pattern* patterns,
                         const tether_stream_t* streams, void** live, size_t* sizes) {
  worker w[MAX_THREADS];
  pthread_barrier_t barrier;
  size_t pairs = 0;
  double t0 = 0, t1 = 0;
  int t, failed = 0;
  pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
  for (t = 0; t < threads; ++t) {
    w[t].resource = r;
    w[t].stream = streams[t];
    w[t].pattern = &patterns[t];
    w[t].live = live + (size_t)t * BENCH_MAX_LIVE;
    w[t].sizes = sizes + (size_t)t * BENCH_MAX_LIVE;
    w[t].start = &barrier;
    w[t].failed = 0;
    pairs += patterns[t].n_allocs;
    pthread_create(&w[t].thread, NULL, run_worker, &w[t]);
  }
  pthread_barrier_wait(&barrier);
  for (t = 0; t < threads; ++t) {
    pthread_join(w[t].thread, NULL);
    failed |= w[t].failed;
    if (t == 0 || w[t].t0 < t0) t0 = w[t].t0;
    if (t == 0 || w[t].t1 > t1) t1 = w[t].t1;
  }
  pthread_barrier_destroy(&barrier);
  if (g_gpu)
    for (t = 0; t < threads; ++t) cu.StreamSynchronize((void*)streams[t]);
  return failed ? -1.0 : (t1 - t0) / (double)pairs;
}

int main(int argc, char** argv) {
  static const int kThreads[3] = {1, 4, 8};
  size_t ops = 20000, reps = 5, i, c, n_contenders;
  int force_host = 0, t, k, failures = 0;
  const char* only = NULL;
  bench_pattern patterns[MAX_THREADS];
  tether_stream_t streams[MAX_THREADS];
  void** live;
  size_t* sizes;
  tether_resource_t* up = NULL;
  size_t big;
  contender cs[6];
  int pos = 0;

  for (k = 1; k < argc; ++k) {
    if (strcmp(argv[k], "--host") == 0) force_host = 1;
    else if (strcmp(argv[k], "--only") == 0 && k + 1 < argc) only = argv[++k];
    else if (pos++ == 0) ops = (size_t)strtoull(argv[k], NULL, 10);
    else reps = (size_t)strtoull(argv[k], NULL, 10);
  }
  if (ops == 0 || reps == 0) {
    fprintf(stderr, "usage: %s [ops per thread] [repetitions] [--host] [--only TEXT]\n", argv[0]);
    return 2;
  }
  g_gpu = !force_host && load_driver() == 0 && tether_cuda_resource_create(0, &up) == TETHER_OK;
  if (!g_gpu && tether_host_resource_create(&up) != TETHER_OK) {
    fprintf(stderr, "bench_catalogue_alloc: cannot create a host resource: %s\n", tether_last_error_message());
    return 1;
  }
  big = g_gpu ? 8 * GiB : 2 * GiB;
  for (t = 0; t < MAX_THREADS; ++t) {
    if (bench_make_pattern(&patterns[t], ops, 42 + (uint64_t)t) != 0) return 1;
    streams[t] = (tether_stream_t)(t + 1);
    if (g_gpu) {
      void* s = NULL;
      if (cu.StreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */) != 0) return 1;
      streams[t] = (tether_stream_t)s;
    }
  }
  live = malloc(sizeof(void*) * BENCH_MAX_LIVE * MAX_THREADS);
  sizes = malloc(sizeof(size_t) * BENCH_MAX_LIVE * MAX_THREADS);
  if (live == NULL || sizes == NULL) return 1;

  printf("catalogue_alloc: %s upstream, %zu ops per thread (%zu pairs on thread 0), median of %zu, ns per pair\n",
         g_gpu ? "CUDA device 0" : "host", ops, patterns[0].n_allocs, reps);
  n_contenders = 0;
  cs[n_contenders++] = (contender){g_gpu ? "pool 8GiB (reference)" : "pool 2GiB (reference)", make_pool(up, big), {0}};
  cs[n_contenders++] = (contender){"pool default", make_pool(up, 0), {0}};
  cs[n_contenders++] = (contender){"arena default", make_arena(up, 0), {0}};
  cs[n_contenders++] = (contender){g_gpu ? "arena 8GiB" : "arena 2GiB", make_arena(up, big), {0}};
  cs[n_contenders++] = (contender){"binning 2^18..2^22 / pool", NULL, {0}};
  cs[n_contenders++] = (contender){"binning 2^18..2^22 / arena", NULL, {0}};

  printf("%-30s %12s %12s %12s %8s %8s %8s\n", "resource", "1 thread", "4 threads", "8 threads", "x ref 1", "x ref 4",
         "x ref 8");
  for (c = 0; c < n_contenders; ++c) {
    double* v;
    if (c > 0 && only != NULL && strstr(cs[c].name, only) == NULL) {
      if (cs[c].resource != NULL) tether_resource_release(cs[c].resource);
      cs[c].resource = NULL;
      continue;
    }
    v = malloc(sizeof(double) * reps);
    /* The binning resources are built just before their run, so the 8 GiB pools are not held at once. */
    if (c == 4) cs[c].resource = make_binning(make_pool(up, big));
    if (c == 5) cs[c].resource = make_binning(make_arena(up, 0));
    if (cs[c].resource == NULL) {
      printf("%-30s could not be created: %s\n", cs[c].name, tether_last_error_message());
      ++failures;
      free(v);
      continue;
    }
    for (k = 0; k < 3; ++k) {
      timed_pass(cs[c].resource, kThreads[k], patterns, streams, live, sizes); /* warm-up */
      for (i = 0; i < reps; ++i) v[i] = timed_pass(cs[c].resource, kThreads[k], patterns, streams, live, sizes);
      cs[c].ns[k] = bench_median(v, reps);
      if (v[0] < 0) cs[c].ns[k] = -1.0;
    }
    free(v);
    printf("%-30s", cs[c].name);
    for (k = 0; k < 3; ++k) {
      if (cs[c].ns[k] < 0) printf(" %12s", "failed");
      else printf(" %12.1f", cs[c].ns[k]);
    }
    for (k = 0; k < 3; ++k) {
      if (cs[c].ns[k] < 0 || cs[0].ns[k] <= 0) printf(" %8s", "-");
      else printf(" %8.2f", cs[c].ns[k] / cs[0].ns[k]);
    }
    printf("\n");
    fflush(stdout);
    if (c >= 1) { /* keep the reference pool for the ratios; drop the others as soon as measured */
      tether_resource_release(cs[c].resource);
      cs[c].resource = NULL;
    }
  }
  tether_resource_release(cs[0].resource);
  tether_resource_release(up);
  if (g_gpu)
    for (t = 0; t < MAX_THREADS; ++t) cu.StreamDestroy((void*)streams[t]);
  for (t = 0; t < MAX_THREADS; ++t) free(patterns[t].ops);
  free(live);
  free(sizes);
  return 0;
}
