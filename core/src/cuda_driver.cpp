// Loading the CUDA driver, its errors, primary contexts, and the device
// queries of tether_core/cuda.hpp. See cuda_driver.hpp for the design.
#include "tether_core/cuda.hpp"

#include <string>

#if TETHER_HAVE_CUDA_HEADERS

#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "cuda_driver.hpp"
#include "tether_core/process.hpp"

namespace tether::core::cuda {
namespace detail {
namespace {

// One device's primary context, retained on first use.
struct DeviceSlot {
  CUdevice device = 0;
  std::atomic<CUcontext> context{nullptr};
  std::mutex mutex;  // serialises the first retain
};

struct Loaded {
  Driver driver;
  std::string error;  // non-empty: no usable driver, and why
  std::unique_ptr<DeviceSlot[]> devices;
};

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Resolve `name` at the `abi` version's ABI (default: 12.0) into `fn`; false if the driver
// lacks it (a driver older than `abi` answers CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT).
template <class F>
bool resolve(GetProcAddress gpa, const char* name, F& fn, int abi = kMinimumDriverVersion) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r = gpa(name, &p, abi, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
  if (r != CUDA_SUCCESS || p == nullptr || status != CU_GET_PROC_ADDRESS_SUCCESS) return false;
  fn = reinterpret_cast<F>(p);
  return true;
}

}  // namespace

bool resolve_all(GetProcAddress gpa, Driver& d, std::string& why) {
#define TETHER_RESOLVE_LIBRARY(name, params)                                                         \
  if (!resolve(gpa, "cu" #name, d.name)) {                                                          \
    why = "CUDA driver is unusable: it does not provide cu" #name " (cuGetProcAddress)";            \
    return false;                                                                                   \
  }
#define TETHER_RESOLVE_TEST(name, params) \
  if (!resolve(gpa, "cu" #name, d.name)) d.name = nullptr;
#define TETHER_RESOLVE_AT(name, abi, params) \
  if (!resolve(gpa, "cu" #name, d.name, abi)) d.name = nullptr;
  TETHER_CUDA_LIBRARY_ENTRY_POINTS(TETHER_RESOLVE_LIBRARY)
  TETHER_CUDA_OPTIONAL_ENTRY_POINTS(TETHER_RESOLVE_TEST)
  TETHER_CUDA_NEWER_ENTRY_POINTS(TETHER_RESOLVE_AT)
  TETHER_CUDA_TEST_ENTRY_POINTS(TETHER_RESOLVE_TEST)
#undef TETHER_RESOLVE_LIBRARY
#undef TETHER_RESOLVE_TEST
#undef TETHER_RESOLVE_AT
  return true;
}

namespace {

std::string name_of(const Driver& d, CUresult r) {
  const char* s = nullptr;
  if (d.GetErrorName != nullptr && d.GetErrorName(r, &s) == CUDA_SUCCESS && s != nullptr) return s;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

std::string description_of(const Driver& d, CUresult r) {
  const char* s = nullptr;
  if (d.GetErrorString != nullptr && d.GetErrorString(r, &s) == CUDA_SUCCESS && s != nullptr) return s;
  return "unknown error";
}

// Everything that can go wrong is recorded in `error`, never thrown: the
// reason is computed once and reported by every later call.
void load(Loaded& l) {
  Driver& d = l.driver;
  // RTLD_LOCAL: the driver's symbols must not leak into the global namespace
  // of a process that may load its own copy through the CUDA runtime.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.error = std::string("no CUDA driver: libcuda.so.1 could not be loaded (") + (e ? e : "unknown reason") + ")";
    return;
  }
  // Never dlclose'd: other libraries in the process share the loaded driver.
  auto get_version = reinterpret_cast<CUresult (*)(int*)>(dlsym(lib, "cuDriverGetVersion"));
  if (get_version == nullptr) {
    l.error = "no CUDA driver: libcuda.so.1 has no cuDriverGetVersion (not an NVIDIA driver library?)";
    return;
  }
  if (get_version(&d.version) != CUDA_SUCCESS) {
    l.error = "no CUDA driver: cuDriverGetVersion failed";
    return;
  }
  auto gpa = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (d.version < kMinimumDriverVersion || gpa == nullptr) {
    l.error = "CUDA driver too old: tether needs " + version_text(kMinimumDriverVersion) + ", driver is " +
              version_text(d.version);
    return;
  }
  if (!resolve_all(gpa, d, l.error)) return;

  const CUresult init = d.Init(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    l.error = "CUDA driver has no devices (cuInit: CUDA_ERROR_NO_DEVICE)";
    return;
  }
  if (init != CUDA_SUCCESS) {
    l.error = "CUDA driver could not be initialised (cuInit: " + name_of(d, init) + ": " + description_of(d, init) + ")";
    return;
  }
  int count = 0;
  const CUresult rc = d.DeviceGetCount(&count);
  if (rc != CUDA_SUCCESS || count <= 0) {
    l.error = rc != CUDA_SUCCESS ? "CUDA driver has no usable devices (cuDeviceGetCount: " + name_of(d, rc) + ")"
                                 : "CUDA driver has no devices (cuDeviceGetCount: 0)";
    return;
  }
  l.devices.reset(new DeviceSlot[static_cast<std::size_t>(count)]);
  for (int i = 0; i < count; ++i) {
    const CUresult r = d.DeviceGet(&l.devices[i].device, i);
    if (r != CUDA_SUCCESS) {
      l.error = "CUDA driver could not open device " + std::to_string(i) + " (cuDeviceGet: " + name_of(d, r) + ")";
      return;
    }
  }
  d.device_count = count;
}

const Loaded& loaded() {
  // Never destroyed: CUDA objects are kept until the process ends, and late
  // frees from static destructors must still find the function pointers.
  static const Loaded* l = [] {
    note_cuda_initialized();  // from here on a fork() child cannot use CUDA
    auto* p = new Loaded;
    load(*p);
    note_cuda_loaded();  // fork handlers that must run before the driver's (process.hpp)
    return p;
  }();
  return *l;
}

DeviceSlot& slot(int device) {
  if (cuda_lost_to_fork()) throw Error(TETHER_ERROR_NO_DEVICE, cuda_lost_to_fork_message());
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(TETHER_ERROR_NO_DEVICE, l.error);
  if (device < 0 || device >= l.driver.device_count)
    throw_invalid_argument("invalid CUDA device " + std::to_string(device) + ": this machine has " +
                           std::to_string(l.driver.device_count) + " device(s)");
  return l.devices[device];
}

}  // namespace

const Driver& driver() {
  if (cuda_lost_to_fork()) throw Error(TETHER_ERROR_NO_DEVICE, cuda_lost_to_fork_message());
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(TETHER_ERROR_NO_DEVICE, l.error);
  return l.driver;
}

std::string result_text(CUresult r) {
  const Driver& d = loaded().driver;
  return name_of(d, r) + " (" + description_of(d, r) + ")";
}

void throw_result(CUresult r, const char* call, int device, const std::string& detail) {
  std::string m = std::string(call) + " failed: " + result_text(r);
  if (device >= 0) m += " on device " + std::to_string(device);
  m += detail;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemory(m);
  throw CudaError(r, m);
}

CUdevice device_handle(int device) { return slot(device).device; }

CUcontext primary_context(int device) {
  DeviceSlot& s = slot(device);
  CUcontext c = s.context.load(std::memory_order_acquire);
  if (c != nullptr) return c;
  std::lock_guard<std::mutex> lock(s.mutex);
  c = s.context.load(std::memory_order_relaxed);
  if (c == nullptr) {
    // Retained once and never released: the context outlives every tether
    // object, whatever order the process tears things down in.
    check(driver().DevicePrimaryCtxRetain(&c, s.device), "cuDevicePrimaryCtxRetain", device);
    s.context.store(c, std::memory_order_release);
  }
  return c;
}

ScopedContext::ScopedContext(int device) {
  const CUcontext want = primary_context(device);
  const Driver& d = loaded().driver;
  CUcontext current = nullptr;
  const CUresult r = d.CtxGetCurrent(&current);
  if (r != CUDA_SUCCESS) throw_result(r, "cuCtxGetCurrent", device);
  if (current == want) return;
  check(d.CtxPushCurrent(want), "cuCtxPushCurrent", device);
  pushed_ = true;
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  (void)loaded().driver.CtxPopCurrent(&popped);  // cannot fail after a successful push
}

}  // namespace detail

using namespace detail;

int device_count() { return driver().device_count; }

int driver_version() { return driver().version; }

int current_device() {
  if (cuda_lost_to_fork()) throw Error(TETHER_ERROR_NO_DEVICE, cuda_lost_to_fork_message());
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(TETHER_ERROR_NO_DEVICE, l.error);
  const Driver& d = l.driver;
  CUcontext current = nullptr;
  if (d.CtxGetCurrent(&current) != CUDA_SUCCESS || current == nullptr) return 0;
  CUdevice dev = 0;
  if (d.CtxGetDevice(&dev) != CUDA_SUCCESS) return 0;  // e.g. a destroyed context is current
  for (int i = 0; i < d.device_count; ++i)
    if (l.devices[i].device == dev) return i;
  return 0;
}

void check_device(int device) { (void)slot(device); }

void stream_synchronize(int device, stream_t stream) {
  const Driver& d = driver();
  ScopedContext ctx(device);
  check(d.StreamSynchronize(as_stream(stream)), "cuStreamSynchronize", device);
}

RelaxedCaptureScope::RelaxedCaptureScope() noexcept {
  try {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (driver().ThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS) {
      previous_ = static_cast<int>(mode);
      exchanged_ = true;
    }
  } catch (...) {  // no driver: nothing is being captured
  }
}

RelaxedCaptureScope::~RelaxedCaptureScope() {
  if (!exchanged_) return;
  auto mode = static_cast<CUstreamCaptureMode>(previous_);
  (void)driver().ThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace tether::core::cuda

#else  // !TETHER_HAVE_CUDA_HEADERS

namespace tether::core::cuda {
namespace {
[[noreturn]] void unsupported() {
  throw Error(TETHER_ERROR_NOT_SUPPORTED,
              "this tether build has no CUDA support (cuda.h was not found when it was built; set CUDA_HOME "
              "or install the CUDA toolkit headers and rebuild)");
}
}  // namespace

int device_count() { unsupported(); }
int driver_version() { unsupported(); }
int current_device() { unsupported(); }
void check_device(int) { unsupported(); }
void stream_synchronize(int, stream_t) { unsupported(); }
void memory_info(int, std::size_t*, std::size_t*) { unsupported(); }
std::string device_name(int) { unsupported(); }
ResourcePtr make_cuda_resource(int) { unsupported(); }
ResourcePtr make_async_resource(int, const AsyncOptions&) { unsupported(); }
ResourcePtr make_async_view_resource(int, void*) { unsupported(); }
ResourcePtr make_managed_resource(int) { unsupported(); }
ResourcePtr make_system_resource(int) { unsupported(); }
ResourcePtr make_managed_async_resource(int) { unsupported(); }
ResourcePtr make_sam_headroom_resource(int, std::size_t) { unsupported(); }
ResourcePtr make_pinned_host_resource(int) { unsupported(); }
PoolShare share_async_pool(const Resource&) { unsupported(); }
void copy(void*, const void*, std::size_t, int, stream_t, bool) { unsupported(); }
RelaxedCaptureScope::RelaxedCaptureScope() noexcept {}
RelaxedCaptureScope::~RelaxedCaptureScope() = default;

}  // namespace tether::core::cuda

#endif  // TETHER_HAVE_CUDA_HEADERS
