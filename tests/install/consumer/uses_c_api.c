/* The C half of the consumer: the plain C ABI from an installed tether. */
#include <stdio.h>
#include <string.h>

#include <tether/tether.h>

int consumer_c_part(void);

int consumer_c_part(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  tether_buffer_t* buf = NULL;
  const char msg[] = "hello from C";
  char back[sizeof msg];
  if (tether_host_resource_create(&host) != TETHER_OK) return 1;
  if (tether_pool_resource_create(host, NULL, &pool) != TETHER_OK) return 2;
  tether_resource_release(host);
  if (tether_buffer_create(pool, TETHER_DEVICE_HOST, sizeof msg, 0, &buf) != TETHER_OK) return 3;
  tether_resource_release(pool);
  if (tether_buffer_copy_from_host(buf, 0, msg, sizeof msg) != TETHER_OK) return 4;
  if (tether_buffer_copy_to_host(buf, 0, back, sizeof back) != TETHER_OK) return 5;
  tether_buffer_release(buf);
  if (strcmp(back, msg) != 0) return 6;
  printf("C: %s (tether %s)\n", back, tether_version_string());
  return 0;
}
