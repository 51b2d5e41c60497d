/*
 * What a tracking adaptor costs: one allocate + free of 256 bytes through the
 * C ABI on one thread, on a host resource directly and through tracking
 * adaptors over it (stack capture off and on). Medians of RUNS runs of PAIRS
 * pairs, all in one process. Prints ns per pair and the difference.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "random_pattern.h" /* bench_now_ns, bench_compare_double */
#include "tether/tether.h"

#define RUNS 15
#define PAIRS 200000

static double median_ns_per_pair(tether_resource_t* r) {
  double t[RUNS];
  int run, i;
  for (run = 0; run < RUNS; ++run) {
    double start = bench_now_ns();
    for (i = 0; i < PAIRS; ++i) {
      void* p = NULL;
      if (tether_resource_allocate(r, 256, 0, 0, &p) != TETHER_OK ||
          tether_resource_deallocate(r, p, 256, 0, 0) != TETHER_OK) {
        fprintf(stderr, "failed: %s\n", tether_last_error_message());
        exit(1);
      }
    }
    t[run] = (bench_now_ns() - start) / PAIRS;
  }
  qsort(t, RUNS, sizeof t[0], bench_compare_double);
  return t[RUNS / 2];
}

int main(void) {
  tether_resource_t *host = NULL, *tr = NULL, *trs = NULL;
  tether_tracking_options_t o = TETHER_TRACKING_OPTIONS_INIT;
  double h, t, s;
  if (tether_host_resource_create(&host) != TETHER_OK) return 1;
  if (tether_tracking_adaptor_create(host, NULL, &tr) != TETHER_OK) return 1;
  o.capture_stacks = 1;
  if (tether_tracking_adaptor_create(host, &o, &trs) != TETHER_OK) return 1;
  (void)median_ns_per_pair(tr); /* warm up */
  h = median_ns_per_pair(host);
  t = median_ns_per_pair(tr);
  s = median_ns_per_pair(trs);
  printf("host              : %6.1f ns per allocate+free\n", h);
  printf("tracking(host)    : %6.1f ns per allocate+free   (+%.1f ns, %.2fx)\n", t, t - h, t / h);
  printf("tracking+stacks   : %6.1f ns per allocate+free   (+%.1f ns)\n", s, s - h);
  tether_resource_release(trs);
  tether_resource_release(tr);
  tether_resource_release(host);
  return 0;
}
