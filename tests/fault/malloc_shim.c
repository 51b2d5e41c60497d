/*
 * malloc_shim.c - an LD_PRELOAD allocation-failure injector.
 *
 * Interposes malloc, calloc, realloc, posix_memalign, aligned_alloc,
 * memalign and valloc (C++ operator new calls malloc, or aligned_alloc for
 * over-aligned types, so it is covered too) and forwards to glibc's
 * __libc_* functions. Allocations are counted only while the program has
 * armed the shim (fault_shim_arm(1), found with dlsym: a program that does
 * not know the shim runs unchanged).
 *
 * Environment (read at the first arm):
 *   FAULT_FAIL_AT=N    fail the Nth counted allocation (1-based), once; 0: none
 *   FAULT_FAIL_FROM=1  with FAULT_FAIL_AT: fail every allocation from the Nth on
 *   FAULT_PROB=p       fail each counted allocation with probability p (0..1)
 *   FAULT_SEED=s       seed of the probability mode (default 1)
 * fault_shim_count() is the number of allocations counted so far (the
 * counting mode: arm with no failure set), fault_shim_failures() how many
 * were failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SHIM_API __attribute__((visibility("default")))

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static atomic_int g_armed;
static atomic_long g_count;
static atomic_long g_failures;
static int g_configured;
static long g_fail_at;
static int g_fail_from;
static uint64_t g_threshold; /* fail if the random draw is below this; 0: never */
static _Atomic uint64_t g_rng = 1;

static long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : fallback;
}

static void configure(void) {
  if (g_configured) return;
  g_fail_at = env_long("FAULT_FAIL_AT", 0);
  g_fail_from = env_long("FAULT_FAIL_FROM", 0) != 0;
  const char* p = getenv("FAULT_PROB");
  if (p && *p) {
    const double prob = strtod(p, NULL);
    g_threshold = prob <= 0 ? 0 : prob >= 1 ? UINT64_MAX : (uint64_t)(prob * 18446744073709551616.0);
  }
  uint64_t seed = (uint64_t)env_long("FAULT_SEED", 1);
  atomic_store(&g_rng, seed * 0x9E3779B97F4A7C15ull + 1);
  g_configured = 1;
}

/* Does this allocation fail? Counts it when armed. */
static int should_fail(void) {
  if (!atomic_load_explicit(&g_armed, memory_order_relaxed)) return 0;
  const long n = atomic_fetch_add(&g_count, 1) + 1;
  int fail = 0;
  if (g_fail_at > 0 && (n == g_fail_at || (g_fail_from && n > g_fail_at))) fail = 1;
  if (!fail && g_threshold != 0) {
    /* splitmix64 step */
    uint64_t z = atomic_fetch_add(&g_rng, 0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    fail = z < g_threshold;
  }
  if (fail) atomic_fetch_add(&g_failures, 1);
  return fail;
}

SHIM_API void fault_shim_arm(int on) {
  configure();
  atomic_store(&g_armed, on != 0);
}
SHIM_API long fault_shim_count(void) { return atomic_load(&g_count); }
SHIM_API long fault_shim_failures(void) { return atomic_load(&g_failures); }

SHIM_API void* malloc(size_t n) {
  if (should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_malloc(n);
}

SHIM_API void* calloc(size_t a, size_t b) {
  if (should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_calloc(a, b);
}

SHIM_API void* realloc(void* p, size_t n) {
  if (should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(p, n);
}

SHIM_API void* memalign(size_t alignment, size_t n) {
  if (should_fail()) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_memalign(alignment, n);
}

SHIM_API void* aligned_alloc(size_t alignment, size_t n) { return memalign(alignment, n); }

SHIM_API void* valloc(size_t n) { return memalign(4096, n); }

SHIM_API int posix_memalign(void** out, size_t alignment, size_t n) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  if (should_fail()) return ENOMEM;
  void* p = __libc_memalign(alignment, n);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}
