// CUDA IPC of device memory (see tether_core/ipc.hpp and tether/ipc.h).
//
// Export: the buffer's properties decide first (host-accessible memory, the
// async resource and re-exports of imported memory are NOT_SUPPORTED without
// asking the driver); then cuMemGetAddressRange finds the driver allocation
// the pointer lies in (a pool's chunk) and cuIpcGetMemHandle shares that
// allocation; the handle carries the pointer's offset in it.
//
// Import: mappings are shared per (device, driver handle) and counted,
// because the driver maps one allocation into a context only once, and the
// buffers of one pool chunk all carry the same driver handle.
//
// Memory of an async resource whose pool was created with a POSIX fd handle
// type (ipc_handle_type posix_fd) travels another way (kind 2): the pool's
// shareable handle is a file descriptor (exported once per pool, kept by the
// resource), the handle bytes carry cuMemPoolExportPointer's export data, the
// exporter's pid and fd number and a random id of the pool. The importer
// imports the pool once per (pool id, device) - from a descriptor the caller
// passes, or one it takes from the exporter with pidfd_getfd - and each
// pointer once per (pool id, device, export data), both counted; the last
// release of a pointer frees it (cuMemFree of the imported pointer), the last
// of a pool destroys the import (cuMemPoolDestroy).
#include "tether_core/ipc.hpp"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tether_core/cuda.hpp"
#include "tether_core/error.hpp"
#include "tether_core/process.hpp"

#if TETHER_HAVE_CUDA_HEADERS
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_driver.hpp"
#endif

namespace tether::core::ipc {
namespace {

// ---- the layout (version 1) -------------------------------------------------
//   0  magic "TETHRIPC"          8 bytes
//   8  version                  u16 (1)
//  10  kind                     u16 (1: cuIpcGetMemHandle of a cuMemAlloc allocation;
//                                    2: cuMemPoolExportPointer of a pool shared by a POSIX fd)
//  12  flags                    u32 (bit 0: an event handle follows)
//  16  exporter pid             u32
//  20  kind 1: reserved (0)     u32
//      kind 2: the exporter's fd number of the pool's shareable handle
//  24  device UUID              16 bytes (cuDeviceGetUuid)
//  40  offset in the allocation u64
//  48  size of the buffer       u64
//  56  kind 1: size of the allocation (cuMemGetAddressRange)   u64
//      kind 2: the pool's id (random, nonzero)                  u64
//  64  kind 1: CUipcMemHandle   64 bytes
//      kind 2: CUmemPoolPtrExportData (of the allocation's base) 64 bytes
// 128  CUipcEventHandle         64 bytes (zero without an event)
// (Kind 2 was added without a version bump: a reader without it refuses the
// bytes as "of unknown kind", which is the right answer.)
constexpr unsigned char kMagic[8] = {'T', 'E', 'T', 'H', 'R', 'I', 'P', 'C'};
constexpr std::uint16_t kVersion = 1;
constexpr std::uint16_t kKindLegacyMemHandle = 1;
constexpr std::uint16_t kKindPoolFd = 2;
constexpr std::uint32_t kFlagEvent = 1;
constexpr std::size_t kUuidAt = 24, kOffsetAt = 40, kSizeAt = 48, kAllocationAt = 56, kPoolIdAt = 56,
                      kMemHandleAt = 64, kExportDataAt = 64, kEventHandleAt = 128, kOpaqueSize = 64;
static_assert(kEventHandleAt + kOpaqueSize == kHandleSize, "the layout fills the handle");

void put16(unsigned char* p, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t get(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct Fields {
  std::uint16_t kind = 0;
  std::uint32_t flags = 0;
  std::uint32_t pid = 0;
  std::uint32_t fd = 0;  // kind 2
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t allocation = 0;  // kind 1
  std::uint64_t pool_id = 0;     // kind 2
};

Fields decode(const unsigned char* b, const char* what) {
  const std::string w(what);
  if (b == nullptr) throw_invalid_argument(w + " must not be NULL");
  if (std::memcmp(b, kMagic, sizeof kMagic) != 0)
    throw_invalid_argument(w + " is not a tether IPC handle (wrong magic number: these bytes were not made by "
                               "tether_buffer_export_ipc, or were damaged on the way)");
  const auto version = static_cast<std::uint16_t>(get(b + 8, 2));
  if (version != kVersion)
    throw_invalid_argument(w + " has layout version " + std::to_string(version) + "; this tether reads version " +
                           std::to_string(kVersion) + " (exporter and importer use different tether versions)");
  Fields f;
  f.kind = static_cast<std::uint16_t>(get(b + 10, 2));
  if (f.kind != kKindLegacyMemHandle && f.kind != kKindPoolFd)
    throw_invalid_argument(w + " is of unknown kind " + std::to_string(f.kind) + " (damaged, or from a newer tether)");
  f.flags = static_cast<std::uint32_t>(get(b + 12, 4));
  f.pid = static_cast<std::uint32_t>(get(b + 16, 4));
  f.offset = get(b + kOffsetAt, 8);
  f.size = get(b + kSizeAt, 8);
  if ((f.flags & ~kFlagEvent) != 0)
    throw_invalid_argument(w + " has unknown flags set (damaged, or from a newer tether)");
  if (f.kind == kKindLegacyMemHandle) {
    f.allocation = get(b + kAllocationAt, 8);
    if (get(b + 20, 4) != 0)
      throw_invalid_argument(w + " has reserved bits set (damaged, or from a newer tether)");
    if (f.size == 0 || f.offset > f.allocation || f.size > f.allocation - f.offset)
      throw_invalid_argument(w + " is inconsistent: " + std::to_string(f.size) + " bytes at offset " +
                             std::to_string(f.offset) + " of a " + std::to_string(f.allocation) +
                             "-byte allocation (the bytes were damaged)");
  } else {
    f.fd = static_cast<std::uint32_t>(get(b + 20, 4));
    f.pool_id = get(b + kPoolIdAt, 8);
    if (f.pool_id == 0 || f.fd > 0x7fffffffu || f.pid == 0 || f.pid > 0x7fffffffu)
      throw_invalid_argument(w + " is inconsistent: no pool id, or an impossible process id or file descriptor "
                                 "(the bytes were damaged)");
    if (f.size == 0 || f.offset > ~std::uint64_t(0) - f.size || f.offset + f.size > (std::uint64_t(1) << 56))
      throw_invalid_argument(w + " is inconsistent: " + std::to_string(f.size) + " bytes at offset " +
                             std::to_string(f.offset) + " (the bytes were damaged)");
  }
  if ((f.flags & kFlagEvent) == 0) {
    for (std::size_t i = kEventHandleAt; i < kHandleSize; ++i)
      if (b[i] != 0) throw_invalid_argument(w + " has event bytes but no event flag (the bytes were damaged)");
  }
  return f;
}

// Why memory from `resource` cannot be shared, or "" if the driver may be
// asked. *pool_resource: the async resource in the chain (its pool shares the
// memory), or nullptr for cuMemAlloc memory.
std::string refusal(const Resource& resource, const Resource** pool_resource = nullptr) {
  if (pool_resource != nullptr) *pool_resource = nullptr;
  const Properties& p = resource.properties();
  if (p.host_accessible) {
    const char* what = p.device_accessible ? (p.device >= 0 ? "managed memory" : "pinned host memory") : "host memory";
    return std::string("CUDA IPC shares device memory only; this buffer is ") + what + " (from a '" +
           resource.name() + "' resource). Allocate it from a cuda resource, or a pool over one";
  }
  if (!p.device_accessible || p.device < 0)
    return std::string("CUDA IPC shares device memory only; this buffer's memory (from a '") + resource.name() +
           "' resource) is not device memory";
  for (const Resource* r = &resource; r != nullptr;) {
    const tether_resource_kind_t k = r->properties().kind;
    if (k == TETHER_RESOURCE_KIND_ASYNC || k == TETHER_RESOURCE_KIND_ASYNC_VIEW) {
      if (pool_resource != nullptr) *pool_resource = r;
      return {};  // the pool decides (cuda::share_async_pool says why not)
    }
    if (k == TETHER_RESOURCE_KIND_IPC)
      return "this buffer was imported from another process; it cannot be exported again. Export the original "
             "buffer, or copy into a buffer of your own first";
    const std::shared_ptr<Resource>* up = r->upstream();
    r = up != nullptr ? up->get() : nullptr;
  }
  return {};
}

}  // namespace

void validate(const unsigned char* bytes, const char* what) { (void)decode(bytes, what); }

void exporter(const unsigned char* bytes, const char* what, int* pid, int* fd) {
  const Fields f = decode(bytes, what);
  if (pid != nullptr) *pid = static_cast<int>(f.pid);
  if (fd != nullptr) *fd = f.kind == kKindPoolFd ? static_cast<int>(f.fd) : -1;
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture (added after the tables were unified)
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

int process_fd(int pid, int fd) {
  if (pid <= 0) throw_invalid_argument("pid " + std::to_string(pid) + " is not a process id");
  if (fd < 0) throw_invalid_argument("fd " + std::to_string(fd) + " is not a file descriptor");
  const std::string whose = "file descriptor " + std::to_string(fd) + " of process " + std::to_string(pid);
  const long pidfd = ::syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) {
    const int e = errno;
    if (e == ENOSYS)
      throw Error(TETHER_ERROR_NOT_SUPPORTED, "cannot take " + whose + ": this kernel has no pidfd_open (Linux 5.3+ "
                                              "and pidfd_getfd, 5.6+, are needed); send the descriptor over a Unix "
                                              "socket instead");
    if (e == ESRCH)
      throw_invalid_argument("pid: cannot take " + whose + ": there is no such process (has it exited?)");
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "cannot take " + whose + ": pidfd_open failed: " + std::strerror(e));
  }
  const long got = ::syscall(SYS_pidfd_getfd, static_cast<int>(pidfd), fd, 0);
  const int e = errno;
  (void)::close(static_cast<int>(pidfd));
  if (got >= 0) return static_cast<int>(got);
  if (e == ENOSYS)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "cannot take " + whose + ": this kernel has no pidfd_getfd (Linux 5.6+ is "
                                            "needed); send the descriptor over a Unix socket instead");
  if (e == EBADF) throw_invalid_argument("fd: cannot take " + whose + ": that process has no such descriptor");
  if (e == ESRCH) throw_invalid_argument("pid: cannot take " + whose + ": the process has exited");
  if (e == EPERM || e == EACCES)
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                "cannot take " + whose + ": not permitted (pidfd_getfd needs ptrace access to the process: the same "
                "user and, under Yama, kernel.yama.ptrace_scope 0 or the exporter naming this process with "
                "prctl(PR_SET_PTRACER)); send the descriptor over a Unix socket instead (" + std::strerror(e) + ")");
  throw Error(TETHER_ERROR_NOT_SUPPORTED, "cannot take " + whose + ": pidfd_getfd failed: " + std::strerror(e));
}

#if TETHER_HAVE_CUDA_HEADERS

namespace {

using namespace tether::core::cuda::detail;

// The mappings this process holds: one per (device, driver handle), counted.
struct Mapping {
  CUdeviceptr base = 0;
  std::size_t users = 0;
};
struct Mappings {
  std::mutex mutex;
  std::map<std::pair<int, std::vector<unsigned char>>, Mapping> open;
};
Mappings& mappings() {
  static auto* m = new Mappings;  // never destroyed: releases may run during teardown
  return *m;
}

using Key = std::pair<int, std::vector<unsigned char>>;

CUdeviceptr open_mapping(const Key& key, const CUipcMemHandle& handle, std::uint32_t exporter_pid) {
  Mappings& m = mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.open.find(key);
  if (it != m.open.end()) {
    ++it->second.users;
    return it->second.base;
  }
  const Driver& d = driver();
  ScopedContext ctx(key.first);
  CUdeviceptr base = 0;
  const CUresult r = d.IpcOpenMemHandle(&base, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (r != CUDA_SUCCESS) {
    std::string hint;
    if (exporter_pid == static_cast<std::uint32_t>(getpid()))
      hint = " (the handle was exported by this very process: CUDA maps IPC memory only into other processes; use "
             "the exporter's buffer here)";
    else
      hint = " (the exporting process (pid " + std::to_string(exporter_pid) +
             ") may have exited or freed the memory, or this GPU cannot map the exporter's)";
    throw_result(r, "cuIpcOpenMemHandle", key.first, hint);
  }
  m.open.emplace(key, Mapping{base, 1});
  return base;
}

void close_mapping(const Key& key) noexcept {
  if (process_is_exiting()) return;  // CUDA may be gone: the mapping goes with the process
  Mappings& m = mappings();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.open.find(key);
  if (it == m.open.end() || --it->second.users != 0) return;
  const CUdeviceptr base = it->second.base;
  m.open.erase(it);
  try {
    ScopedContext ctx(key.first);
    (void)driver().IpcCloseMemHandle(base);
  } catch (...) {
    // Nothing can be reported from a release; the mapping stays until exit.
  }
}

// The resource behind an imported buffer: its one allocation is the mapping;
// `close` drops this buffer's share of it (after the device's work is done).
class IpcMapping final : public Resource {
 public:
  IpcMapping(int device, void* ptr, std::size_t size, std::function<void()> close)
      : Resource(Properties{TETHER_RESOURCE_KIND_IPC, device, true, false}),
        device_(device),
        ptr_(ptr),
        size_(size),
        close_(std::move(close)) {}

  ~IpcMapping() override {
    if (open_) close_();  // never handed out (the buffer's creation failed)
  }

  const char* name() const noexcept override { return "ipc"; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t, stream_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (handed_out_ || !open_ || bytes != size_)
      throw Error(TETHER_ERROR_NOT_SUPPORTED,
                  "an imported IPC buffer maps exactly the " + std::to_string(size_) +
                      " exported bytes and its mapping allocates nothing else (resize is not supported): copy into "
                      "a buffer of your own instead");
    handed_out_ = true;
    return ptr_;
  }

  void do_deallocate(void* ptr, std::size_t bytes, std::size_t, stream_t) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!handed_out_ || ptr != ptr_ || bytes != size_)
        throw_invalid_argument("ipc mapping: free of memory it did not hand out");
      handed_out_ = false;
      open_ = false;
    }
    if (process_is_exiting()) return;
    try {
      // Work on any stream may still read or write the mapping: let it finish first.
      ScopedContext ctx(device_);
      (void)driver().CtxSynchronize();
    } catch (...) {
    }
    close_();
  }

 private:
  const int device_;
  void* const ptr_;
  const std::size_t size_;
  const std::function<void()> close_;  // noexcept in effect: the closers catch everything
  std::mutex mutex_;
  bool handed_out_ = false;
  bool open_ = true;
};

// ---- kind 2: allocations of pools shared through a POSIX fd ------------------

// Imported pools, one per (pool id, device), and imported pointers, one per
// (pool id, device, export data); each pointer holds one user of its pool.
struct ImportedPool {
  CUmemoryPool pool = nullptr;
  std::size_t users = 0;
};
struct ImportedPointer {
  CUdeviceptr ptr = 0;
  std::size_t users = 0;
};
using PoolKey = std::pair<std::uint64_t, int>;
using PointerKey = std::pair<PoolKey, std::vector<unsigned char>>;
struct PoolImports {
  std::mutex mutex;
  std::map<PoolKey, ImportedPool> pools;
  std::map<PointerKey, ImportedPointer> pointers;
};
PoolImports& pool_imports() {
  static auto* m = new PoolImports;  // never destroyed: releases may run during teardown
  return *m;
}

// Called with the lock held: drop one user of `key`'s pool, destroying the import with the last.
void drop_pool_user(PoolImports& m, const PoolKey& key) noexcept {
  auto it = m.pools.find(key);
  if (it == m.pools.end() || --it->second.users != 0) return;
  CUmemoryPool pool = it->second.pool;
  m.pools.erase(it);
  try {
    ScopedContext ctx(key.second);
    (void)driver().MemPoolDestroy(pool);
  } catch (...) {
  }
}

void close_pool_pointer(const PointerKey& key) noexcept {
  if (process_is_exiting()) return;  // CUDA may be gone: the import goes with the process
  PoolImports& m = pool_imports();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.pointers.find(key);
  if (it == m.pointers.end() || --it->second.users != 0) return;
  const CUdeviceptr ptr = it->second.ptr;
  m.pointers.erase(it);
  try {
    ScopedContext ctx(key.first.second);
    (void)driver().MemFree(ptr);  // the imported pointer's free: the exporter's memory stays allocated there
  } catch (...) {
  }
  drop_pool_user(m, key.first);
}

std::string uuid_text(const unsigned char* u) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += hex[u[i] >> 4];
    s += hex[u[i] & 15];
  }
  return s;
}

void device_uuid(int device, unsigned char* out) {
  CUuuid u;
  check(driver().DeviceGetUuid(&u, device_handle(device)), "cuDeviceGetUuid", device);
  std::memcpy(out, u.bytes, 16);
}

// The device whose UUID is `uuid`; NO_DEVICE if this process does not see it.
int device_of_uuid(const unsigned char* uuid) {
  const int n = cuda::device_count();
  unsigned char u[16];
  for (int i = 0; i < n; ++i) {
    device_uuid(i, u);
    if (std::memcmp(u, uuid, 16) == 0) return i;
  }
  throw Error(TETHER_ERROR_NO_DEVICE, "the handle's memory is on " + uuid_text(uuid) +
                                          ", which this process does not see (CUDA_VISIBLE_DEVICES?); pass a "
                                          "device to map it through peer access instead");
}

}  // namespace

namespace {

// An interprocess event recorded on `stream` now, into b + kEventHandleAt; the
// returned holder owns it (destroyed with the last holder, unless CUDA may be gone).
std::shared_ptr<void> record_ipc_event(int device, stream_t stream, unsigned char* b) {
  const Driver& d = driver();
  CUevent e = nullptr;
  check(d.EventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING), "cuEventCreate", device);
  std::shared_ptr<void> event(static_cast<void*>(e), [device](void* p) {
    if (process_is_exiting()) return;
    try {
      ScopedContext c(device);
      (void)driver().EventDestroy(static_cast<CUevent>(p));
    } catch (...) {
    }
  });
  check(d.EventRecord(e, as_stream(stream)), "cuEventRecord", device);
  CUipcEventHandle eh;
  check(d.IpcGetEventHandle(&eh, e), "cuIpcGetEventHandle", device);
  std::memcpy(b + kEventHandleAt, &eh, kOpaqueSize);
  put32(b + 12, kFlagEvent);
  return event;
}

void write_header(unsigned char* b, std::uint16_t kind, int device, std::uint64_t offset, std::size_t size) {
  std::memcpy(b, kMagic, sizeof kMagic);
  put16(b + 8, kVersion);
  put16(b + 10, kind);
  put32(b + 16, static_cast<std::uint32_t>(getpid()));
  device_uuid(device, b + kUuidAt);
  put64(b + kOffsetAt, offset);
  put64(b + kSizeAt, size);
}

// Kind 2: memory of an async resource whose pool has a POSIX fd shareable handle.
void export_pool_memory(const Resource& async, int device, void* ptr, std::size_t size, stream_t event_stream,
                        stream_t alloc_stream, unsigned char* out, std::shared_ptr<void>& keep) {
  const cuda::PoolShare share = cuda::share_async_pool(async);  // NOT_SUPPORTED, saying why
  const Driver& d = driver();
  ScopedContext ctx(device);
  // The pointer the pool handed out: a pool or arena over the async resource hands out pieces of it.
  CUdeviceptr base = as_dptr(ptr);
  std::size_t allocation = 0;
  if (d.MemGetAddressRange(&base, &allocation, as_dptr(ptr)) != CUDA_SUCCESS) base = as_dptr(ptr);
  CUmemPoolPtrExportData data;
  static_assert(sizeof(CUmemPoolPtrExportData) == kOpaqueSize, "CUDA's export data");
  const CUresult r = d.MemPoolExportPointer(&data, base);
  if (r != CUDA_SUCCESS)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "the CUDA driver refuses to export this buffer's memory from its pool "
                                            "(cuMemPoolExportPointer: " + result_text(r) + ")");
  unsigned char b[kHandleSize] = {};
  write_header(b, kKindPoolFd, device, as_dptr(ptr) - base, size);
  put32(b + 20, static_cast<std::uint32_t>(share.fd));
  put64(b + kPoolIdAt, share.id);
  std::memcpy(b + kExportDataAt, &data, kOpaqueSize);

  // The driver: "the imported memory must not be accessed before the allocation
  // operation completes in the exporting process". The allocation was ordered on
  // the buffer's stream.
  std::shared_ptr<void> event;
  if (event_stream == 0) {
    check(d.StreamSynchronize(as_stream(alloc_stream)), "cuStreamSynchronize", device);
  } else {
    if (event_stream != alloc_stream) {
      // Order the exporter's stream after the allocation without blocking the host.
      CUevent e = nullptr;
      check(d.EventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate", device);
      CUresult rr = d.EventRecord(e, as_stream(alloc_stream));
      if (rr == CUDA_SUCCESS) rr = d.StreamWaitEvent(as_stream(event_stream), e, 0);
      (void)d.EventDestroy(e);
      check(rr, "cuStreamWaitEvent", device);
    }
    event = record_ipc_event(device, event_stream, b);
  }
  std::memcpy(out, b, kHandleSize);
  keep = std::move(event);
}

}  // namespace

void export_memory(const Resource& resource, void* ptr, std::size_t size, stream_t event_stream,
                   stream_t alloc_stream, unsigned char* out, std::shared_ptr<void>& keep) {
  const Resource* async = nullptr;
  const std::string why = refusal(resource, &async);
  if (!why.empty()) throw Error(TETHER_ERROR_NOT_SUPPORTED, why);
  if (ptr == nullptr || size == 0) throw_invalid_argument("buffer has 0 bytes: there is no memory to share");
  const int device = resource.properties().device;
  if (async != nullptr) {
    export_pool_memory(*async, device, ptr, size, event_stream, alloc_stream, out, keep);
    return;
  }
  const Driver& d = driver();
  ScopedContext ctx(device);

  CUdeviceptr base = 0;
  std::size_t allocation = 0;
  CUresult r = d.MemGetAddressRange(&base, &allocation, as_dptr(ptr));
  if (r != CUDA_SUCCESS)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "the CUDA driver does not know this buffer's memory as a device "
                                            "allocation (cuMemGetAddressRange: " + result_text(r) +
                                            "), so it cannot be shared; memory from cuMemAlloc (a cuda resource, "
                                            "or a pool over one) can be");
  CUipcMemHandle mem;
  r = d.IpcGetMemHandle(&mem, base);
  if (r != CUDA_SUCCESS)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "the CUDA driver refuses to share this buffer's memory "
                                            "(cuIpcGetMemHandle: " + result_text(r) +
                                            "); memory from cuMemAlloc (a cuda resource, or a pool over one) or "
                                            "from an async resource with ipc_handle_type='posix_fd' can be shared, "
                                            "VMM memory cannot");

  unsigned char b[kHandleSize] = {};
  write_header(b, kKindLegacyMemHandle, device, as_dptr(ptr) - base, size);
  put64(b + kAllocationAt, allocation);
  static_assert(sizeof(CUipcMemHandle) == kOpaqueSize && sizeof(CUipcEventHandle) == kOpaqueSize, "CUDA's handles");
  std::memcpy(b + kMemHandleAt, &mem, kOpaqueSize);

  std::shared_ptr<void> event;
  if (event_stream != 0) event = record_ipc_event(device, event_stream, b);
  std::memcpy(out, b, kHandleSize);
  keep = std::move(event);
}

namespace {

// Wait (on the host) for the exporter's event, if the handle has one.
void wait_for_event(const unsigned char* bytes, const Fields& f, int device) {
  if ((f.flags & kFlagEvent) == 0) return;
  const Driver& d = driver();
  CUipcEventHandle eh;
  std::memcpy(&eh, bytes + kEventHandleAt, kOpaqueSize);
  CUevent e = nullptr;
  check(d.IpcOpenEventHandle(&e, eh), "cuIpcOpenEventHandle", device);
  const CUresult r = d.EventSynchronize(e);
  (void)d.EventDestroy(e);
  check(r, "cuEventSynchronize", device);
}

// Kind 2: the imported pointer (+1 on its import, and so on its pool's).
CUdeviceptr import_pool_pointer(const unsigned char* bytes, const Fields& f, int device, int fd,
                                const PointerKey& key) {
  PoolImports& m = pool_imports();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto pit = m.pointers.find(key);
  if (pit != m.pointers.end()) {
    ++pit->second.users;
    return pit->second.ptr;
  }
  const Driver& d = driver();
  if (d.MemPoolImportFromShareableHandle == nullptr || d.MemPoolImportPointer == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, "this CUDA driver does not provide cuMemPoolImportFromShareableHandle "
                                            "and cuMemPoolImportPointer, so memory-pool allocations cannot be "
                                            "imported");
  ScopedContext ctx(device);
  const PoolKey& pool_key = key.first;
  auto it = m.pools.find(pool_key);
  bool fresh = false;
  if (it == m.pools.end()) {
    int owned = -1;  // a descriptor taken from the exporter: closed after the import
    if (fd < 0) {
      try {
        owned = process_fd(static_cast<int>(f.pid), static_cast<int>(f.fd));
      } catch (const Error& e) {
        throw Error(TETHER_ERROR_NOT_SUPPORTED,
                    std::string("this handle's memory comes from a CUDA memory pool shared through a POSIX file "
                                "descriptor, which this process does not have and could not take from the exporter "
                                "(") + e.what() + "). Send the descriptor over a Unix socket (tether.ipc.send_handle "
                                "and recv_handle in Python) and pass it to the import (fd)");
      }
    }
    const int use = fd >= 0 ? fd : owned;
    CUmemoryPool pool = nullptr;
    const CUresult r = d.MemPoolImportFromShareableHandle(
        &pool, reinterpret_cast<void*>(static_cast<std::uintptr_t>(use)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (owned >= 0) (void)::close(owned);
    if (r != CUDA_SUCCESS)
      throw_result(r, "cuMemPoolImportFromShareableHandle", device,
                   " (is fd " + std::to_string(use) + " the pool descriptor of this handle's exporter, pid " +
                       std::to_string(f.pid) + "?)");
    // The pool's own GPU has access; another device needs it granted (peer access).
    int owner = -1;
    try {
      owner = device_of_uuid(bytes + kUuidAt);
    } catch (const Error&) {
    }
    if (owner != device) {
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      const CUresult ra = d.MemPoolSetAccess != nullptr ? d.MemPoolSetAccess(pool, &access, 1)
                                                        : CUDA_ERROR_NOT_SUPPORTED;
      if (ra != CUDA_SUCCESS) {
        (void)d.MemPoolDestroy(pool);
        throw_result(ra, "cuMemPoolSetAccess", device, " (mapping another GPU's pool memory through peer access)");
      }
    }
    it = m.pools.emplace(pool_key, ImportedPool{pool, 0}).first;
    fresh = true;
  }
  CUmemPoolPtrExportData data;
  std::memcpy(&data, bytes + kExportDataAt, kOpaqueSize);
  CUdeviceptr ptr = 0;
  const CUresult r = d.MemPoolImportPointer(&ptr, it->second.pool, &data);
  if (r != CUDA_SUCCESS) {
    if (fresh) {
      (void)d.MemPoolDestroy(it->second.pool);
      m.pools.erase(it);
    }
    std::string hint;
    if (f.pid == static_cast<std::uint32_t>(getpid()))
      hint = " (the handle was exported by this very process: use the exporter's buffer here)";
    else
      hint = " (the exporting process (pid " + std::to_string(f.pid) +
             ") may have exited or freed the memory, or the descriptor is not its pool's)";
    throw_result(r, "cuMemPoolImportPointer", device, hint);
  }
  ++it->second.users;
  m.pointers.emplace(key, ImportedPointer{ptr, 1});
  return ptr;
}

}  // namespace

ResourcePtr import_memory(const unsigned char* bytes, int device, int fd, std::size_t* size) {
  const Fields f = decode(bytes, "handle");
  if (fd < -1) throw_invalid_argument("fd " + std::to_string(fd) + " is not a file descriptor (-1: none)");
  if (device == TETHER_DEVICE_HOST)
    throw_invalid_argument("device: imported memory is device memory; pass a device id, or TETHER_DEVICE_CURRENT "
                           "for the exporter's GPU");
  if (device != TETHER_DEVICE_CURRENT && device < 0)
    throw_invalid_argument("device " + std::to_string(device) + " is not a device id");
  (void)driver();
  if (device == TETHER_DEVICE_CURRENT) {
    device = device_of_uuid(bytes + kUuidAt);
  } else {
    cuda::check_device(device);
  }
  ScopedContext ctx(device);
  // The exporter's work on its stream before the export: done before anyone here touches the memory.
  wait_for_event(bytes, f, device);
  const auto offset = static_cast<std::size_t>(f.offset);
  *size = static_cast<std::size_t>(f.size);

  if (f.kind == kKindPoolFd) {
    PointerKey key(PoolKey(f.pool_id, device),
                   std::vector<unsigned char>(bytes + kExportDataAt, bytes + kExportDataAt + kOpaqueSize));
    const CUdeviceptr base = import_pool_pointer(bytes, f, device, fd, key);
    try {
      return std::make_shared<IpcMapping>(device, as_ptr(base + offset), *size, [key] { close_pool_pointer(key); });
    } catch (...) {
      close_pool_pointer(key);
      throw;
    }
  }
  CUipcMemHandle mem;
  std::memcpy(&mem, bytes + kMemHandleAt, kOpaqueSize);
  Key key(device, std::vector<unsigned char>(bytes + kMemHandleAt, bytes + kMemHandleAt + kOpaqueSize));
  const CUdeviceptr base = open_mapping(key, mem, f.pid);
  try {
    return std::make_shared<IpcMapping>(device, as_ptr(base + offset), *size, [key] { close_mapping(key); });
  } catch (...) {
    close_mapping(key);
    throw;
  }
}

#else  // !TETHER_HAVE_CUDA_HEADERS

namespace {
[[noreturn]] void unsupported() {
  throw Error(TETHER_ERROR_NOT_SUPPORTED,
              "this tether build has no CUDA support (cuda.h was not found when it was built), so no CUDA IPC");
}
}  // namespace

void export_memory(const Resource& resource, void*, std::size_t, stream_t, stream_t, unsigned char*,
                   std::shared_ptr<void>&) {
  const std::string why = refusal(resource);
  if (!why.empty()) throw Error(TETHER_ERROR_NOT_SUPPORTED, why);
  unsupported();
}

ResourcePtr import_memory(const unsigned char* bytes, int, int, std::size_t*) {
  (void)decode(bytes, "handle");
  unsupported();
}

#endif  // TETHER_HAVE_CUDA_HEADERS

}  // namespace tether::core::ipc
