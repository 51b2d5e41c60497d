/*
 * CUDA IPC through the C ABI, the parts that need no GPU (tests/gpu/test_gpu_ipc.c
 * has the rest): argument checks naming the argument, foreign or damaged handle
 * bytes refused before any driver call, host memory NOT_SUPPORTED with the reason,
 * and, without a driver, NO_DEVICE for device memory and for a well-formed handle.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_support.h"

#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

/* A well-formed version-1 handle (the layout of core/src/ipc.cpp): what the tests
 * damage one field at a time. The driver handle inside is zeros. */
static void put(unsigned char* p, unsigned long long v, int n) {
  int i;
  for (i = 0; i < n; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static tether_ipc_handle_t well_formed(void) {
  tether_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.data, "TETHRIPC", 8);
  put(h.data + 8, 1, 2);       /* version */
  put(h.data + 10, 1, 2);      /* kind: cuIpcGetMemHandle */
  put(h.data + 16, 1, 4);      /* exporter pid */
  put(h.data + 40, 256, 8);    /* offset */
  put(h.data + 48, 4096, 8);   /* size */
  put(h.data + 56, 1 << 20, 8); /* allocation */
  return h;
}

/* A well-formed kind-2 handle: memory of a pool shared through a POSIX fd. */
static tether_ipc_handle_t well_formed_pool(void) {
  tether_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.data, "TETHRIPC", 8);
  put(h.data + 8, 1, 2);        /* version */
  put(h.data + 10, 2, 2);       /* kind: cuMemPoolExportPointer */
  put(h.data + 16, 4242, 4);    /* exporter pid */
  put(h.data + 20, 17, 4);      /* exporter's fd of the pool */
  put(h.data + 40, 0, 8);       /* offset */
  put(h.data + 48, 4096, 8);    /* size */
  put(h.data + 56, 0x1234567890ULL, 8); /* pool id */
  return h;
}

static void handle_is_plain_bytes(void) {
  CHECK(sizeof(tether_ipc_handle_t) == TETHER_IPC_HANDLE_SIZE);
  CHECK(TETHER_IPC_HANDLE_SIZE == 192);
}

static void export_checks_its_arguments(void) {
  tether_resource_t* host = NULL;
  tether_buffer_t* b = NULL;
  tether_ipc_handle_t h;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_buffer_create(host, 0, 4096, 0, &b));
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_export_ipc(NULL, 0, &h), "NULL");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_export_ipc(b, 0, NULL), "out");
  tether_buffer_release(b);
  /* a released (stale) buffer */
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_export_ipc(b, 0, &h), "not a live buffer");
  tether_resource_release(host);
}

static void host_memory_is_not_supported(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  tether_buffer_t *b = NULL, *p = NULL;
  tether_ipc_handle_t h, before;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_pool_resource_create(host, NULL, &pool));
  REQUIRE_OK(tether_buffer_create(host, 0, 4096, 0, &b));
  REQUIRE_OK(tether_buffer_create(pool, 0, 4096, 0, &p));
  memset(&h, 0xab, sizeof h);
  before = h;
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(b, 0, &h), "host memory");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(b, 0, &h), "device memory only");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(p, 12345, &h), "host memory");
  CHECK(memcmp(&h, &before, sizeof h) == 0); /* *out untouched on failure */
  /* a refused export does not count as an export: resize still works */
  CHECK_OK(tether_buffer_resize(b, 8192));
  tether_buffer_release(b);
  tether_buffer_release(p);
  tether_resource_release(pool);
  tether_resource_release(host);
}

static void import_checks_its_arguments(void) {
  tether_ipc_handle_t h = well_formed();
  tether_buffer_t* out = (tether_buffer_t*)&h; /* must be cleared on failure */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(NULL, TETHER_DEVICE_CURRENT, &out), "handle");
  CHECK(out == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, TETHER_DEVICE_CURRENT, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, TETHER_DEVICE_HOST, &out), "device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, -7, &out), "device");
  CHECK(out == NULL);
}

static void foreign_bytes_are_refused(void) {
  tether_ipc_handle_t h;
  tether_buffer_t* out = NULL;
  int i;
  memset(&h, 0, sizeof h);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "handle is not a tether IPC handle");
  srand(24);
  for (i = 0; i < (int)sizeof h.data; ++i) h.data[i] = (unsigned char)rand();
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "magic");

  h = well_formed();
  put(h.data + 8, 2, 2);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "version 2");
  h = well_formed();
  put(h.data + 10, 9, 2);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "kind 9");
  h = well_formed();
  put(h.data + 12, 6, 4);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "flags");
  h = well_formed();
  put(h.data + 20, 1, 4);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "reserved");
  h = well_formed();
  put(h.data + 48, 0, 8); /* size 0 */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed();
  put(h.data + 40, (1 << 20) - 100, 8); /* offset + size past the allocation */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed();
  put(h.data + 40, ~0ULL, 8); /* no overflow in the check */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed();
  h.data[150] = 1; /* event bytes without the event flag */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "event");
  CHECK(out == NULL);
}

static void pool_handles_are_checked(void) {
  tether_ipc_handle_t h;
  tether_buffer_t* out = NULL;
  int pid = 0, fd = 0;
  h = well_formed_pool();
  CHECK_OK(tether_ipc_handle_get_exporter(&h, &pid, &fd));
  CHECK(pid == 4242 && fd == 17);
  CHECK_OK(tether_ipc_handle_get_exporter(&h, NULL, NULL));
  h = well_formed();
  CHECK_OK(tether_ipc_handle_get_exporter(&h, &pid, &fd));
  CHECK(pid == 1 && fd == -1); /* cuMemAlloc memory needs no descriptor */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_handle_get_exporter(NULL, &pid, &fd), "handle");
  memset(&h, 0, sizeof h);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_handle_get_exporter(&h, &pid, &fd), "handle is not a tether IPC handle");

  h = well_formed_pool();
  put(h.data + 56, 0, 8); /* no pool id */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed_pool();
  put(h.data + 16, 0, 4); /* no pid */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed_pool();
  put(h.data + 20, 0x80000000u, 4); /* an impossible fd */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc_fd(&h, -1, 0, &out), "inconsistent");
  h = well_formed_pool();
  put(h.data + 48, 0, 8); /* size 0 */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed_pool();
  put(h.data + 40, ~0ULL - 10, 8); /* offset + size overflows */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "inconsistent");
  h = well_formed_pool();
  h.data[130] = 1;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc(&h, 0, &out), "event");
  CHECK(out == NULL);
}

static void import_fd_checks_its_arguments(void) {
  tether_ipc_handle_t h = well_formed_pool();
  tether_buffer_t* out = (tether_buffer_t*)&h;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc_fd(NULL, 3, 0, &out), "handle");
  CHECK(out == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc_fd(&h, 3, 0, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc_fd(&h, -2, 0, &out), "fd");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc_fd(&h, 3, TETHER_DEVICE_HOST, &out), "device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_import_ipc_fd(&h, 3, -9, &out), "device");
  CHECK(out == NULL);
}

/* pidfd_getfd: taking a descriptor from this process, from a child, and the
 * errors a caller falls back on (to sending the descriptor over a socket). */
static void process_fd_takes_descriptors(void) {
  int p[2], c[2], got = -1, status = 0, r;
  char text[8] = {0};
  pid_t child;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_get_process_fd(getpid(), 0, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_get_process_fd(0, 0, &got), "pid");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_get_process_fd(getpid(), -1, &got), "fd");
  REQUIRE(pipe(p) == 0);
  r = tether_ipc_get_process_fd(getpid(), p[1], &got);
  if (r == TETHER_ERROR_NOT_SUPPORTED) {
    printf("  (skipped: %s)\n", tether_last_error_message());
    close(p[0]);
    close(p[1]);
    return;
  }
  CHECK_OK(r);
  CHECK(got >= 0 && got != p[1]);
  CHECK(write(got, "tether", 6) == 6); /* the new descriptor writes into the same pipe */
  CHECK(read(p[0], text, 6) == 6 && memcmp(text, "tether", 6) == 0);
  close(got);
  /* no such descriptor there */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_get_process_fd(getpid(), 100000, &got), "fd");

  /* a child's descriptor (a parent may ptrace its child even under Yama's ptrace_scope 1) */
  REQUIRE(pipe(c) == 0);
  child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char ch;
    int q[2];
    if (pipe(q) != 0) _exit(2);
    /* tell the parent the number, then wait until it closes its end */
    if (write(q[1], "child!", 6) != 6) _exit(2);
    close(c[0]);
    close(p[1]);
    if (write(c[1], &q[0], sizeof q[0]) != (ssize_t)sizeof q[0]) _exit(2);
    while (read(p[0], &ch, 1) > 0) {
    }
    _exit(0);
  } else {
    int number = -1;
    close(c[1]);
    CHECK(read(c[0], &number, sizeof number) == (ssize_t)sizeof number);
    close(c[0]);
    r = tether_ipc_get_process_fd(child, number, &got);
    if (r == TETHER_OK) {
      memset(text, 0, sizeof text);
      CHECK(read(got, text, 6) == 6 && memcmp(text, "child!", 6) == 0);
      close(got);
    } else {
      CHECK_STATUS(TETHER_ERROR_NOT_SUPPORTED, r); /* a sandbox may refuse even that */
      CHECK(strstr(tether_last_error_message(), "socket") != NULL);
    }
    close(p[1]); /* the child's read sees end of file */
    close(p[0]);
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the child is gone (reaped): no such process */
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_ipc_get_process_fd(child, 0, &got), "pid");
  }
}

/* Without a driver: a well-formed handle gets as far as the driver, which is missing. */
static void without_a_driver_no_device(void) {
  tether_ipc_handle_t h = well_formed();
  tether_buffer_t* out = NULL;
  if (tt_have_gpu()) {
    printf("  (skipped: a CUDA device is present)\n");
    return;
  }
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_buffer_import_ipc(&h, TETHER_DEVICE_CURRENT, &out));
  CHECK(strlen(tether_last_error_message()) > 0);
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_buffer_import_ipc(&h, 0, &out));
  CHECK(out == NULL);
  h = well_formed_pool(); /* the driver is asked before any descriptor is looked for */
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_buffer_import_ipc(&h, TETHER_DEVICE_CURRENT, &out));
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_buffer_import_ipc_fd(&h, 0, 0, &out));
  CHECK(out == NULL);
}

int main(void) {
  size_t baseline = tt_baseline();
  RUN(handle_is_plain_bytes);
  RUN(export_checks_its_arguments);
  RUN(host_memory_is_not_supported);
  RUN(import_checks_its_arguments);
  RUN(foreign_bytes_are_refused);
  RUN(pool_handles_are_checked);
  RUN(import_fd_checks_its_arguments);
  RUN(process_fd_takes_descriptors);
  RUN(without_a_driver_no_device);
  CHECK_LIVE(TETHER_OBJECT_ANY, baseline);
  return tt_finish("test_ipc");
}
