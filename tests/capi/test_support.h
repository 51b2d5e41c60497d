/*
 * test_support.h - tiny assertion macros for the C11 ABI tests.
 *
 * Every failed check prints file:line, what was expected, the status name and
 * the thread's tether_last_error_message(), counts the failure, and carries on
 * (so one run shows every broken contract). REQUIRE_* stops the program: used
 * where later checks would only cascade. The failure counter is atomic because
 * the thread tests check from many threads at once.
 */
#ifndef TETHER_TEST_SUPPORT_H
#define TETHER_TEST_SUPPORT_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether/tether.h"

static atomic_int tt_failures;
static atomic_int tt_checks;

static inline void tt_report(const char* file, int line, const char* what) {
  const char* msg = tether_last_error_message();
  fprintf(stderr, "%s:%d: FAILED: %s\n    last error: \"%s\"\n", file, line, what, msg ? msg : "(NULL!)");
  atomic_fetch_add(&tt_failures, 1);
}

/* A condition. */
#define CHECK(cond)                                                 \
  do {                                                              \
    atomic_fetch_add(&tt_checks, 1);                                \
    if (!(cond)) tt_report(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)

static inline int tt_status(const char* file, int line, const char* call, tether_status_t got,
                            tether_status_t expected) {
  char what[512];
  atomic_fetch_add(&tt_checks, 1);
  if (got == expected) return 1;
  snprintf(what, sizeof what, "%s returned %s (%d), expected %s", call, tether_status_name(got), (int)got,
           tether_status_name(expected));
  tt_report(file, line, what);
  return 0;
}

/* `call` returns exactly `expected`. */
#define CHECK_STATUS(expected, call) ((void)tt_status(__FILE__, __LINE__, #call, (call), (expected)))
/* `call` returns TETHER_OK. */
#define CHECK_OK(call) CHECK_STATUS(TETHER_OK, call)

/*
 * `call` fails with `expected`, and the thread's message is non-empty and
 * contains `needle` (the function's name, a word naming the problem...).
 */
#define CHECK_ERROR(expected, call, needle)                                         \
  do {                                                                            \
    tether_clear_last_error();                                                    \
    if (tt_status(__FILE__, __LINE__, #call, (call), (expected))) {               \
      const char* tt_msg = tether_last_error_message();                           \
      CHECK(tt_msg != NULL && tt_msg[0] != '\0');                                 \
      if (tt_msg != NULL && strstr(tt_msg, (needle)) == NULL) {                   \
        char tt_what[256];                                                        \
        snprintf(tt_what, sizeof tt_what, "message of %s lacks \"%s\"", #call, (needle)); \
        tt_report(__FILE__, __LINE__, tt_what);                                   \
      }                                                                           \
    }                                                                             \
  } while (0)

/* Stop the program unless `call` returns TETHER_OK. */
#define REQUIRE_OK(call)                                                 \
  do {                                                                   \
    if (!tt_status(__FILE__, __LINE__, #call, (call), TETHER_OK)) {      \
      fprintf(stderr, "%s:%d: cannot continue\n", __FILE__, __LINE__);   \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

/* Stop the program unless `cond` holds. */
#define REQUIRE(cond)                                                    \
  do {                                                                   \
    atomic_fetch_add(&tt_checks, 1);                                     \
    if (!(cond)) {                                                       \
      tt_report(__FILE__, __LINE__, "REQUIRE(" #cond ")");               \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

/* A live-handle census check: the count of `type` equals `expected`. */
#define CHECK_LIVE(type, expected)                                                            \
  do {                                                                                        \
    size_t tt_live = tether_debug_live_objects(type);                                         \
    size_t tt_expected = (expected);                                                          \
    atomic_fetch_add(&tt_checks, 1);                                                          \
    if (tt_live != tt_expected) {                                                             \
      char tt_what[160];                                                                      \
      snprintf(tt_what, sizeof tt_what, "live objects (%s) = %zu, expected %zu", #type, tt_live, \
               tt_expected);                                                                  \
      tt_report(__FILE__, __LINE__, tt_what);                                                 \
    }                                                                                         \
  } while (0)

/* True if `h` is a live resource handle (probed with retain + release). */
static inline int tt_resource_alive(tether_resource_t* h) {
  if (tether_resource_retain(h) != TETHER_OK) return 0;
  return tether_resource_release(h) == TETHER_OK;
}

/* True if `h` is a live buffer handle. */
static inline int tt_buffer_alive(tether_buffer_t* h) {
  if (tether_buffer_retain(h) != TETHER_OK) return 0;
  return tether_buffer_release(h) == TETHER_OK;
}

/* Make sure the host slot's default exists, so the census baseline includes it. */
static inline size_t tt_baseline(void) {
  tether_resource_t* r = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) == TETHER_OK) tether_resource_release(r);
  return tether_debug_live_objects(TETHER_OBJECT_ANY);
}

/* 1 if a CUDA device can be used (GPU-only expectations are skipped otherwise). */
static inline int tt_have_gpu(void) {
  int n = 0;
  return tether_cuda_get_device_count(&n) == TETHER_OK && n > 0;
}

/* Run one test function, naming it. */
#define RUN(test)                                       \
  do {                                                  \
    int tt_before = atomic_load(&tt_failures);          \
    test();                                             \
    printf("%-48s %s\n", #test, atomic_load(&tt_failures) == tt_before ? "ok" : "FAILED"); \
    fflush(stdout);                                     \
  } while (0)

/* main's return value: prints a summary. */
static inline int tt_finish(const char* program) {
  int failures = atomic_load(&tt_failures);
  printf("%s: %d checks, %d failed\n", program, atomic_load(&tt_checks), failures);
  return failures == 0 ? 0 : 1;
}

#endif /* TETHER_TEST_SUPPORT_H */
