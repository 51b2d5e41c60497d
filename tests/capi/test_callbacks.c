/*
 * The user-callback types over the C ABI: a resource whose allocate/deallocate
 * are C functions (a vtable with a context), pooled, installed as the current
 * resource and used from many threads; the logging adaptor's lines and file;
 * the failure-callback adaptor spilling held buffers and retrying.
 */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

/* ---- a C memory resource: aligned_alloc with a live count and a budget ---- */

typedef struct {
  atomic_int live;       /* blocks handed out and not given back */
  atomic_int destroyed;  /* destroy calls */
  atomic_long budget;    /* bytes it may still hand out */
} heap_ctx;

static tether_status_t heap_allocate(void* context, size_t size, size_t alignment, tether_stream_t stream,
                                     void** out) {
  heap_ctx* h = (heap_ctx*)context;
  (void)stream;
  if (atomic_fetch_sub(&h->budget, (long)size) < (long)size) {
    atomic_fetch_add(&h->budget, (long)size);
    return tether_callback_set_error(TETHER_ERROR_OUT_OF_MEMORY, "heap_ctx budget exhausted");
  }
  *out = aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (*out == NULL) {
    atomic_fetch_add(&h->budget, (long)size);
    return TETHER_ERROR_OUT_OF_MEMORY;
  }
  atomic_fetch_add(&h->live, 1);
  return TETHER_OK;
}

static tether_status_t heap_deallocate(void* context, void* ptr, size_t size, size_t alignment,
                                       tether_stream_t stream) {
  heap_ctx* h = (heap_ctx*)context;
  (void)alignment;
  (void)stream;
  free(ptr);
  atomic_fetch_add(&h->budget, (long)size);
  atomic_fetch_sub(&h->live, 1);
  return TETHER_OK;
}

static void heap_destroy(void* context) { atomic_fetch_add(&((heap_ctx*)context)->destroyed, 1); }

static tether_resource_t* heap_resource(heap_ctx* h, long budget) {
  tether_callback_vtable_t v = TETHER_CALLBACK_VTABLE_INIT;
  tether_resource_t* r = NULL;
  atomic_init(&h->live, 0);
  atomic_init(&h->destroyed, 0);
  atomic_init(&h->budget, budget);
  v.allocate = heap_allocate;
  v.deallocate = heap_deallocate;
  v.destroy = heap_destroy;
  REQUIRE_OK(tether_callback_resource_create(&v, h, NULL, &r));
  return r;
}

static void callback_resource_basics(void) {
  heap_ctx h;
  tether_resource_t* r = heap_resource(&h, 1 << 20);
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  void *p = NULL, *q = NULL;
  int local = 0;
  CHECK_OK(tether_resource_get_properties(r, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_CALLBACK);
  CHECK(props.device == TETHER_DEVICE_HOST && props.host_accessible && !props.device_accessible);
  CHECK(strcmp(tether_resource_get_name(r), "callback") == 0);

  CHECK_OK(tether_resource_allocate(r, 1000, 512, 0, &p));
  CHECK(p != NULL && (uintptr_t)p % 512 == 0);
  CHECK(atomic_load(&h.live) == 1);
  /* Frees are checked before the user's function sees them. */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(r, &local, 4, 0, 0), "not allocated");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(r, p, 999, 512, 0), "size");
  CHECK(atomic_load(&h.live) == 1);
  CHECK_OK(tether_resource_deallocate(r, p, 1000, 512, 0));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(r, p, 1000, 512, 0), "already freed");
  CHECK(atomic_load(&h.live) == 0);

  /* Out of memory carries the callback's reason. */
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(r, 2 << 20, 0, 0, &q), "budget exhausted");
  CHECK(q == NULL);
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(r, 2 << 20, 0, 0, &q), "TETHER_ERROR_OUT_OF_MEMORY");

  CHECK(atomic_load(&h.destroyed) == 0);
  CHECK_OK(tether_resource_release(r));
  CHECK(atomic_load(&h.destroyed) == 1);
}

static void callback_resource_arguments(void) {
  heap_ctx h;
  tether_callback_vtable_t v = TETHER_CALLBACK_VTABLE_INIT;
  tether_callback_options_t o;
  tether_resource_t* r = NULL;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_callback_resource_create(NULL, &h, NULL, &r), "vtable");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_callback_resource_create(&v, &h, NULL, &r), "allocate");
  v.allocate = heap_allocate;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_callback_resource_create(&v, &h, NULL, &r), "deallocate");
  v.deallocate = heap_deallocate;
  v.destroy = heap_destroy;
  atomic_init(&h.destroyed, 0);
  v.struct_size = 4;
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_callback_resource_create(&v, &h, NULL, &r), "struct_size");
  CHECK_OK(tether_callback_vtable_init(&v, sizeof v));
  CHECK(v.allocate == NULL && v.struct_size == sizeof v);
  CHECK_OK(tether_callback_options_init(&o, sizeof o));
  CHECK(o.device == TETHER_DEVICE_HOST && o.host_accessible == 1 && o.device_accessible == 0);
  v.allocate = heap_allocate;
  v.deallocate = heap_deallocate;
  v.destroy = heap_destroy;
  o.device = -7;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_callback_resource_create(&v, &h, &o, &r), "device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_callback_resource_create(&v, &h, NULL, NULL), "out");
  CHECK(r == NULL);
  CHECK(atomic_load(&h.destroyed) == 0); /* failed creations leave the context to the caller */
}

/* A pool over the C resource, installed as the host's current resource,
   used by buffers from several threads, then everything released in any order. */
#define THREADS 4
#define ROUNDS 2000

static void* buffer_worker(void* arg) {
  int i;
  (void)arg;
  for (i = 0; i < ROUNDS; ++i) {
    tether_buffer_t* b = NULL;
    void* p = NULL;
    size_t n = (size_t)(i % 97) * 64 + 1;
    CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, n, 0, &b));
    CHECK_OK(tether_buffer_get_ptr(b, &p));
    memset(p, i & 0xff, n);
    CHECK_OK(tether_buffer_release(b));
  }
  return NULL;
}

static void pooled_and_current(void) {
  heap_ctx h;
  tether_resource_t* r = heap_resource(&h, 64L << 20);
  tether_resource_t *pool = NULL, *prev = NULL, *cur = NULL;
  pthread_t t[THREADS];
  int i;
  REQUIRE_OK(tether_pool_resource_create(r, NULL, &pool));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, pool, &prev));
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
  CHECK(cur == pool);
  CHECK_OK(tether_resource_release(cur));
  for (i = 0; i < THREADS; ++i) pthread_create(&t[i], NULL, buffer_worker, NULL);
  for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
  CHECK(atomic_load(&h.live) >= 1); /* the pool's chunks */
  CHECK_OK(tether_resource_release(r)); /* the pool keeps it alive */
  CHECK(atomic_load(&h.destroyed) == 0);
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, prev, NULL));
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_resource_release(pool));
  CHECK(atomic_load(&h.live) == 0);
  CHECK(atomic_load(&h.destroyed) == 1);
}

/* Direct allocations from many threads: the books stay exact. */
static void* raw_worker(void* arg) {
  tether_resource_t* r = (tether_resource_t*)arg;
  int i;
  for (i = 0; i < ROUNDS; ++i) {
    void* p = NULL;
    size_t n = (size_t)(i % 31) * 8 + 8;
    if (tether_resource_allocate(r, n, 0, 0, &p) == TETHER_OK) CHECK_OK(tether_resource_deallocate(r, p, n, 0, 0));
  }
  return NULL;
}

static void threads(void) {
  heap_ctx h;
  tether_resource_t* r = heap_resource(&h, 1L << 30);
  pthread_t t[THREADS];
  int i;
  for (i = 0; i < THREADS; ++i) pthread_create(&t[i], NULL, raw_worker, r);
  for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
  CHECK(atomic_load(&h.live) == 0);
  CHECK_OK(tether_resource_release(r));
  CHECK(atomic_load(&h.destroyed) == 1);
}

/* ---- logging ------------------------------------------------------------------ */

typedef struct {
  char lines[16][192];
  int count;
  int destroyed;
} log_ctx;

static void collect(const char* line, size_t length, void* user) {
  log_ctx* c = (log_ctx*)user;
  CHECK(strlen(line) == length);
  if (c->count < 16) {
    strncpy(c->lines[c->count], line, sizeof c->lines[0] - 1);
    c->lines[c->count][sizeof c->lines[0] - 1] = '\0';
  }
  c->count++;
}

static void log_destroy(void* user) { ((log_ctx*)user)->destroyed++; }

static void logging(void) {
  log_ctx c;
  tether_resource_t *host = NULL, *log = NULL;
  tether_logging_options_t o;
  void *p = NULL, *q = NULL;
  char expect[64];
  memset(&c, 0, sizeof c);
  REQUIRE_OK(tether_host_resource_create(&host));
  CHECK_OK(tether_logging_options_init(&o, sizeof o));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_logging_adaptor_create(host, &o, &log), "path");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_logging_adaptor_create(host, NULL, &log), "options");
  o.path = "/nonexistent-dir/tether.csv";
  o.user = &c;
  o.destroy = log_destroy;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_logging_adaptor_create(host, &o, &log), "/nonexistent-dir");
  CHECK(c.destroyed == 0);
  o.path = NULL;
  o.callback = collect;
  REQUIRE_OK(tether_logging_adaptor_create(host, &o, &log));
  CHECK_OK(tether_logging_adaptor_flush(log)); /* no file: nothing to do */
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_logging_adaptor_flush(host), "not a logging adaptor");
  CHECK_OK(tether_resource_allocate(log, 48, 0, 5, &p));
  CHECK_STATUS(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(log, SIZE_MAX / 2, 0, 0, &q));
  CHECK(c.count == 3);
  CHECK(strcmp(c.lines[0], "time_ns,thread,action,pointer,size,stream,status") == 0);
  CHECK(strstr(c.lines[1], ",allocate,") != NULL && strstr(c.lines[1], ",48,5,TETHER_OK") != NULL);
  CHECK(strstr(c.lines[2], ",allocate,0x0,") != NULL && strstr(c.lines[2], "TETHER_ERROR_OUT_OF_MEMORY") != NULL);
  snprintf(expect, sizeof expect, ",free,%p,48,5,TETHER_OK", p);
  CHECK_OK(tether_resource_deallocate(log, p, 48, 0, 5));
  CHECK(c.count == 4 && strstr(c.lines[3], expect) != NULL);
  CHECK_OK(tether_resource_release(host)); /* the adaptor keeps it */
  CHECK(c.destroyed == 0);
  CHECK_OK(tether_resource_release(log));
  CHECK(c.destroyed == 1);
}

/* ---- failure callback: spilling ------------------------------------------------------ */

typedef struct {
  tether_resource_t* adaptor;
  void* held[4];
  int held_count;
  int calls;
} spill_ctx;

static int spill(size_t size, void* user) {
  spill_ctx* s = (spill_ctx*)user;
  int i;
  (void)size;
  s->calls++;
  if (s->held_count == 0) return 0;
  for (i = 0; i < s->held_count; ++i) CHECK_OK(tether_resource_deallocate(s->adaptor, s->held[i], 1 << 20, 0, 0));
  s->held_count = 0;
  return 1;
}

static void failure_callback(void) {
  heap_ctx h;
  spill_ctx s;
  tether_resource_t* heap = heap_resource(&h, 4L << 20);
  tether_failure_callback_options_t o = TETHER_FAILURE_CALLBACK_OPTIONS_INIT;
  void* big = NULL;
  int i;
  memset(&s, 0, sizeof s);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_failure_callback_adaptor_create(heap, &o, &s.adaptor), "callback");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_failure_callback_adaptor_create(heap, NULL, &s.adaptor), "options");
  o.callback = spill;
  o.user = &s;
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_failure_callback_adaptor_create(NULL, &o, &s.adaptor), "NULL");
  REQUIRE_OK(tether_failure_callback_adaptor_create(heap, &o, &s.adaptor));
  for (i = 0; i < 3; ++i) REQUIRE_OK(tether_resource_allocate(s.adaptor, 1 << 20, 0, 0, &s.held[i]));
  s.held_count = 3;
  /* 3 MiB more than the 4 MiB budget allows: spill, retry, succeed. */
  CHECK_OK(tether_resource_allocate(s.adaptor, 3 << 20, 0, 0, &big));
  CHECK(s.calls == 1 && s.held_count == 0 && big != NULL);
  /* Nothing left to spill: out of memory after one more call. */
  CHECK_STATUS(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(s.adaptor, 3 << 20, 0, 0, &s.held[0]));
  CHECK(s.calls == 2);
  CHECK_OK(tether_resource_deallocate(s.adaptor, big, 3 << 20, 0, 0));
  CHECK_OK(tether_resource_release(s.adaptor));
  CHECK_OK(tether_resource_release(heap));
  CHECK(atomic_load(&h.live) == 0 && atomic_load(&h.destroyed) == 1);
}

int main(void) {
  RUN(callback_resource_basics);
  RUN(callback_resource_arguments);
  RUN(pooled_and_current);
  RUN(threads);
  RUN(logging);
  RUN(failure_callback);
  return tt_finish("test_callbacks");
}
