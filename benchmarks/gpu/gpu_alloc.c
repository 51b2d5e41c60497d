/*
 * gpu_alloc: device-memory allocation speed on the random pattern of
 * benchmarks/c/random_pattern.h (sizes log-uniform 256 B - 4 MiB, fixed seed,
 * at most 1000 live, random free order), 1, 4 and 8 threads, each thread with
 * its own non-blocking stream and its own pattern. Reports the median
 * aggregate ns per allocate+free pair (wall time / all pairs of all threads)
 * and ratios against raw cuMemAllocAsync measured in the same run.
 *
 * Contenders:
 *   raw cuMemAlloc/cuMemFree          the driver, resolved here with dlopen
 *   raw cuMemAllocAsync/FreeAsync     the device's default pool (release threshold raised to
 *                                     UINT64_MAX, so the pool keeps its memory as RMM configures it)
 *   raw cuMemAllocFromPoolAsync       the same pool named explicitly (what tether's async resource calls)
 *   tether pool(cuda)                 tether_pool_resource_create over tether_cuda_resource_create
 *   tether pool(async)                ... over an owned async pool
 *   tether async (default pool)       tether's async resource on the default pool (no tether pool)
 *   tether pool(cuda|async), N GiB    the same pools with an initial size of N GiB (default 8), as
 *                                     users size them (dask-cuda's rmm_pool_size, RMM's benchmarks)
 * Every thread has the primary context current (as a CUDA runtime user would).
 * tether calls go through the public C ABI only.
 *
 * Then, one thread on one stream:
 *   host reference         the random pattern on a pool over host memory with the same initial
 *                          size: the C ABI and the pool's bookkeeping on this machine's CPU, without
 *                          stream order or CUDA (what a device row's single-thread figure is made
 *                          of, on this host)
 *   live-allocation sweep  steady state with 1,000 / 10,000 / 100,000 live allocations (sizes
 *                          log-uniform 256 B - 64 KiB): each timed step frees a random live
 *                          allocation and makes a new one; ns per pair and last/first ratio
 *   repeated pair          allocate and free 256 B again and again (the hot loop of a
 *                          framework that makes the same small temporary every step), and
 *                          the same calls into a pool over host memory: the C ABI and pool
 *                          bookkeeping on this CPU, without stream order or CUDA
 *   footprint              a fresh pool with default options replays the random pattern 3
 *                          times, for 8 seeds: bytes it holds from upstream at the end (= its
 *                          peak: a pool gives nothing back unasked) / peak bytes live; median
 *                          and max over the seeds
 *
 * The targets of issue 22 are checked at the end ("targets (issue 22):"); RMM's figures on
 * the same sweep and footprint come from bench_pool_rmm (pool_rmm.cpp), built against the
 * librmm wheel.
 *
 * usage: bench_gpu_alloc [ops per thread (default 20000)] [repetitions (default 5)] [initial GiB (default 8)] [quick]
 *        quick: leave out the slow raw cuMemAlloc and cuMemAllocFromPoolAsync rows
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random_pattern.h"
#include "tether/tether.h"

#define MAX_THREADS 8

/* ---- the driver, for the raw references ------------------------------------ */

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream*, unsigned);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
  CUresult (*MemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*MemPoolTrimTo)(CUmemoryPool, size_t);
  CUresult (*MemAllocFromPoolAsync)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*EventCreate)(CUevent*, unsigned);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
} cu;
static CUcontext g_ctx;
static CUmemoryPool g_default_pool;

static void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "bench_gpu_alloc: libcuda.so.1 has no %s\n", name);
    exit(2);
  }
  return p;
}

#define CU_CHECK(call)                                                              \
  do {                                                                              \
    CUresult r_ = (call);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                       \
      fprintf(stderr, "bench_gpu_alloc: %s failed: CUresult %d\n", #call, (int)r_); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

/* 0 if a device is usable; the benchmark prints why not and exits 0 otherwise. */
static int load_driver(void) {
  CUdevice dev;
  cuuint64_t keep = UINT64_MAX;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return -1;
  /* Versioned names: the ABI of CUDA 12+ with legacy default-stream semantics. */
  *(void**)&cu.Init = sym(lib, "cuInit");
  *(void**)&cu.DeviceGet = sym(lib, "cuDeviceGet");
  *(void**)&cu.PrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
  *(void**)&cu.CtxSetCurrent = sym(lib, "cuCtxSetCurrent");
  *(void**)&cu.StreamCreate = sym(lib, "cuStreamCreate");
  *(void**)&cu.StreamDestroy = sym(lib, "cuStreamDestroy_v2");
  *(void**)&cu.StreamSynchronize = sym(lib, "cuStreamSynchronize");
  *(void**)&cu.MemAlloc = sym(lib, "cuMemAlloc_v2");
  *(void**)&cu.MemFree = sym(lib, "cuMemFree_v2");
  *(void**)&cu.MemAllocAsync = sym(lib, "cuMemAllocAsync");
  *(void**)&cu.MemFreeAsync = sym(lib, "cuMemFreeAsync");
  *(void**)&cu.DeviceGetDefaultMemPool = sym(lib, "cuDeviceGetDefaultMemPool");
  *(void**)&cu.MemPoolSetAttribute = sym(lib, "cuMemPoolSetAttribute");
  *(void**)&cu.MemPoolTrimTo = sym(lib, "cuMemPoolTrimTo");
  *(void**)&cu.MemAllocFromPoolAsync = sym(lib, "cuMemAllocFromPoolAsync");
  *(void**)&cu.EventCreate = sym(lib, "cuEventCreate");
  *(void**)&cu.EventDestroy = sym(lib, "cuEventDestroy_v2");
  *(void**)&cu.EventRecord = sym(lib, "cuEventRecord");
  *(void**)&cu.StreamWaitEvent = sym(lib, "cuStreamWaitEvent");
  if (cu.Init(0) != CUDA_SUCCESS) return -1;
  CU_CHECK(cu.DeviceGet(&dev, 0));
  CU_CHECK(cu.PrimaryCtxRetain(&g_ctx, dev));
  CU_CHECK(cu.CtxSetCurrent(g_ctx));
  CU_CHECK(cu.DeviceGetDefaultMemPool(&g_default_pool, dev));
  CU_CHECK(cu.MemPoolSetAttribute(g_default_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  return 0;
}

/* ---- contenders ------------------------------------------------------------- */

typedef struct contender {
  const char* name;
  void* (*alloc)(struct contender*, size_t, CUstream);
  void (*free)(struct contender*, void*, size_t, CUstream);
  tether_resource_t* resource; /* tether contenders */
} contender;

static void* raw_alloc(contender* c, size_t n, CUstream s) {
  CUdeviceptr p = 0;
  (void)c;
  (void)s;
  CU_CHECK(cu.MemAlloc(&p, n));
  return (void*)(uintptr_t)p;
}
static void raw_free(contender* c, void* p, size_t n, CUstream s) {
  (void)c;
  (void)n;
  (void)s;
  CU_CHECK(cu.MemFree((CUdeviceptr)(uintptr_t)p));
}
static void* async_alloc(contender* c, size_t n, CUstream s) {
  CUdeviceptr p = 0;
  (void)c;
  CU_CHECK(cu.MemAllocAsync(&p, n, s));
  return (void*)(uintptr_t)p;
}
static void async_free(contender* c, void* p, size_t n, CUstream s) {
  (void)c;
  (void)n;
  CU_CHECK(cu.MemFreeAsync((CUdeviceptr)(uintptr_t)p, s));
}

static void* from_pool_alloc(contender* c, size_t n, CUstream s) {
  CUdeviceptr p = 0;
  (void)c;
  CU_CHECK(cu.MemAllocFromPoolAsync(&p, n, g_default_pool, s));
  return (void*)(uintptr_t)p;
}

static void tether_check(tether_status_t s, const char* what) {
  if (s != TETHER_OK) {
    fprintf(stderr, "bench_gpu_alloc: %s failed: %s: %s\n", what, tether_status_name(s),
            tether_last_error_message());
    exit(1);
  }
}
static void* tether_alloc(contender* c, size_t n, CUstream s) {
  void* p = NULL;
  tether_check(tether_resource_allocate(c->resource, n, 0, (tether_stream_t)s, &p), "tether_resource_allocate");
  return p;
}
static void tether_free(contender* c, void* p, size_t n, CUstream s) {
  tether_check(tether_resource_deallocate(c->resource, p, n, 0, (tether_stream_t)s), "tether_resource_deallocate");
}

/* ---- one repetition: every thread replays its pattern on its stream ------------ */

typedef struct worker {
  contender* c;
  const bench_pattern* pattern;
  CUstream stream;
  pthread_barrier_t* start;
  void** live; /* BENCH_MAX_LIVE slots */
  size_t* sizes;
  double begin, end; /* each thread times itself: the main thread may be descheduled past the barrier */
} worker;

static void* replay(void* arg) {
  worker* w = (worker*)arg;
  const bench_pattern* pat = w->pattern;
  size_t n = 0, i;
  CU_CHECK(cu.CtxSetCurrent(g_ctx));
  pthread_barrier_wait(w->start);
  w->begin = bench_now_ns();
  for (i = 0; i < pat->n_ops; ++i) {
    const bench_op op = pat->ops[i];
    if (op.is_alloc) {
      w->live[n] = w->c->alloc(w->c, op.arg, w->stream);
      w->sizes[n] = op.arg;
      ++n;
    } else {
      w->c->free(w->c, w->live[op.arg], w->sizes[op.arg], w->stream);
      --n;
      w->live[op.arg] = w->live[n];
      w->sizes[op.arg] = w->sizes[n];
    }
  }
  while (n > 0) {
    --n;
    w->c->free(w->c, w->live[n], w->sizes[n], w->stream);
  }
  CU_CHECK(cu.StreamSynchronize(w->stream));
  w->end = bench_now_ns();
  return NULL;
}

static bench_pattern g_patterns[MAX_THREADS];
static CUstream g_streams[MAX_THREADS];
static void* g_live[MAX_THREADS][BENCH_MAX_LIVE];
static size_t g_sizes[MAX_THREADS][BENCH_MAX_LIVE];

/* Aggregate ns per pair of one repetition with `threads` threads. */
static double run_once(contender* c, int threads) {
  pthread_t tid[MAX_THREADS];
  worker w[MAX_THREADS];
  pthread_barrier_t start;
  size_t pairs = 0;
  double t0, t1;
  int t;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  for (t = 0; t < threads; ++t) {
    w[t].c = c;
    w[t].pattern = &g_patterns[t];
    w[t].stream = g_streams[t];
    w[t].start = &start;
    w[t].live = g_live[t];
    w[t].sizes = g_sizes[t];
    pairs += g_patterns[t].n_allocs;
    if (pthread_create(&tid[t], NULL, replay, &w[t]) != 0) {
      fprintf(stderr, "bench_gpu_alloc: pthread_create failed\n");
      exit(1);
    }
  }
  pthread_barrier_wait(&start);
  for (t = 0; t < threads; ++t) pthread_join(tid[t], NULL);
  pthread_barrier_destroy(&start);
  t0 = w[0].begin;
  t1 = w[0].end;
  for (t = 1; t < threads; ++t) {
    if (w[t].begin < t0) t0 = w[t].begin;
    if (w[t].end > t1) t1 = w[t].end;
  }
  return (t1 - t0) / (double)pairs;
}

/* Every measurement starts from an empty default pool, so no contender
   inherits blocks another left freed on other streams. */
static void reset_default_pool(void) {
  int t;
  for (t = 0; t < MAX_THREADS; ++t) CU_CHECK(cu.StreamSynchronize(g_streams[t]));
  CU_CHECK(cu.MemPoolTrimTo(g_default_pool, 0));
}

static double measure(contender* c, int threads, int reps) {
  double v[64];
  int r;
  if (reps > 64) reps = 64;
  reset_default_pool();
  (void)run_once(c, threads); /* warm-up: pools grow, the driver maps memory */
  for (r = 0; r < reps; ++r) v[r] = run_once(c, threads);
  return bench_median(v, (size_t)reps);
}

/* ---- the live-allocation sweep ------------------------------------------------- */

/* ns per free+allocate pair of the timed part of one steady-state run on stream 0's thread. */
static double steady_once(contender* c, const bench_steady* p, CUstream s, void** live, size_t* sizes) {
  size_t i;
  double t0;
  for (i = 0; i < p->live; ++i) {
    live[i] = c->alloc(c, p->fill[i], s);
    sizes[i] = p->fill[i];
  }
  t0 = bench_now_ns();
  for (i = 0; i < p->pairs; ++i) {
    const uint32_t k = p->slot[i];
    c->free(c, live[k], sizes[k], s);
    live[k] = c->alloc(c, p->size[i], s);
    sizes[k] = p->size[i];
  }
  t0 = bench_now_ns() - t0;
  for (i = 0; i < p->live; ++i) c->free(c, live[i], sizes[i], s);
  CU_CHECK(cu.StreamSynchronize(s));
  return t0 / (double)p->pairs;
}

/* growth[k]: 100k / 1k of pool, big, big_async. */
static void sweep(contender* reference, contender* pool, contender* big, contender* big_async, int reps,
                  double growth[3]) {
  enum { LEVELS = 3, N = 4 };
  const size_t lives[LEVELS] = {1000, 10000, 100000};
  const size_t pairs = 200000;
  contender* cs[N] = {reference, pool, big, big_async};
  double ns[N][LEVELS];
  bench_steady pat[LEVELS];
  void** live = (void**)malloc(100000 * sizeof(void*));
  size_t* sizes = (size_t*)malloc(100000 * sizeof(size_t));
  int i, l, r;
  if (live == NULL || sizes == NULL) exit(1);
  for (l = 0; l < LEVELS; ++l)
    if (bench_make_steady(&pat[l], lives[l], pairs, 256.0, 65536.0, 0x5eedull + (uint64_t)l) != 0) exit(1);
  printf("\nlive-allocation sweep: 1 thread, steady state, sizes log-uniform 256 B - 64 KiB, %zu timed free+allocate "
         "pairs per level, median of %d\n",
         pairs, reps);
  printf("%-36s %12s %12s %12s %14s\n", "allocator", "1,000 live", "10,000 live", "100,000 live", "100k / 1k");
  for (i = 0; i < N; ++i) {
    printf("%-36s", cs[i]->name);
    fflush(stdout);
    for (l = 0; l < LEVELS; ++l) {
      double v[64];
      const int n = reps > 64 ? 64 : reps;
      reset_default_pool();
      (void)steady_once(cs[i], &pat[l], g_streams[0], live, sizes); /* warm-up */
      for (r = 0; r < n; ++r) v[r] = steady_once(cs[i], &pat[l], g_streams[0], live, sizes);
      ns[i][l] = bench_median(v, (size_t)n);
      printf(" %12.1f", ns[i][l]);
      fflush(stdout);
    }
    printf(" %13.3fx\n", ns[i][LEVELS - 1] / ns[i][0]);
  }
  printf("ratio to %s at the same live count:\n", reference->name);
  for (i = 1; i < N; ++i) {
    printf("%-36s", cs[i]->name);
    for (l = 0; l < LEVELS; ++l) printf(" %11.3fx", ns[i][l] / ns[0][l]);
    printf("\n");
  }
  for (i = 1; i < N; ++i) growth[i - 1] = ns[i][LEVELS - 1] / ns[i][0];
  for (l = 0; l < LEVELS; ++l) bench_free_steady(&pat[l]);
  free(live);
  free(sizes);
}

/* ---- footprint ------------------------------------------------------------------ */

/* A fresh pool with default options over `upstream` replays `pat` 3 times on
   one stream: bytes held from upstream / peak bytes live. */
static double footprint_of(tether_resource_t* upstream, const bench_pattern* pat, size_t* held, size_t* peak_out,
                           unsigned long long* chunks) {
  contender c = {"footprint", tether_alloc, tether_free, NULL};
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  size_t n = 0, i, live_bytes = 0, peak = 0;
  int r;
  tether_check(tether_pool_resource_create(upstream, NULL, &c.resource), "footprint pool");
  for (r = 0; r < 3; ++r) {
    n = 0;
    for (i = 0; i < pat->n_ops; ++i) {
      const bench_op op = pat->ops[i];
      if (op.is_alloc) {
        g_live[0][n] = c.alloc(&c, op.arg, g_streams[0]);
        g_sizes[0][n] = op.arg;
        live_bytes += op.arg;
        if (live_bytes > peak) peak = live_bytes;
        ++n;
      } else {
        c.free(&c, g_live[0][op.arg], g_sizes[0][op.arg], g_streams[0]);
        live_bytes -= g_sizes[0][op.arg];
        --n;
        g_live[0][op.arg] = g_live[0][n];
        g_sizes[0][op.arg] = g_sizes[0][n];
      }
    }
    while (n > 0) {
      --n;
      live_bytes -= g_sizes[0][n];
      c.free(&c, g_live[0][n], g_sizes[0][n], g_streams[0]);
    }
  }
  CU_CHECK(cu.StreamSynchronize(g_streams[0]));
  tether_check(tether_resource_get_pool_info(c.resource, &info), "tether_resource_get_pool_info");
  tether_resource_release(c.resource);
  *held = info.pool_size;
  *peak_out = peak;
  *chunks = (unsigned long long)info.chunk_count;
  return (double)info.pool_size / (double)peak;
}

/* The seeds of the footprint figure: thread 0's pattern and seeds 1 ... 7 (as
   bench_pool_vs_malloc_core's host footprint and bench_pool_rmm). */
#define FOOTPRINT_SEEDS 8

/* Median and max of held / peak over the seeds; fills med/max. */
static void footprint_seeds(const char* name, tether_resource_t* upstream, size_t ops, double* med, double* max) {
  double r[FOOTPRINT_SEEDS];
  int k;
  printf("  %-24s", name);
  for (k = 0; k < FOOTPRINT_SEEDS; ++k) {
    bench_pattern other;
    const bench_pattern* pat = &g_patterns[0];
    size_t held, peak;
    unsigned long long chunks;
    if (k > 0) {
      if (bench_make_pattern(&other, ops, (uint64_t)k) != 0) exit(1);
      pat = &other;
    }
    r[k] = footprint_of(upstream, pat, &held, &peak, &chunks);
    if (k == 0)
      printf(" seed 0x7e7be5: held %.1f MiB in %llu chunks, peak live %.1f MiB;", (double)held / 1048576.0, chunks,
             (double)peak / 1048576.0);
    printf(" %.3f", r[k]);
    if (k > 0) free(other.ops);
    fflush(stdout);
  }
  *max = r[0];
  for (k = 1; k < FOOTPRINT_SEEDS; ++k)
    if (r[k] > *max) *max = r[k];
  *med = bench_median(r, FOOTPRINT_SEEDS);
  printf("\n  %-24s median %.3f, max %.3f over %d seeds\n", "", *med, *max, FOOTPRINT_SEEDS);
}

/* ---- the repeated same-size pair ----------------------------------------------- */

/* A contender that calls a fresh pool over host memory (`initial` bytes up front) through the
   same C ABI, with no stream order and no CUDA call: what this machine's CPU takes for the C ABI
   and the pool's bookkeeping, so that a device row splits into that and the stream-ordered
   part. host_pool_release() frees it and its upstream. */
static contender host_pool(const char* name, size_t initial, tether_resource_t** upstream) {
  contender c = {name, tether_alloc, tether_free, NULL};
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.initial_size = initial;
  tether_check(tether_host_resource_create(upstream), "tether_host_resource_create");
  tether_check(tether_pool_resource_create(*upstream, &o, &c.resource), "pool over host");
  return c;
}
static void host_pool_release(contender* c, tether_resource_t* upstream) {
  tether_resource_release(c->resource);
  tether_resource_release(upstream);
}

/* ns per allocate+free of `bytes` on stream 0, repeated `n` times (median of reps). */
static double repeated_pair(contender* c, size_t bytes, int n, int reps) {
  double v[64];
  int r, k;
  if (reps > 64) reps = 64;
  for (k = 0; k < 1000; ++k) c->free(c, c->alloc(c, bytes, g_streams[0]), bytes, g_streams[0]); /* warm-up */
  for (r = 0; r < reps; ++r) {
    const double t0 = bench_now_ns();
    for (k = 0; k < n; ++k) c->free(c, c->alloc(c, bytes, g_streams[0]), bytes, g_streams[0]);
    v[r] = (bench_now_ns() - t0) / (double)n;
  }
  CU_CHECK(cu.StreamSynchronize(g_streams[0]));
  return bench_median(v, (size_t)reps);
}

int main(int argc, char** argv) {
  const size_t ops = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 20000;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  const int thread_counts[] = {1, 4, 8};
  /* The contenders on the default pool run next to each other, before the
     tether pools take device memory of their own. */
  enum { RAW, ASYNC, FROM_POOL, TETHER_DEFAULT, POOL_CUDA, POOL_ASYNC, POOL_CUDA_BIG, POOL_ASYNC_BIG, N_CONTENDERS };
  const double initial_gib = argc > 3 ? atof(argv[3]) : 8.0;
  const int quick = argc > 4 && strcmp(argv[4], "quick") == 0;
  char big_cuda_name[64], big_async_name[64];
  contender cs[N_CONTENDERS] = {
      {"raw cuMemAlloc/cuMemFree", raw_alloc, raw_free, NULL},
      {"raw cuMemAllocAsync (default pool)", async_alloc, async_free, NULL},
      {"raw cuMemAllocFromPoolAsync (default)", from_pool_alloc, async_free, NULL},
      {"tether async (default pool)", tether_alloc, tether_free, NULL},
      {"tether pool(cuda)", tether_alloc, tether_free, NULL},
      {"tether pool(async)", tether_alloc, tether_free, NULL},
      {big_cuda_name, tether_alloc, tether_free, NULL},
      {big_async_name, tether_alloc, tether_free, NULL},
  };
  tether_pool_options_t big = TETHER_POOL_OPTIONS_INIT;
  double ns[N_CONTENDERS][3];
  double repeated[N_CONTENDERS] = {0};
  const int swept[3] = {POOL_CUDA, POOL_CUDA_BIG, POOL_ASYNC_BIG}; /* the live sweep's tether rows */
  double sweep_growth[3] = {0}, fp_med[2] = {0}, fp_max[2] = {0}, host_random = 0.0;
  tether_resource_t *cuda = NULL, *async = NULL;
  tether_async_options_t ao = TETHER_ASYNC_OPTIONS_INIT;
  int i, t;

  if (load_driver() != 0) {
    printf("bench_gpu_alloc: skipped: no usable CUDA driver or device\n");
    return 0;
  }
  for (t = 0; t < MAX_THREADS; ++t) {
    if (bench_make_pattern(&g_patterns[t], ops, 0x7e7be5ull + (uint64_t)t) != 0) return 1;
    CU_CHECK(cu.StreamCreate(&g_streams[t], CU_STREAM_NON_BLOCKING));
  }
  tether_check(tether_cuda_resource_create(0, &cuda), "tether_cuda_resource_create");
  tether_check(tether_async_resource_create(0, NULL, &async), "tether_async_resource_create");
  tether_check(tether_pool_resource_create(cuda, NULL, &cs[POOL_CUDA].resource), "pool over cuda");
  tether_check(tether_pool_resource_create(async, NULL, &cs[POOL_ASYNC].resource), "pool over async");
  big.initial_size = (size_t)(initial_gib * 1073741824.0);
  snprintf(big_cuda_name, sizeof big_cuda_name, "tether pool(cuda), %g GiB initial", initial_gib);
  snprintf(big_async_name, sizeof big_async_name, "tether pool(async), %g GiB initial", initial_gib);
  tether_check(tether_pool_resource_create(cuda, &big, &cs[POOL_CUDA_BIG].resource), "pool over cuda, initial size");
  tether_check(tether_pool_resource_create(async, &big, &cs[POOL_ASYNC_BIG].resource), "pool over async, initial size");
  ao.use_default_pool = 1;
  tether_check(tether_async_resource_create(0, &ao, &cs[TETHER_DEFAULT].resource), "async on the default pool");

  printf("bench_gpu_alloc: %zu ops per thread (%zu pairs in thread 0), %d repetitions, median aggregate ns per "
         "allocate+free pair\n\n",
         ops, g_patterns[0].n_allocs, reps);
  printf("%-36s %12s %12s %12s\n", "allocator", "1 thread", "4 threads", "8 threads");
  for (i = 0; i < N_CONTENDERS; ++i) {
    printf("%-36s", cs[i].name);
    fflush(stdout);
    for (t = 0; t < 3; ++t) {
      if (quick && (i == RAW || i == FROM_POOL)) {
        ns[i][t] = 0.0; /* left out */
        continue;
      }
      ns[i][t] = measure(&cs[i], thread_counts[t], reps);
      printf(" %12.1f", ns[i][t]);
      fflush(stdout);
    }
    printf("\n");
  }
  printf("\nratio to raw cuMemAllocAsync at the same thread count:\n");
  for (i = 0; i < N_CONTENDERS; ++i) {
    printf("%-36s", cs[i].name);
    for (t = 0; t < 3; ++t) printf(" %11.3fx", ns[i][t] / ns[ASYNC][t]);
    printf("\n");
  }
  printf("\nratio to its own single-threaded ns/pair:\n");
  for (i = 0; i < N_CONTENDERS; ++i) {
    printf("%-36s", cs[i].name);
    for (t = 0; t < 3; ++t) printf(" %11.3fx", ns[i][t] / ns[i][0]);
    printf("\n");
  }
  {
    const double r1 = ns[POOL_CUDA][0] / ns[ASYNC][0];
    const double r8 = ns[POOL_CUDA][2] / ns[POOL_CUDA][0];
    const double a1 = ns[POOL_ASYNC][0] / ns[ASYNC][0];
    const double a8 = ns[POOL_ASYNC][2] / ns[POOL_ASYNC][0];
    printf("\ntargets:\n");
    printf("  pool(cuda)  1 thread / cuMemAllocAsync 1 thread  = %.3f (target <= 0.2): %s\n", r1,
           r1 <= 0.2 ? "met" : "MISSED");
    printf("  pool(async) 1 thread / cuMemAllocAsync 1 thread  = %.3f (target <= 0.2): %s\n", a1,
           a1 <= 0.2 ? "met" : "MISSED");
    printf("  pool(cuda)  8 threads aggregate / 1 thread       = %.3f (target <= 1.0): %s\n", r8,
           r8 <= 1.0 ? "met" : "MISSED");
    printf("  pool(async) 8 threads aggregate / 1 thread       = %.3f (target <= 1.0): %s\n", a8,
           a8 <= 1.0 ? "met" : "MISSED");
  }
  {
    /* The random pattern on a host pool of the same initial size, 1 thread
       (host_pool): the CPU's share of issue 22's random-pattern target. */
    tether_resource_t* h = NULL;
    contender host = host_pool("tether pool(host) (CPU only)", big.initial_size, &h);
    host_random = measure(&host, 1, reps);
    printf("\nthe same pattern, 1 thread, on a pool over host memory (%g GiB initial, CPU only): %.1f ns/pair; "
           "%s: %.3fx of it\n",
           initial_gib, host_random, cs[POOL_CUDA_BIG].name, ns[POOL_CUDA_BIG][0] / host_random);
    host_pool_release(&host, h);
  }
  fflush(stdout);
  sweep(&cs[ASYNC], &cs[swept[0]], &cs[swept[1]], &cs[swept[2]], reps, sweep_growth);

  {
    const int who[] = {ASYNC, POOL_CUDA, POOL_CUDA_BIG, POOL_ASYNC_BIG};
    size_t k;
    printf("\nrepeated pair: 1 thread, allocate + free 256 B, %d pairs, median of %d\n", 200000, reps);
    for (k = 0; k < sizeof who / sizeof who[0]; ++k) {
      repeated[who[k]] = repeated_pair(&cs[who[k]], 256, 200000, reps);
      printf("  %-36s %8.1f ns/pair (%.3fx cuMemAllocAsync)\n", cs[who[k]].name, repeated[who[k]],
             repeated[who[k]] / repeated[ASYNC]);
    }
    {
      /* The same pair on a host pool (host_pool): the CPU's share of the rows above. */
      tether_resource_t* h = NULL;
      contender host = host_pool("tether pool(host), 64 MiB (CPU only)", (size_t)64 << 20, &h);
      const double v = repeated_pair(&host, 256, 200000, reps);
      printf("  %-36s %8.1f ns/pair (%.3fx cuMemAllocAsync)\n", host.name, v, v / repeated[ASYNC]);
      host_pool_release(&host, h);
    }
  }

  printf("\nfootprint: a fresh pool, default options, 1 thread, the random pattern (%zu ops) 3 times, for %d seeds; "
         "bytes held from upstream / peak bytes live\n",
         ops, FOOTPRINT_SEEDS);
  footprint_seeds("tether pool(cuda)", cuda, ops, &fp_med[0], &fp_max[0]);
  footprint_seeds("tether pool(async)", async, ops, &fp_med[1], &fp_max[1]);

  {
    /* Issue 22: one GPU run, the C ABI, one thread on its own stream unless said. */
    const int big_pools[] = {POOL_CUDA_BIG, POOL_ASYNC_BIG}, default_pools[] = {POOL_CUDA, POOL_ASYNC};
    size_t k;
#define VERDICT(ok) ((ok) ? "met" : "MISSED")
    printf("\ntargets (issue 22):\n");
    printf("  %-36s 1 thread, random pattern: %.1f ns/pair (target <= 100): %s\n", cs[POOL_CUDA_BIG].name,
           ns[POOL_CUDA_BIG][0], VERDICT(ns[POOL_CUDA_BIG][0] <= 100.0));
    printf("  %-36s (the same pattern on a pool over host memory, this CPU only: %.1f ns/pair)\n", "", host_random);
    printf("  %-36s 1 thread, repeated 256 B pair: %.1f ns/pair (target <= 40): %s\n", cs[POOL_CUDA_BIG].name,
           repeated[POOL_CUDA_BIG], VERDICT(repeated[POOL_CUDA_BIG] <= 40.0));
    for (k = 0; k < 2; ++k) {
      const double r8 = ns[big_pools[k]][2] / ns[big_pools[k]][0];
      printf("  %-36s 8 threads / 1 thread = %.3f (target <= 0.2): %s\n", cs[big_pools[k]].name, r8,
             VERDICT(r8 <= 0.2));
    }
    for (k = 0; k < 2; ++k) {
      const double r8 = ns[default_pools[k]][2] / ns[default_pools[k]][0];
      printf("  %-36s 8 threads / 1 thread = %.3f (target <= 0.35): %s\n", cs[default_pools[k]].name, r8,
             VERDICT(r8 <= 0.35));
    }
    for (k = 0; k < 3; ++k)
      printf("  %-36s live sweep 100k / 1k = %.3f (target <= 1.5): %s\n", cs[swept[k]].name, sweep_growth[k],
             VERDICT(sweep_growth[k] <= 1.5));
    for (k = 0; k < 2; ++k)
      printf("  %-36s footprint median %.3f (target <= 1.15): %s, max %.3f (target <= 1.25): %s\n",
             k == 0 ? "tether pool(cuda)" : "tether pool(async)", fp_med[k], VERDICT(fp_med[k] <= 1.15), fp_max[k],
             VERDICT(fp_max[k] <= 1.25));
#undef VERDICT
  }
  fflush(stdout);

  {
    /* Reference costs for stream-ordering designs: one event record, one
       record + cross-stream wait (what a pool pays per free or per steal). */
    CUevent ev;
    double v[5], w[5];
    const int n = 100000;
    int r, k;
    CU_CHECK(cu.EventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    for (r = 0; r < 5; ++r) {
      double t0 = bench_now_ns();
      for (k = 0; k < n; ++k) CU_CHECK(cu.EventRecord(ev, g_streams[0]));
      v[r] = (bench_now_ns() - t0) / n;
      t0 = bench_now_ns();
      for (k = 0; k < n; ++k) {
        CU_CHECK(cu.EventRecord(ev, g_streams[0]));
        CU_CHECK(cu.StreamWaitEvent(g_streams[1], ev, 0));
      }
      w[r] = (bench_now_ns() - t0) / n;
      CU_CHECK(cu.StreamSynchronize(g_streams[1]));
    }
    printf("\nreference: cuEventRecord %.1f ns; cuEventRecord + cuStreamWaitEvent %.1f ns (median of 5 x %d)\n",
           bench_median(v, 5), bench_median(w, 5), n);
    CU_CHECK(cu.EventDestroy(ev));
  }

  for (i = TETHER_DEFAULT; i < N_CONTENDERS; ++i) tether_resource_release(cs[i].resource);
  tether_resource_release(cuda);
  tether_resource_release(async);
  for (t = 0; t < MAX_THREADS; ++t) {
    CU_CHECK(cu.StreamDestroy(g_streams[t]));
    free(g_patterns[t].ops);
  }
  CU_CHECK(cu.MemPoolTrimTo(g_default_pool, 0));
  return 0;
}
