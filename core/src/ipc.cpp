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
#include "tether_core/ipc.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tether_core/cuda.hpp"
#include "tether_core/error.hpp"
#include "tether_core/process.hpp"

#if TETHER_HAVE_CUDA_HEADERS
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
//  10  kind                     u16 (1: cuIpcGetMemHandle of a cuMemAlloc allocation)
//  12  flags                    u32 (bit 0: an event handle follows)
//  16  exporter pid             u32
//  20  reserved                 u32 (0)
//  24  device UUID              16 bytes (cuDeviceGetUuid)
//  40  offset in the allocation u64
//  48  size of the buffer       u64
//  56  size of the allocation   u64 (cuMemGetAddressRange)
//  64  CUipcMemHandle           64 bytes
// 128  CUipcEventHandle         64 bytes (zero without an event)
constexpr unsigned char kMagic[8] = {'T', 'E', 'T', 'H', 'R', 'I', 'P', 'C'};
constexpr std::uint16_t kVersion = 1;
constexpr std::uint16_t kKindLegacyMemHandle = 1;
constexpr std::uint32_t kFlagEvent = 1;
constexpr std::size_t kUuidAt = 24, kOffsetAt = 40, kSizeAt = 48, kAllocationAt = 56, kMemHandleAt = 64,
                      kEventHandleAt = 128, kOpaqueSize = 64;
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
  std::uint32_t flags = 0;
  std::uint32_t pid = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t allocation = 0;
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
  const auto kind = static_cast<std::uint16_t>(get(b + 10, 2));
  if (kind != kKindLegacyMemHandle)
    throw_invalid_argument(w + " is of unknown kind " + std::to_string(kind) + " (damaged, or from a newer tether)");
  Fields f;
  f.flags = static_cast<std::uint32_t>(get(b + 12, 4));
  f.pid = static_cast<std::uint32_t>(get(b + 16, 4));
  f.offset = get(b + kOffsetAt, 8);
  f.size = get(b + kSizeAt, 8);
  f.allocation = get(b + kAllocationAt, 8);
  if ((f.flags & ~kFlagEvent) != 0 || get(b + 20, 4) != 0)
    throw_invalid_argument(w + " has unknown flags or reserved bits set (damaged, or from a newer tether)");
  if (f.size == 0 || f.offset > f.allocation || f.size > f.allocation - f.offset)
    throw_invalid_argument(w + " is inconsistent: " + std::to_string(f.size) + " bytes at offset " +
                           std::to_string(f.offset) + " of a " + std::to_string(f.allocation) +
                           "-byte allocation (the bytes were damaged)");
  if ((f.flags & kFlagEvent) == 0) {
    for (std::size_t i = kEventHandleAt; i < kHandleSize; ++i)
      if (b[i] != 0) throw_invalid_argument(w + " has event bytes but no event flag (the bytes were damaged)");
  }
  return f;
}

// Why memory from `resource` cannot be shared, or "" if the driver may be asked.
std::string refusal(const Resource& resource) {
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
    if (k == TETHER_RESOURCE_KIND_ASYNC || k == TETHER_RESOURCE_KIND_ASYNC_VIEW)
      return "memory of the async resource (cuMemAllocAsync pools) cannot be shared through cuIpcGetMemHandle, and "
             "sharing through the pool's shareable handle (ipc_handle_type='posix_fd') is not supported yet. Use a "
             "cuda resource, or a pool over one";
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

// The resource behind an imported buffer: its one allocation is the mapping.
class IpcMapping final : public Resource {
 public:
  IpcMapping(int device, Key key, CUdeviceptr base, std::size_t offset, std::size_t size)
      : Resource(Properties{TETHER_RESOURCE_KIND_IPC, device, true, false}),
        device_(device),
        key_(std::move(key)),
        ptr_(as_ptr(base + offset)),
        size_(size) {}

  ~IpcMapping() override {
    if (open_) close_mapping(key_);  // never handed out (the buffer's creation failed)
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
    close_mapping(key_);
  }

 private:
  const int device_;
  const Key key_;
  void* const ptr_;
  const std::size_t size_;
  std::mutex mutex_;
  bool handed_out_ = false;
  bool open_ = true;
};

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

void export_memory(const Resource& resource, void* ptr, std::size_t size, stream_t event_stream, unsigned char* out,
                   std::shared_ptr<void>& keep) {
  const std::string why = refusal(resource);
  if (!why.empty()) throw Error(TETHER_ERROR_NOT_SUPPORTED, why);
  if (ptr == nullptr || size == 0) throw_invalid_argument("buffer has 0 bytes: there is no memory to share");
  const int device = resource.properties().device;
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
                                            "); memory from cuMemAlloc (a cuda resource, or a pool over one) can be "
                                            "shared, stream-ordered (cuMemAllocAsync) or VMM memory cannot");

  unsigned char b[kHandleSize] = {};
  std::memcpy(b, kMagic, sizeof kMagic);
  put16(b + 8, kVersion);
  put16(b + 10, kKindLegacyMemHandle);
  put32(b + 16, static_cast<std::uint32_t>(getpid()));
  device_uuid(device, b + kUuidAt);
  put64(b + kOffsetAt, as_dptr(ptr) - base);
  put64(b + kSizeAt, size);
  put64(b + kAllocationAt, allocation);
  static_assert(sizeof(CUipcMemHandle) == kOpaqueSize && sizeof(CUipcEventHandle) == kOpaqueSize, "CUDA's handles");
  std::memcpy(b + kMemHandleAt, &mem, kOpaqueSize);

  std::shared_ptr<void> event;
  if (event_stream != 0) {
    CUevent e = nullptr;
    check(d.EventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING), "cuEventCreate", device);
    // Owned from here: destroyed with the last holder, unless CUDA may be gone.
    event = std::shared_ptr<void>(static_cast<void*>(e), [device](void* p) {
      if (process_is_exiting()) return;
      try {
        ScopedContext c(device);
        (void)driver().EventDestroy(static_cast<CUevent>(p));
      } catch (...) {
      }
    });
    check(d.EventRecord(e, as_stream(event_stream)), "cuEventRecord", device);
    CUipcEventHandle eh;
    check(d.IpcGetEventHandle(&eh, e), "cuIpcGetEventHandle", device);
    std::memcpy(b + kEventHandleAt, &eh, kOpaqueSize);
    put32(b + 12, kFlagEvent);
  }
  std::memcpy(out, b, kHandleSize);
  keep = std::move(event);
}

ResourcePtr import_memory(const unsigned char* bytes, int device, std::size_t* size) {
  const Fields f = decode(bytes, "handle");
  if (device == TETHER_DEVICE_HOST)
    throw_invalid_argument("device: imported memory is device memory; pass a device id, or TETHER_DEVICE_CURRENT "
                           "for the exporter's GPU");
  if (device != TETHER_DEVICE_CURRENT && device < 0)
    throw_invalid_argument("device " + std::to_string(device) + " is not a device id");
  const Driver& d = driver();
  if (device == TETHER_DEVICE_CURRENT) {
    device = device_of_uuid(bytes + kUuidAt);
  } else {
    cuda::check_device(device);
  }
  ScopedContext ctx(device);
  if (f.flags & kFlagEvent) {
    // The exporter's work on its stream before the export: done before anyone here touches the memory.
    CUipcEventHandle eh;
    std::memcpy(&eh, bytes + kEventHandleAt, kOpaqueSize);
    CUevent e = nullptr;
    check(d.IpcOpenEventHandle(&e, eh), "cuIpcOpenEventHandle", device);
    const CUresult r = d.EventSynchronize(e);
    (void)d.EventDestroy(e);
    check(r, "cuEventSynchronize", device);
  }
  CUipcMemHandle mem;
  std::memcpy(&mem, bytes + kMemHandleAt, kOpaqueSize);
  Key key(device, std::vector<unsigned char>(bytes + kMemHandleAt, bytes + kMemHandleAt + kOpaqueSize));
  const CUdeviceptr base = open_mapping(key, mem, f.pid);
  ResourcePtr r;
  try {
    r = std::make_shared<IpcMapping>(device, key, base, static_cast<std::size_t>(f.offset),
                                     static_cast<std::size_t>(f.size));
  } catch (...) {
    close_mapping(key);
    throw;
  }
  *size = static_cast<std::size_t>(f.size);
  return r;
}

#else  // !TETHER_HAVE_CUDA_HEADERS

namespace {
[[noreturn]] void unsupported() {
  throw Error(TETHER_ERROR_NOT_SUPPORTED,
              "this tether build has no CUDA support (cuda.h was not found when it was built), so no CUDA IPC");
}
}  // namespace

void export_memory(const Resource& resource, void*, std::size_t, stream_t, unsigned char*, std::shared_ptr<void>&) {
  const std::string why = refusal(resource);
  if (!why.empty()) throw Error(TETHER_ERROR_NOT_SUPPORTED, why);
  unsupported();
}

ResourcePtr import_memory(const unsigned char* bytes, int, std::size_t*) {
  (void)decode(bytes, "handle");
  unsupported();
}

#endif  // TETHER_HAVE_CUDA_HEADERS

}  // namespace tether::core::ipc
