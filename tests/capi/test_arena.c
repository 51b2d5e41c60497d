/*
 * The arena resource over the C ABI (tether/arena.h): options, info, checked
 * frees, kind and name, retained upstream, trim, and threads that allocate
 * and free across each other.
 */
#include <pthread.h>

#include "test_support.h"

#define MIB ((size_t)1 << 20)

static uint64_t current_bytes(tether_resource_t* stats) {
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  if (tether_resource_get_statistics(stats, &s) != TETHER_OK) return UINT64_MAX;
  return s.current_bytes;
}

static void options_and_info(void) {
  tether_arena_options_t o;
  tether_arena_info_t info = TETHER_ARENA_INFO_INIT;
  tether_resource_t *host = NULL, *stats = NULL, *arena = NULL, *up = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  void *small = NULL, *large = NULL;

  CHECK_OK(tether_arena_options_init(&o, sizeof o));
  CHECK(o.struct_size == sizeof o && o.arena_size == 0 && o.superblock_size == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_arena_options_init(NULL, sizeof o), "options");

  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &stats));
  o.superblock_size = 3 * MIB;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_arena_resource_create(stats, &o, &arena), "superblock_size");
  CHECK(arena == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_arena_resource_create(NULL, NULL, &arena), "resource handle");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_arena_resource_create(stats, NULL, NULL), "out");

  o.superblock_size = 0;
  o.arena_size = 8 * MIB;
  REQUIRE_OK(tether_arena_resource_create(stats, &o, &arena));
  CHECK(current_bytes(stats) == 8 * MIB);
  CHECK(strcmp(tether_resource_get_name(arena), "arena") == 0);
  CHECK_OK(tether_resource_get_properties(arena, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_ARENA && props.host_accessible && props.device == TETHER_DEVICE_HOST);
  CHECK_OK(tether_resource_get_upstream(arena, &up));
  CHECK(up == stats);

  REQUIRE_OK(tether_resource_allocate(arena, 1000, 0, 0, &small));
  REQUIRE_OK(tether_resource_allocate(arena, 3 * MIB, 0, 0, &large));
  memset(small, 1, 1000);
  memset(large, 2, 3 * MIB);
  CHECK_OK(tether_arena_get_info(arena, &info));
  CHECK(info.arena_size == 8 * MIB && info.superblock_size == MIB && info.large_bytes == 3 * MIB);
  CHECK(info.arena_superblocks == 1 && info.arena_count == 1 && info.chunk_count == 1);
  CHECK(info.global_free_bytes == 4 * MIB);
  {
    void* none = &info;
    CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(arena, 5 * MIB, 0, 0, &none), "arena");
    CHECK(none == NULL);
  }
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_arena_get_info(host, &info), "not an arena");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_arena_get_info(arena, NULL), "out");

  /* Checked frees: wrong size, wrong alignment, interior and foreign pointers change nothing. */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(arena, small, 999, 0, 0), "1000");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(arena, small, 1000, 4096, 0), "alignment");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(arena, (char*)large + MIB, MIB, 0, 0), "pointer");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(arena, &info, 8, 0, 0), "pointer");
  CHECK_OK(tether_resource_deallocate(arena, small, 1000, 0, 0));
  CHECK_OK(tether_resource_deallocate(arena, large, 3 * MIB, 0, 0));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(arena, small, 1000, 0, 0), "pointer");

  /* The arena retains its upstream: released first, the arena still works; trim gives all back. */
  CHECK_OK(tether_resource_release(host));
  REQUIRE_OK(tether_resource_allocate(arena, 100, 0, 0, &small));
  CHECK_OK(tether_resource_deallocate(arena, small, 100, 0, 0));
  CHECK_OK(tether_resource_trim(arena));
  CHECK(current_bytes(stats) == 0);
  CHECK_OK(tether_resource_release(arena));
  CHECK_OK(tether_resource_release(stats));
}

#define THREADS 8
#define LIVE 16
static tether_resource_t* g_arena;
static void* g_handoff[THREADS][LIVE];
static size_t g_sizes[THREADS][LIVE];
static atomic_int g_errors;

static void* worker(void* arg) {
  const int t = (int)(intptr_t)arg;
  unsigned seed = 1234u + (unsigned)t;
  int round, i;
  for (round = 0; round < 300; ++round) {
    void* p[LIVE];
    size_t n[LIVE];
    for (i = 0; i < LIVE; ++i) {
      seed = seed * 1103515245u + 12345u;
      n[i] = (seed >> 8) % 5 == 0 ? MIB + (seed >> 4) % MIB : 1 + (seed >> 8) % 30000;
      if (tether_resource_allocate(g_arena, n[i], 0, (tether_stream_t)t, &p[i]) != TETHER_OK) ++g_errors;
      else memset(p[i], t, n[i]);
    }
    for (i = 0; i < LIVE; ++i) {
      const unsigned char* c = p[i];
      if (c == NULL || c[0] != t || c[n[i] - 1] != t) ++g_errors;
      if (round == 299) {
        g_handoff[t][i] = p[i];
        g_sizes[t][i] = n[i];
      } else if (tether_resource_deallocate(g_arena, p[i], n[i], 0, (tether_stream_t)t) != TETHER_OK) {
        ++g_errors;
      }
    }
  }
  return NULL;
}

static void* freer(void* arg) {
  const int from = ((int)(intptr_t)arg + 1) % THREADS;
  int i;
  for (i = 0; i < LIVE; ++i)
    if (tether_resource_deallocate(g_arena, g_handoff[from][i], g_sizes[from][i], 0, 0) != TETHER_OK) ++g_errors;
  return NULL;
}

static void threads_allocate_and_free_across_each_other(void) {
  tether_resource_t* host = NULL;
  pthread_t th[THREADS];
  intptr_t t;
  tether_arena_info_t info = TETHER_ARENA_INFO_INIT;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_arena_resource_create(host, NULL, &g_arena));
  for (t = 0; t < THREADS; ++t) REQUIRE(pthread_create(&th[t], NULL, worker, (void*)t) == 0);
  for (t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (t = 0; t < THREADS; ++t) REQUIRE(pthread_create(&th[t], NULL, freer, (void*)t) == 0);
  for (t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  CHECK(atomic_load(&g_errors) == 0);
  CHECK_OK(tether_arena_get_info(g_arena, &info));
  CHECK(info.arena_count >= 1 && info.large_bytes == 0);
  CHECK_OK(tether_resource_trim(g_arena));
  CHECK_OK(tether_arena_get_info(g_arena, &info));
  CHECK(info.arena_size == 0 && info.arena_superblocks == 0);
  CHECK_OK(tether_resource_release(g_arena));
  CHECK_OK(tether_resource_release(host));
}

int main(void) {
  options_and_info();
  threads_allocate_and_free_across_each_other();
  return tt_finish("test_arena");
}
