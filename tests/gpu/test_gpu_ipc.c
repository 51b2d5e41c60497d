/*
 * test_gpu_ipc.c - CUDA IPC between two processes through the C ABI (label gpu).
 * The parent exports buffers of a pool over a cuda resource; a child (this
 * program again, posix_spawn'ed with the handle in hex on its command line)
 * imports them, checks their bytes, writes new ones and releases. Also: what
 * cannot be shared (managed, pinned host, async without posix_fd) is NOT_SUPPORTED, an exported
 * buffer refuses resize, and importing into the exporting process is a CUDA
 * error naming the reason; the round trip again from an async pool with
 * ipc_handle_type posix_fd. Exits 77 (skipped) when no device is usable.
 */
#define _POSIX_C_SOURCE 200809L
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

extern char** environ;

#define N_BUFFERS 8
#define SIZE ((size_t)1 << 20)

static void to_hex(const tether_ipc_handle_t* h, char* out) {
  static const char digits[] = "0123456789abcdef";
  size_t i;
  for (i = 0; i < sizeof h->data; ++i) {
    out[2 * i] = digits[h->data[i] >> 4];
    out[2 * i + 1] = digits[h->data[i] & 15];
  }
  out[2 * sizeof h->data] = '\0';
}

static int from_hex(const char* s, tether_ipc_handle_t* h) {
  size_t i;
  if (strlen(s) != 2 * sizeof h->data) return 0;
  for (i = 0; i < sizeof h->data; ++i) {
    unsigned v = 0;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return 0;
    h->data[i] = (unsigned char)v;
  }
  return 1;
}

/* The child: argv = [self, "child", hex...]: each buffer holds bytes (i + k) % 251 for
 * buffer k; it writes back 255 - that. */
static int child(int argc, char** argv) {
  int k;
  unsigned char* host = malloc(SIZE);
  REQUIRE(host != NULL);
  for (k = 2; k < argc; ++k) {
    tether_ipc_handle_t h;
    tether_buffer_t* b = NULL;
    size_t size = 0, i;
    int ok = 1;
    int st, pid = 0, fd = -1;
    REQUIRE(from_hex(argv[k], &h));
    st = tether_buffer_import_ipc(&h, TETHER_DEVICE_CURRENT, &b);
    if (st == TETHER_ERROR_NOT_SUPPORTED) {
      /* posix_fd pool memory where pidfd_getfd is refused: the descriptor number, inherited
       * through posix_spawn unless the driver made it close-on-exec */
      REQUIRE_OK(tether_ipc_handle_get_exporter(&h, &pid, &fd));
      st = tether_buffer_import_ipc_fd(&h, fd, TETHER_DEVICE_CURRENT, &b);
    }
    REQUIRE_OK(st);
    CHECK_OK(tether_buffer_get_size(b, &size));
    CHECK(size == SIZE);
    CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_resize(b, 2 * SIZE), "resize");
    CHECK_OK(tether_buffer_copy_to_host(b, 0, host, SIZE));
    for (i = 0; i < SIZE; ++i) ok &= host[i] == (unsigned char)((i + (size_t)k) % 251);
    CHECK(ok);
    for (i = 0; i < SIZE; ++i) host[i] = (unsigned char)(255 - host[i]);
    CHECK_OK(tether_buffer_copy_from_host(b, 0, host, SIZE));
    /* Re-export of imported memory is refused. */
    CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(b, 0, &h), "imported");
    CHECK_OK(tether_buffer_release(b));
  }
  free(host);
  return tt_finish("test_gpu_ipc (child)");
}

static const char* g_self;

static void round_trip(int fd_pool) {
  const char* self = g_self;
  tether_resource_t *cuda = NULL, *pool = NULL;
  tether_buffer_t* b[N_BUFFERS];
  char* args[N_BUFFERS + 3];
  static char hex[N_BUFFERS][2 * TETHER_IPC_HANDLE_SIZE + 1];
  unsigned char* host = malloc(SIZE);
  pid_t pid;
  int status = 0, k;
  size_t i;
  REQUIRE(host != NULL);
  if (fd_pool) {
    tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
    o.ipc_handle_type = TETHER_IPC_HANDLE_POSIX_FD;
    if (tether_async_resource_create(0, &o, &pool) == TETHER_ERROR_NOT_SUPPORTED) {
      printf("  (skipped: %s)\n", tether_last_error_message());
      free(host);
      return;
    }
  } else {
    REQUIRE_OK(tether_cuda_resource_create(0, &cuda));
    REQUIRE_OK(tether_pool_resource_create(cuda, NULL, &pool));
  }
  args[0] = (char*)self;
  args[1] = "child";
  for (k = 0; k < N_BUFFERS; ++k) {
    tether_ipc_handle_t h;
    tether_buffer_t* again = NULL;
    REQUIRE_OK(tether_buffer_create(pool, 0, SIZE, 0, &b[k]));
    for (i = 0; i < SIZE; ++i) host[i] = (unsigned char)((i + (size_t)k + 2) % 251);
    CHECK_OK(tether_buffer_copy_from_host(b[k], 0, host, SIZE));
    REQUIRE_OK(tether_buffer_export_ipc(b[k], 0, &h));
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_resize(b[k], 2 * SIZE), "exported");
    if (!fd_pool) CHECK_ERROR(TETHER_ERROR_CUDA, tether_buffer_import_ipc(&h, 0, &again), "this very process");
    if (fd_pool) {
      int pid = 0, fd = -1;
      CHECK_OK(tether_ipc_handle_get_exporter(&h, &pid, &fd));
      CHECK(pid == (int)getpid() && fd >= 0);
    }
    to_hex(&h, hex[k]);
    args[k + 2] = hex[k];
  }
  args[N_BUFFERS + 2] = NULL;
  REQUIRE(posix_spawn(&pid, self, NULL, NULL, args, environ) == 0);
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (k = 0; k < N_BUFFERS; ++k) {
    int ok = 1;
    CHECK_OK(tether_buffer_copy_to_host(b[k], 0, host, SIZE));
    for (i = 0; i < SIZE; ++i) ok &= host[i] == (unsigned char)(255 - (i + (size_t)k + 2) % 251);
    CHECK(ok);
    tether_buffer_release(b[k]);
  }
  tether_resource_release(pool);
  tether_resource_release(cuda);
  free(host);
}

static void round_trip_through_a_child(void) { round_trip(0); }
/* posix_fd async pool: eight buffers of one pool; the child takes the pool descriptor with
 * pidfd_getfd (it is a descendant) or, where refused, by its inherited number */
static void posix_fd_round_trip_through_a_child(void) { round_trip(1); }

static void export_with_an_event(void) {
  tether_resource_t* cuda = NULL;
  tether_buffer_t* b = NULL;
  tether_ipc_handle_t h;
  REQUIRE_OK(tether_cuda_resource_create(0, &cuda));
  REQUIRE_OK(tether_buffer_create(cuda, 0, 4096, 0, &b));
  /* The legacy default stream is a stream too; a nonzero value means "record an event". */
  CHECK_OK(tether_buffer_export_ipc(b, (tether_stream_t)1 /* CU_STREAM_LEGACY */, &h));
  CHECK(h.data[12] == 1); /* the event flag */
  CHECK_OK(tether_buffer_export_ipc(b, 0, &h));
  CHECK(h.data[12] == 0);
  tether_buffer_release(b);
  tether_resource_release(cuda);
}

static void what_cannot_be_shared(void) {
  tether_resource_t* r = NULL;
  tether_buffer_t* b = NULL;
  tether_ipc_handle_t h;
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  REQUIRE_OK(tether_managed_resource_create(0, &r));
  REQUIRE_OK(tether_buffer_create(r, 0, 4096, 0, &b));
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(b, 0, &h), "managed memory");
  tether_buffer_release(b);
  tether_resource_release(r);
  REQUIRE_OK(tether_pinned_host_resource_create(0, &r));
  REQUIRE_OK(tether_buffer_create(r, 0, 4096, 0, &b));
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(b, 0, &h), "pinned host memory");
  tether_buffer_release(b);
  tether_resource_release(r);
  REQUIRE_OK(tether_async_resource_create(0, &o, &r));
  REQUIRE_OK(tether_buffer_create(r, 0, 4096, 0, &b));
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_buffer_export_ipc(b, 0, &h), "posix_fd");
  tether_buffer_release(b);
  tether_resource_release(r);
  REQUIRE_OK(tether_cuda_resource_create(0, &r));
  REQUIRE_OK(tether_buffer_create(r, 0, 0, 0, &b));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_export_ipc(b, 0, &h), "0 bytes");
  tether_buffer_release(b);
  tether_resource_release(r);
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "child") == 0) return child(argc, argv);
  if (!tt_have_gpu()) {
    printf("test_gpu_ipc: skipped (no CUDA device)\n");
    return 77;
  }
  RUN(what_cannot_be_shared);
  RUN(export_with_an_event);
  g_self = argv[0];
  RUN(round_trip_through_a_child);
  RUN(posix_fd_round_trip_through_a_child);
  return tt_finish("test_gpu_ipc");
}
