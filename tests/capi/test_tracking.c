/* The tracking adaptor through the C ABI: outstanding records (count query,
 * stride), the report and stack text (needed-size rule), refused frees. */
#include "test_support.h"

static tether_resource_t* tracking(tether_resource_t* up, int stacks) {
  tether_tracking_options_t o;
  tether_resource_t* r = NULL;
  REQUIRE_OK(tether_tracking_options_init(&o, sizeof o));
  CHECK(o.capture_stacks == 0);
  o.capture_stacks = stacks;
  REQUIRE_OK(tether_tracking_adaptor_create(up, &o, &r));
  return r;
}

static void records_and_count_query(void) {
  tether_resource_t *host = NULL, *tr;
  tether_tracking_record_t recs[4];
  void *a = NULL, *b = NULL, *c = NULL;
  size_t n = 99;
  REQUIRE_OK(tether_host_resource_create(&host));
  tr = tracking(host, 0);
  CHECK(strcmp(tether_resource_get_name(tr), "tracking") == 0);
  CHECK_OK(tether_tracking_adaptor_get_outstanding(tr, NULL, 0, &n));
  CHECK(n == 0);
  REQUIRE_OK(tether_resource_allocate(tr, 100, 0, 5, &a));
  REQUIRE_OK(tether_resource_allocate(tr, 200, 1024, 0, &b));
  REQUIRE_OK(tether_resource_allocate(tr, 300, 0, 0, &c));
  CHECK_OK(tether_tracking_adaptor_get_outstanding(tr, NULL, 0, &n));
  CHECK(n == 3);
  /* A smaller array gets the oldest ones and the full count. */
  recs[0].struct_size = sizeof recs[0];
  CHECK_OK(tether_tracking_adaptor_get_outstanding(tr, recs, 2, &n));
  CHECK(n == 3);
  CHECK(recs[0].ptr == a && recs[0].size == 100 && recs[0].alignment == 256 && recs[0].stream == 5);
  CHECK(recs[0].thread_id != 0 && recs[0].stack_depth == 0);
  CHECK(recs[1].ptr == b && recs[1].size == 200 && recs[1].alignment == 1024);
  CHECK(recs[1].struct_size == sizeof recs[0] && recs[0].sequence < recs[1].sequence);
  CHECK_OK(tether_resource_deallocate(tr, b, 200, 1024, 0));
  CHECK_OK(tether_tracking_adaptor_get_outstanding(tr, recs, 4, &n));
  CHECK(n == 2 && recs[0].ptr == a && recs[1].ptr == c);
  /* Arguments. */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_tracking_adaptor_get_outstanding(tr, NULL, 1, &n), "records");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_tracking_adaptor_get_outstanding(tr, recs, 4, NULL), "out_count");
  recs[0].struct_size = 8;
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_tracking_adaptor_get_outstanding(tr, recs, 4, &n), "struct_size");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_tracking_adaptor_get_outstanding(host, NULL, 0, &n), "not a tracking");
  CHECK_OK(tether_resource_deallocate(tr, a, 100, 0, 5));
  CHECK_OK(tether_resource_deallocate(tr, c, 300, 0, 0));
  tether_resource_release(tr);
  tether_resource_release(host);
}

static void report_with_needed_size(void) {
  tether_resource_t *host = NULL, *tr;
  void* a = NULL;
  char small[16], *big;
  size_t needed = 0, again = 0;
  REQUIRE_OK(tether_host_resource_create(&host));
  tr = tracking(host, 0);
  REQUIRE_OK(tether_resource_allocate(tr, 4096, 0, 0, &a));
  CHECK_OK(tether_tracking_adaptor_report(tr, NULL, 0, &needed));
  CHECK(needed > sizeof small);
  CHECK_OK(tether_tracking_adaptor_report(tr, small, sizeof small, &again));
  CHECK(again == needed && strlen(small) == sizeof small - 1); /* cut short, NUL-terminated */
  big = malloc(needed);
  REQUIRE(big != NULL);
  CHECK_OK(tether_tracking_adaptor_report(tr, big, needed, &again));
  CHECK(strlen(big) + 1 == needed);
  CHECK(strstr(big, "tether tracking adaptor: 1 outstanding allocation, 4096 bytes\n") == big);
  CHECK(strstr(big, "size=4096 alignment=256 stream=0x0 thread=") != NULL);
  free(big);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_tracking_adaptor_report(tr, NULL, 8, &needed), "buffer");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_tracking_adaptor_report(tr, small, 8, NULL), "out_needed");
  CHECK_OK(tether_resource_deallocate(tr, a, 4096, 0, 0));
  CHECK_OK(tether_tracking_adaptor_report(tr, small, sizeof small, &needed));
  tether_resource_release(tr);
  tether_resource_release(host);
}

static void stacks_when_asked(void) {
  tether_resource_t *host = NULL, *tr;
  tether_tracking_record_t rec = TETHER_TRACKING_RECORD_INIT;
  void* a = NULL;
  char text[8192];
  size_t n = 0, needed = 0;
  REQUIRE_OK(tether_host_resource_create(&host));
  tr = tracking(host, 1);
  REQUIRE_OK(tether_resource_allocate(tr, 64, 0, 0, &a));
  CHECK_OK(tether_tracking_adaptor_get_outstanding(tr, &rec, 1, &n));
  CHECK(n == 1 && rec.stack_depth >= 2);
  CHECK_OK(tether_tracking_adaptor_get_stack(tr, a, text, sizeof text, &needed));
  CHECK(strncmp(text, "  #0 ", 5) == 0);
  /* The stack starts at the caller: libtether's own frames are left out. */
  CHECK(strstr(text, "libtether") == NULL);
  CHECK(needed == strlen(text) + 1 || needed > sizeof text);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_tracking_adaptor_get_stack(tr, text, text, sizeof text, &needed),
              "not an outstanding allocation");
  CHECK_OK(tether_resource_deallocate(tr, a, 64, 0, 0));
  tether_resource_release(tr);
  tether_resource_release(host);
}

static void refused_frees_change_nothing(void) {
  tether_resource_t *host = NULL, *tr;
  void *mine = NULL, *direct = NULL;
  size_t n = 0;
  REQUIRE_OK(tether_host_resource_create(&host));
  tr = tracking(host, 0);
  REQUIRE_OK(tether_resource_allocate(tr, 100, 0, 0, &mine));
  REQUIRE_OK(tether_resource_allocate(host, 100, 0, 0, &direct));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(tr, direct, 100, 0, 0), "tracking");
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(tr, mine, 99, 0, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(host, mine, 100, 0, 0));
  CHECK_OK(tether_tracking_adaptor_get_outstanding(tr, NULL, 0, &n));
  CHECK(n == 1);
  CHECK_OK(tether_resource_deallocate(tr, mine, 100, 0, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(tr, mine, 100, 0, 0));
  CHECK_OK(tether_resource_deallocate(host, direct, 100, 0, 0));
  tether_resource_release(tr);
  tether_resource_release(host);
}

int main(void) {
  RUN(records_and_count_query);
  RUN(report_with_needed_size);
  RUN(stacks_when_asked);
  RUN(refused_frees_change_nothing);
  return tt_finish("test_tracking");
}
