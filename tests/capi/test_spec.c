/*
 * test_spec.c - resource specs: parse, build, describe (round trip), errors
 * that name the position and token, and the table's default from the
 * environment (TETHER_RESOURCE_HOST, read at the slot's first get).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "test_support.h"

static size_t census(void) { return tether_debug_live_objects(TETHER_OBJECT_ANY); }

/* The spec of r, in a static buffer. */
static const char* spec_of(tether_resource_t* r) {
  static char buf[1024];
  size_t n = 0;
  buf[0] = '\0';
  CHECK_OK(tether_resource_get_spec(r, buf, sizeof buf, &n));
  CHECK(n == strlen(buf));
  return buf;
}

static void builds_a_host_stack(void) {
  const size_t before = census();
  tether_resource_t* r = NULL;
  REQUIRE_OK(tether_resource_create_from_spec(
      "statistics( pool(host, initial_size=64MiB, maximum_size = \"1 GiB\", growth_size=4096) )", &r));
  CHECK(strcmp(tether_resource_get_name(r), "statistics") == 0);
  tether_resource_t* pool = NULL;
  CHECK_OK(tether_resource_get_upstream(r, &pool));
  CHECK(strcmp(tether_resource_get_name(pool), "pool") == 0);
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  CHECK_OK(tether_resource_get_pool_info(pool, &info));
  CHECK(info.pool_size == 64u << 20);
  CHECK(strcmp(spec_of(r), "statistics(pool(host, initial_size=64MiB, maximum_size=1GiB, growth_size=4KiB))") == 0);
  void* p = NULL;
  CHECK_OK(tether_resource_allocate(r, 1000, 0, 0, &p));
  CHECK(p != NULL);
  CHECK_OK(tether_resource_deallocate(r, p, 1000, 0, 0));
  tether_resource_release(r);  /* the stack's only reference: everything goes */
  CHECK(census() == before);
}

static void round_trips(void) {
  const char* specs[] = {"host", "pool(host)", "pool(pool(host, initial_size=1MiB), maximum_size=3000000)",
                         "statistics(statistics(host))", "pool(host, initial_size=1536KiB)"};
  const char* expected[] = {"host", "pool(host)", "pool(pool(host, initial_size=1MiB), maximum_size=3000000)",
                            "statistics(statistics(host))", "pool(host, initial_size=1536KiB)"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; ++i) {
    tether_resource_t* a = NULL;
    tether_resource_t* b = NULL;
    REQUIRE_OK(tether_resource_create_from_spec(specs[i], &a));
    char first[256];
    snprintf(first, sizeof first, "%s", spec_of(a));
    CHECK(strcmp(first, expected[i]) == 0);
    REQUIRE_OK(tether_resource_create_from_spec(first, &b)); /* the spec builds an equivalent stack */
    CHECK(strcmp(spec_of(b), first) == 0);
    tether_resource_release(a);
    tether_resource_release(b);
  }
  /* aliases (RMM's spellings) and the written-out upstream are the same parameters */
  tether_resource_t* r = NULL;
  REQUIRE_OK(tether_resource_create_from_spec("pool(upstream=host, initial_pool_size=2MiB, maximum_pool_size=8MiB)", &r));
  CHECK(strcmp(spec_of(r), "pool(host, initial_size=2MiB, maximum_size=8MiB)") == 0);
  tether_resource_release(r);
}

static void resources_made_in_c_describe_themselves(void) {
  tether_resource_t *host, *pool;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.maximum_size = 5u << 20;
  REQUIRE_OK(tether_pool_resource_create(host, &o, &pool));
  CHECK(strcmp(spec_of(pool), "pool(host, maximum_size=5MiB)") == 0);
  /* size query, then a buffer too small: INVALID_ARGUMENT naming the size, buffer untouched */
  size_t n = 0;
  CHECK_OK(tether_resource_get_spec(pool, NULL, 0, &n));
  CHECK(n == strlen("pool(host, maximum_size=5MiB)"));
  char small[8] = "xxxxxxx";
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_get_spec(pool, small, sizeof small, &n), "needs 30 bytes");
  CHECK(strcmp(small, "xxxxxxx") == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_get_spec(pool, small, sizeof small, NULL), "out_length");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_get_spec(pool, NULL, 5, &n), "buffer");
  tether_resource_release(pool);
  tether_resource_release(host);
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_get_spec(host, NULL, 0, &n), "resource");
}

/* Every bad spec: INVALID_ARGUMENT whose message has the position and the token; nothing leaks. */
static void errors_name_position_and_token(void) {
  const struct { const char* spec; const char* needle; } cases[] = {
      {"pool(host, initial=1MiB)", "spec:12: unknown parameter 'initial' of pool"},
      {"pol(host)", "spec:1: unknown resource 'pol'"},
      {"pool(hots)", "spec:6: unknown resource 'hots'"},
      {"pool()", "pool needs an upstream"},
      {"pool(host, initial_size=12 parsecs)", "unknown unit"},
      {"pool(host, initial_size=1.5)", "not a whole number of bytes"},
      {"pool(host, initial_size=99999999999999999999999)", "size"},
      {"pool(host, initial_size=20000000 TiB)", "does not fit in 64 bits"},
      {"pool(host, initial_size=50%)", "a percentage needs device memory"},
      {"pool(host, initial_size=1MiB, initial_size=2MiB)", "given twice"},
      {"pool(host, maximum_size=1MiB, host)", "only the first argument"},
      {"pool(host", "missing ')'"},
      {"pool(host))", "unexpected ')'"},
      {"", "empty spec"},
      {"host(1)", "host takes no positional argument"},
      {"pool(host, initial_size=pool(host))", "takes a value, not a resource"},
      {"pool(host, initial_size=)", "expected a value, got ')'"},
      {"pool(host, \"oops)", "unterminated quote"},
      {"pool(host, initial_size=64MiB, maximum_size=1MiB)", "cannot create pool"},
      {"statistics(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(pool(host)))))))))))))))))",
       "nested more than"},
  };
  const size_t before = census();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    tether_resource_t* r = (tether_resource_t*)&r; /* must become NULL */
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec(cases[i].spec, &r), cases[i].needle);
    CHECK(r == NULL);
  }
  CHECK(census() == before);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec(NULL, &(tether_resource_t*){NULL}), "spec");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec("host", NULL), "out");
  char* huge = malloc(5000);
  REQUIRE(huge != NULL);
  memset(huge, ' ', 4999);
  huge[4999] = '\0';
  tether_resource_t* r = NULL;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec(huge, &r), "longer than 4096");
  free(huge);
}

/* Without a device, CUDA specs fail with NO_DEVICE (or NOT_SUPPORTED in a build without CUDA headers). */
static void cuda_specs(void) {
  tether_resource_t* r = NULL;
  if (!tt_have_gpu()) {
    tether_status_t s = tether_resource_create_from_spec("pool(cuda(), initial_size=10%)", &r);
    CHECK(s == TETHER_ERROR_NO_DEVICE || s == TETHER_ERROR_NOT_SUPPORTED);
    CHECK(r == NULL);
    printf("  (no GPU: CUDA specs checked for their error only)\n");
    return;
  }
  size_t free_bytes = 0, total = 0;
  REQUIRE_OK(tether_cuda_get_memory_info(0, &free_bytes, &total));
  CHECK(total > 0 && free_bytes <= total);
  REQUIRE_OK(tether_resource_create_from_spec("statistics(pool(cuda(0), initial_size=1%, maximum_size=2%))", &r));
  tether_resource_t* pool = NULL;
  CHECK_OK(tether_resource_get_upstream(r, &pool));
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  CHECK_OK(tether_resource_get_pool_info(pool, &info));
  CHECK(info.pool_size >= total / 100);
  char first[512];
  snprintf(first, sizeof first, "%s", spec_of(r));
  CHECK(strncmp(first, "statistics(pool(cuda(device=0), initial_size=", 45) == 0);
  tether_resource_release(r);
  REQUIRE_OK(tether_resource_create_from_spec(first, &r));
  CHECK(strcmp(spec_of(r), first) == 0);
  tether_resource_release(r);
  REQUIRE_OK(tether_resource_create_from_spec("async(device=0, initial_pool_size=64MiB, release_threshold=128MiB)", &r));
  CHECK(strcmp(spec_of(r), "async(device=0, initial_pool_size=64MiB, release_threshold=128MiB)") == 0);
  tether_resource_release(r);
  REQUIRE_OK(tether_resource_create_from_spec("pool(async(0, use_default_pool=true))", &r));
  CHECK(strcmp(spec_of(r), "pool(async(device=0, use_default_pool=true))") == 0);
  tether_resource_release(r);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec("cuda(device=999)", &r), "spec:1");
}

/* TETHER_RESOURCE_HOST names the host slot's default, built at its first get. */
static void host_default_from_environment(void) {
  setenv("TETHER_RESOURCE_HOST", "statistics(pool(host, initial_size=3MiB))", 1);
  tether_resource_t* r = NULL;
  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &r));
  CHECK(strcmp(spec_of(r), "statistics(pool(host, initial_size=3MiB))") == 0);
  tether_resource_release(r);
  /* setting NULL makes the slot unset again: the next get rebuilds from the (now bad) variable */
  setenv("TETHER_RESOURCE_HOST", "pool(host, initial=1)", 1);
  tether_resource_t* prev = NULL;
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  tether_resource_release(prev);
  for (int i = 0; i < 2; ++i) { /* fails every time, never falls back silently */
    r = NULL;
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_get(TETHER_DEVICE_HOST, &r),
                "TETHER_RESOURCE_HOST='pool(host, initial=1)'");
    CHECK(r == NULL);
  }
  /* a set wins over the bad variable */
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, host, NULL));
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &r));
  CHECK(r == host);
  tether_resource_release(r);
  tether_resource_release(host);
  /* a spec whose memory does not suit the slot is refused */
  setenv("TETHER_RESOURCE_HOST", "host", 1);
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  tether_resource_release(prev);
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &r));
  tether_resource_release(r);
  unsetenv("TETHER_RESOURCE_HOST");
}

/* Bins added after creation are part of the spec (bins='...'); rebuilding routes the same. */
static void binning_bins_round_trip(void) {
  tether_resource_t *host, *fallback, *bin, *r, *back;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_pool_resource_create(host, NULL, &fallback));
  tether_binning_options_t o = TETHER_BINNING_OPTIONS_INIT;
  o.fallback = fallback;
  REQUIRE_OK(tether_binning_resource_create(host, &o, &r));
  CHECK_OK(tether_binning_resource_add_bin(r, 4096, NULL));
  CHECK_OK(tether_binning_resource_add_bin(r, 65536, NULL));
  char first[256];
  snprintf(first, sizeof first, "%s", spec_of(r));
  CHECK(strcmp(first, "binning(host, fallback=pool(host), bins='4KiB,64KiB')") == 0);
  REQUIRE_OK(tether_resource_create_from_spec(first, &back));
  size_t sizes[4] = {0}, count = 0;
  CHECK_OK(tether_binning_get_bin_sizes(back, sizes, 4, &count));
  CHECK(count == 2 && sizes[0] == 4096 && sizes[1] == 65536);
  CHECK(strcmp(spec_of(back), first) == 0);
  tether_resource_release(back);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec("binning(host, bins='4KiB,,8KiB')", &back),
              "bins");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec("binning(host, bins='4KiB,4KiB')", &back),
              "cannot add a bin");
  /* a bin given as a resource cannot be written: NOT_SUPPORTED, never a spec that routes differently */
  REQUIRE_OK(tether_host_resource_create(&bin));
  CHECK_OK(tether_binning_resource_add_bin(r, 1 << 20, bin));
  size_t n = 0;
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_spec(r, NULL, 0, &n), "bin given as a resource");
  tether_resource_release(bin);
  tether_resource_release(r);
  tether_resource_release(fallback);
  tether_resource_release(host);
}

/* Paths are quoted with any quote doubled, so every UTF-8 path round-trips. */
static void paths_are_quoted(void) {
  const char* dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/te'st \"q\" \xc3\xa9.log", dir && *dir ? dir : "/tmp");
  tether_resource_t *host, *r, *back;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_logging_options_t o = TETHER_LOGGING_OPTIONS_INIT;
  o.path = path;
  REQUIRE_OK(tether_logging_adaptor_create(host, &o, &r));
  char first[1024];
  snprintf(first, sizeof first, "%s", spec_of(r));
  CHECK(strstr(first, "te''st \"q\"") != NULL);
  REQUIRE_OK(tether_resource_create_from_spec(first, &back));
  CHECK(strcmp(spec_of(back), first) == 0);
  tether_resource_release(back);
  tether_resource_release(r);
  remove(path);
  /* a path that is not UTF-8 cannot be named by a spec (text in every frontend): refused */
  snprintf(path, sizeof path, "%s/bad\xff.log", dir && *dir ? dir : "/tmp");
  REQUIRE_OK(tether_logging_adaptor_create(host, &o, &r));
  size_t n = 0;
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_spec(r, NULL, 0, &n), "UTF-8");
  tether_resource_release(r);
  remove(path);
  tether_resource_release(host);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_create_from_spec("pool(host, initial_size='1''", &r),
              "unterminated quote");
}

static tether_status_t no_alloc(void* user, size_t size, size_t alignment, tether_stream_t stream, void** out) {
  (void)user, (void)size, (void)alignment, (void)stream, (void)out;
  return TETHER_ERROR_OUT_OF_MEMORY;
}
static tether_status_t no_free(void* user, void* p, size_t size, size_t alignment, tether_stream_t stream) {
  (void)user, (void)p, (void)size, (void)alignment, (void)stream;
  return TETHER_OK;
}

/* What no spec can name says so (NOT_SUPPORTED), and one depth limit holds for writing and parsing. */
static void specs_refuse_what_they_cannot_name(void) {
  tether_callback_vtable_t v = TETHER_CALLBACK_VTABLE_INIT;
  v.allocate = no_alloc;
  v.deallocate = no_free;
  tether_resource_t *cb, *binning, *top;
  REQUIRE_OK(tether_callback_resource_create(&v, NULL, NULL, &cb));
  size_t n = 0;
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_spec(cb, NULL, 0, &n), "callback");
  tether_binning_options_t o = TETHER_BINNING_OPTIONS_INIT;
  o.fallback = cb;
  REQUIRE_OK(tether_binning_resource_create(cb, &o, &binning));
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_spec(binning, NULL, 0, &n), "callback");
  tether_resource_release(binning);
  tether_resource_release(cb);
  /* 16 adaptors over host are written and parse back; a 17th is refused both ways */
  REQUIRE_OK(tether_host_resource_create(&top));
  for (int i = 0; i < 17; ++i) {
    tether_resource_t* next = NULL;
    REQUIRE_OK(tether_statistics_adaptor_create(top, &next));
    tether_resource_release(top);
    top = next;
    char spec[1024];
    if (i < 16) {
      CHECK_OK(tether_resource_get_spec(top, spec, sizeof spec, &n));
      tether_resource_t* back = NULL;
      CHECK_OK(tether_resource_create_from_spec(spec, &back));
      tether_resource_release(back);
    } else {
      CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_spec(top, spec, sizeof spec, &n), "16 deep");
    }
  }
  tether_resource_release(top);
}

/* A blank variable counts as unset; a huge one is quoted, not echoed whole. */
static void environment_blank_and_huge(void) {
  tether_resource_t *r = NULL, *prev = NULL;
  setenv("TETHER_RESOURCE_HOST", " \t ", 1);
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  tether_resource_release(prev);
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &r));
  CHECK(r != NULL && strcmp(tether_resource_get_name(r), "host") == 0);
  tether_resource_release(r);
  char* huge = malloc(120001);
  REQUIRE(huge != NULL);
  memset(huge, 'x', 120000);
  huge[120000] = '\0';
  setenv("TETHER_RESOURCE_HOST", huge, 1);
  free(huge);
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  tether_resource_release(prev);
  r = NULL;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_get(TETHER_DEVICE_HOST, &r), "(120000 bytes)");
  CHECK(strlen(tether_last_error_message()) < 1000);
  unsetenv("TETHER_RESOURCE_HOST");
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  tether_resource_release(prev);
}

/* tether_parse_size: the spec grammar of sizes for any caller (Python's parse_size reads strings through it). */
static void parse_size_reads_what_specs_read(void) {
  const struct { const char* text; size_t expected; } good[] = {
      {"4096", 4096}, {"0", 0}, {"64 MiB", (size_t)64 << 20}, {"1.5GiB", (size_t)3 << 29}, {"100 MB", 100000000},
      {"2kB", 2000}, {"  7 mib \t\n", (size_t)7 << 20}, {".5 KiB", 512}, {"1 PiB", (size_t)1 << 50},
      {"18446744073709551615", SIZE_MAX},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; ++i) {
    size_t out = 1234;
    CHECK_OK(tether_parse_size(good[i].text, TETHER_DEVICE_HOST, &out));
    CHECK(out == good[i].expected);
  }
  const struct { const char* text; const char* needle; } bad[] = {
      {"", "cannot read ''"}, {"MiB", "cannot read 'MiB'"}, {"-1", "cannot read '-1'"},
      {"64 MiBs", "unknown unit 'MiBs' in '64 MiBs'"}, {"1e3", "unknown unit 'e3'"}, {"1 2 MiB", "unknown unit"},
      {"1.3 B", "not a whole number of bytes"}, {"18446744073709551616", "does not fit in 64 bits"},
      {"20000000 TiB", "does not fit in 64 bits"}, {"80%", "share of a device's memory"},
      {"12\xc2\xa0MiB", "unknown unit"},
      {"1                                                                 KiB", "too long to be a size"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    size_t out = 1234;
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_parse_size(bad[i].text, TETHER_DEVICE_HOST, &out), bad[i].needle);
    CHECK(out == 0);
  }
  size_t out = 0;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_parse_size(NULL, TETHER_DEVICE_HOST, &out), "text");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_parse_size("1", TETHER_DEVICE_HOST, NULL), "out");
  /* The device matters to a percentage only. */
  CHECK_OK(tether_parse_size("1 KiB", 12345, &out));
  CHECK(out == 1024);
  if (!tt_have_gpu()) {
    const tether_status_t s = tether_parse_size("50%", TETHER_DEVICE_CURRENT, &out);
    CHECK(s == TETHER_ERROR_NO_DEVICE);
    CHECK(out == 0);
    return;
  }
  size_t free_bytes = 0, total = 0;
  REQUIRE_OK(tether_cuda_get_memory_info(0, &free_bytes, &total));
  CHECK_OK(tether_parse_size("50%", 0, &out));
  CHECK(out == total / 2);
  CHECK_OK(tether_parse_size("12.5 %", TETHER_DEVICE_CURRENT, &out));
  CHECK(out == total / 8);
  CHECK_OK(tether_parse_size("100%", 0, &out));
  CHECK(out == total);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_parse_size("100.5%", 0, &out), "more than 100%");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_parse_size("1%", 1 << 20, &out), "device");
}

int main(void) {
  RUN(builds_a_host_stack);
  RUN(round_trips);
  RUN(resources_made_in_c_describe_themselves);
  RUN(errors_name_position_and_token);
  RUN(parse_size_reads_what_specs_read);
  RUN(cuda_specs);
  RUN(host_default_from_environment);
  RUN(binning_bins_round_trip);
  RUN(paths_are_quoted);
  RUN(specs_refuse_what_they_cannot_name);
  RUN(environment_blank_and_huge);
  return tt_finish("test_spec");
}
