/*
 * hello.c - tether from C.
 *
 * Builds a pool over host memory with a statistics adaptor on top, installs
 * it as the process's current host resource, allocates a buffer through the
 * table, prints the counters, and then releases everything in an order that
 * would be a use-after-free with raw pointers: tether's handles keep what
 * they depend on alive, so any order is fine.
 */
#include <stdio.h>
#include <string.h>

#include <tether/tether.h>

/* Print the failing call and the library's message, and leave. */
#define TRY(call)                                                                   \
  do {                                                                              \
    tether_status_t status_ = (call);                                               \
    if (status_ != TETHER_OK) {                                                     \
      fprintf(stderr, "%s failed: %s: %s\n", #call, tether_status_name(status_),    \
              tether_last_error_message());                                         \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

int main(void) {
  tether_resource_t *host = NULL, *pool = NULL, *stats = NULL, *previous = NULL;
  tether_buffer_t* buffer = NULL;
  tether_pool_options_t options;
  tether_statistics_t counters = TETHER_STATISTICS_INIT;
  const char greeting[] = "hello from a tether buffer";
  char back[sizeof greeting];
  size_t live_before;

  printf("tether %s (ABI %u)\n", tether_version_string(), (unsigned)tether_abi_version());
  live_before = tether_debug_live_objects(TETHER_OBJECT_ANY);

  /* host -> pool (1 MiB up front) -> statistics */
  TRY(tether_host_resource_create(&host));
  TRY(tether_pool_options_init(&options, sizeof options));
  options.initial_size = (size_t)1 << 20;
  TRY(tether_pool_resource_create(host, &options, &pool));
  TRY(tether_statistics_adaptor_create(pool, &stats));

  /* Make it the current host resource; keep what was there to put it back. */
  TRY(tether_current_resource_set(TETHER_DEVICE_HOST, stats, &previous));

  /* NULL resource: allocate from the current resource of the host slot. */
  TRY(tether_buffer_create(NULL, TETHER_DEVICE_HOST, sizeof greeting, 0, &buffer));
  TRY(tether_buffer_copy_from_host(buffer, 0, greeting, sizeof greeting));

  TRY(tether_resource_get_statistics(stats, &counters));
  printf("%s: %llu bytes in %llu allocation(s), peak %llu bytes\n", tether_resource_get_name(stats),
         (unsigned long long)counters.current_bytes, (unsigned long long)counters.current_count,
         (unsigned long long)counters.peak_bytes);

  /* Awkward order: the upstreams first, then the table's reference, the
   * adaptor, and only then the buffer that still uses all of them. */
  TRY(tether_resource_release(host));
  TRY(tether_resource_release(pool));
  /* Put back what was current (NULL: the slot was unset) - drops the table's reference. */
  TRY(tether_current_resource_set(TETHER_DEVICE_HOST, previous, NULL));
  TRY(tether_resource_release(previous)); /* NULL is a no-op */
  TRY(tether_resource_release(stats));

  TRY(tether_buffer_copy_to_host(buffer, 0, back, sizeof back));
  printf("buffer says: \"%s\"\n", back);
  TRY(tether_buffer_release(buffer)); /* frees into the pool, then the chain goes away */

  if (strcmp(back, greeting) != 0) {
    fprintf(stderr, "buffer contents changed\n");
    return 1;
  }
  /* Nothing is left: the table went back to its (unset) default too. */
  if (tether_debug_live_objects(TETHER_OBJECT_ANY) != live_before) {
    fprintf(stderr, "handles leaked: %zu live, %zu before\n", tether_debug_live_objects(TETHER_OBJECT_ANY),
            live_before);
    return 1;
  }
  printf("all handles released: %zu live\n", tether_debug_live_objects(TETHER_OBJECT_ANY));
  return 0;
}
