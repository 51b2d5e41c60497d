/*
 * test_logging.c - the logging adaptor's write failures: a log that cannot
 * be written (/dev/full) never loses lines in silence. Every flush reports
 * the failure until one writes again, and the lost lines are counted.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "test_support.h"

static void full_disk_is_reported_until_a_flush_writes(void) {
  tether_resource_t *host, *log;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_logging_options_t o = TETHER_LOGGING_OPTIONS_INIT;
  o.path = "/dev/full";
  REQUIRE_OK(tether_logging_adaptor_create(host, &o, &log));
  for (int i = 0; i < 10000; ++i) {
    void* p = NULL;
    CHECK_OK(tether_resource_allocate(log, 64, 0, 0, &p)); /* logging never fails an allocation */
    CHECK_OK(tether_resource_deallocate(log, p, 64, 0, 0));
  }
  for (int i = 0; i < 3; ++i) /* every flush, not only the first */
    CHECK_ERROR(TETHER_ERROR_INTERNAL, tether_logging_adaptor_flush(log), "lines lost");
  tether_logging_info_t info = TETHER_LOGGING_INFO_INIT;
  CHECK_OK(tether_logging_adaptor_get_info(log, &info));
  CHECK(info.lines == 20001); /* the header and two lines per pair */
  CHECK(info.lost_lines == 20001);
  CHECK(info.error != 0);
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_logging_adaptor_get_info(host, &info), "not a logging adaptor");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_logging_adaptor_get_info(log, NULL), "out");
  tether_resource_release(log);
  tether_resource_release(host);
}

static void a_good_file_loses_nothing(void) {
  char path[] = "/tmp/tether_test_logging_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  tether_resource_t *host, *log;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_logging_options_t o = TETHER_LOGGING_OPTIONS_INIT;
  o.path = path;
  REQUIRE_OK(tether_logging_adaptor_create(host, &o, &log));
  void* p = NULL;
  CHECK_OK(tether_resource_allocate(log, 64, 0, 0, &p));
  CHECK_OK(tether_resource_deallocate(log, p, 64, 0, 0));
  CHECK_OK(tether_logging_adaptor_flush(log));
  tether_logging_info_t info = TETHER_LOGGING_INFO_INIT;
  CHECK_OK(tether_logging_adaptor_get_info(log, &info));
  CHECK(info.lines == 3 && info.lost_lines == 0 && info.error == 0);
  FILE* f = fopen(path, "r");
  REQUIRE(f != NULL);
  int lines = 0, c;
  while ((c = fgetc(f)) != EOF) lines += c == '\n';
  fclose(f);
  CHECK(lines == 3);
  tether_resource_release(log);
  tether_resource_release(host);
  remove(path);
}

int main(void) {
  RUN(full_disk_is_reported_until_a_flush_writes);
  RUN(a_good_file_loses_nothing);
  return tt_finish("test_logging");
}
