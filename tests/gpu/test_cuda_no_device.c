/*
 * test_cuda_no_device.c - the CUDA part of the ABI without a usable driver or
 * device: every tether_cuda_* query and CUDA resource constructor returns
 * TETHER_ERROR_NO_DEVICE with a message naming the reason, so does anything
 * that needs a device's current resource, and host resources keep working in
 * the same process. Also: loading libtether loaded no CUDA library.
 *
 * Runs anywhere. Where a driver is present and CUDA_VISIBLE_DEVICES does not
 * hide the devices, it exits 77 (skipped). Registered a second time with
 * CUDA_VISIBLE_DEVICES="" so that GPU machines test "the driver has no devices".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static const char* g_reason;

static int find_cuda(struct dl_phdr_info* info, size_t size, void* found) {
  (void)size;
  if (info->dlpi_name != NULL && (strstr(info->dlpi_name, "libcuda.so") || strstr(info->dlpi_name, "libcudart")))
    *(int*)found = 1;
  return 0;
}

static int cuda_is_mapped(void) {
  int found = 0;
  dl_iterate_phdr(find_cuda, &found);
  return found;
}

static void test_nothing_from_cuda_is_loaded_up_front(void) {
  /* Before any CUDA call the process has no CUDA library mapped: libtether
     does not depend on one (a NEEDED entry would have loaded it already). */
  CHECK(!cuda_is_mapped());
}

static void test_queries_report_the_reason(void) {
  int n = 12345;
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_get_device_count(&n), g_reason);
  CHECK(n == 0);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_get_device_count(&n), "tether_cuda_get_device_count");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_get_driver_version(&n), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_get_current_device(&n), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_stream_synchronize(0, 0), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_stream_synchronize(TETHER_DEVICE_CURRENT, 0), g_reason);
}

static void test_constructors_report_the_reason(void) {
  tether_resource_t* r = (tether_resource_t*)(uintptr_t)1;
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_resource_create(0, &r), g_reason);
  CHECK(r == NULL);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_resource_create(0, &r), "tether_cuda_resource_create");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_async_resource_create(0, NULL, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_async_resource_create(0, &o, &r), g_reason);
  o.use_default_pool = 1;
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_async_resource_create(0, &o, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_managed_resource_create(0, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_pinned_host_resource_create(0, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_system_resource_create(0, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_system_resource_create(0, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_managed_async_resource_create(0, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_managed_async_resource_create(TETHER_DEVICE_CURRENT, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_managed_async_resource_create(0, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_sam_headroom_resource_create(0, NULL, &r), g_reason);
  {
    tether_sam_headroom_options_t h = TETHER_SAM_HEADROOM_OPTIONS_INIT;
    h.headroom = (size_t)1 << 30;
    CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_sam_headroom_resource_create(0, &h, &r), g_reason);
  }
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_sam_headroom_resource_create(0, NULL, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_async_view_resource_create(0, NULL, &r), g_reason);
  {
    tether_async_view_options_t v = TETHER_ASYNC_VIEW_OPTIONS_INIT;
    v.pool = (void*)(uintptr_t)0x7f00dead0000; /* never reaches a driver call without a device */
    CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_async_view_resource_create(0, &v, &r), g_reason);
  }
  CHECK(r == NULL);
  /* The missing device is the problem, whatever id was asked for. */
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_resource_create(5, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_resource_create(TETHER_DEVICE_CURRENT, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_managed_resource_create(TETHER_DEVICE_HOST, &r), g_reason);
  /* Argument errors that need no device still come first. */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_resource_create(0, NULL), "out");
}

static void test_device_slots_report_the_reason(void) {
  tether_resource_t* r = NULL;
  tether_buffer_t* b = NULL;
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_current_resource_get(0, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_current_resource_get(TETHER_DEVICE_CURRENT, &r), g_reason);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_buffer_create(NULL, 0, 64, 0, &b), g_reason);
  CHECK(b == NULL);
}

static void test_async_options_need_no_device(void) {
  tether_async_options_t o;
  memset(&o, 0xff, sizeof o);
  CHECK_OK(tether_async_options_init(&o, sizeof o));
  CHECK(o.struct_size == sizeof o);
  CHECK(o.use_default_pool == 0 && o.initial_pool_size == 0 && o.release_threshold == 0);
  CHECK(o.maximum_pool_size == 0 && o.ipc_handle_type == TETHER_IPC_HANDLE_NONE);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_async_options_init(NULL, sizeof o), "options");
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_async_options_init(&o, 4), "struct_size");
}

static void test_async_view_options_need_no_device(void) {
  tether_async_view_options_t o;
  tether_resource_t* r = NULL;
  memset(&o, 0xff, sizeof o);
  CHECK_OK(tether_async_view_options_init(&o, sizeof o));
  CHECK(o.struct_size == sizeof o && o.pool == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_async_view_options_init(NULL, sizeof o), "options");
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_async_view_options_init(&o, 4), "struct_size");
  o.struct_size = 4;
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_async_view_resource_create(0, &o, &r), "struct_size");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_async_view_resource_create(0, NULL, NULL), "out");
  CHECK(r == NULL);
}

static void test_sam_headroom_options_need_no_device(void) {
  tether_sam_headroom_options_t o;
  tether_resource_t* r = NULL;
  memset(&o, 0xff, sizeof o);
  CHECK_OK(tether_sam_headroom_options_init(&o, sizeof o));
  CHECK(o.struct_size == sizeof o && o.headroom == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_sam_headroom_options_init(NULL, sizeof o), "options");
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_sam_headroom_options_init(&o, 4), "struct_size");
  o.struct_size = 4;
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_sam_headroom_resource_create(0, &o, &r), "struct_size");
  CHECK(r == NULL);
}

/* The conformance entries the registry states (capi/kinds.json): each of a CUDA kind reports the reason. */
static const struct {
  const char* name;
  const char* spec;
  bool gpu;
  bool twins_share_frees;
  size_t capacity;
} kRegistryEntries[] = {
#include "../capi/conformance/registry_factories.inc"
};

static void test_registry_specs_report_the_reason(void) {
  size_t i;
  for (i = 0; i < sizeof kRegistryEntries / sizeof kRegistryEntries[0]; ++i) {
    tether_resource_t* r = NULL;
    if (!kRegistryEntries[i].gpu) continue;
    CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_resource_create_from_spec(kRegistryEntries[i].spec, &r), g_reason);
    CHECK(r == NULL);
  }
}

static void test_host_resources_keep_working(void) {
  tether_resource_t* host = NULL;
  tether_resource_t* pool = NULL;
  tether_buffer_t* b = NULL;
  char in[300], out[300];
  void* p = NULL;
  int i;
  for (i = 0; i < 300; ++i) in[i] = (char)(i * 7);
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_pool_resource_create(host, NULL, &pool));
  CHECK_OK(tether_resource_allocate(pool, 1000, 64, 0, &p));
  CHECK(p != NULL);
  CHECK_OK(tether_resource_deallocate(pool, p, 1000, 64, 0));
  CHECK_OK(tether_buffer_create(pool, TETHER_DEVICE_HOST, sizeof in, 0, &b));
  CHECK_OK(tether_buffer_copy_from_host(b, 0, in, sizeof in));
  CHECK_OK(tether_buffer_copy_to_host(b, 0, out, sizeof out));
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_OK(tether_buffer_resize(b, 10));
  tether_buffer_release(b);
  b = NULL;
  CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 64, 0, &b));
  tether_buffer_release(b);
  tether_resource_release(pool);
  tether_resource_release(host);
}

int main(void) {
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  void* lib;
  RUN(test_nothing_from_cuda_is_loaded_up_front);
  lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    g_reason = "no CUDA driver: libcuda.so.1 could not be loaded (";
  } else if (visible != NULL && visible[0] == '\0') {
    g_reason = "CUDA driver has no devices (cuInit: CUDA_ERROR_NO_DEVICE)";
  } else {
    printf("skipped: a CUDA driver is present and CUDA_VISIBLE_DEVICES does not hide its devices\n");
    return 77;
  }
  RUN(test_queries_report_the_reason);
  RUN(test_constructors_report_the_reason);
  RUN(test_device_slots_report_the_reason);
  RUN(test_async_options_need_no_device);
  RUN(test_async_view_options_need_no_device);
  RUN(test_sam_headroom_options_need_no_device);
  RUN(test_registry_specs_report_the_reason);
  RUN(test_host_resources_keep_working);
  return tt_finish("test_cuda_no_device");
}
