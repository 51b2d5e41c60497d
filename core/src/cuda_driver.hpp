// Internal: the CUDA driver (libcuda.so.1), loaded at run time.
//
// The driver is dlopen'ed once, on first use, and every entry point is
// resolved with cuGetProcAddress_v2 at the CUDA 12.0 ABI with legacy-stream
// semantics (stream 0 is the legacy default stream). Nothing links libcuda,
// so one build runs with and without a GPU. The CUDA headers provide types
// and constants only.
//
// Contexts: each device's primary context (the one the CUDA runtime, CuPy,
// PyTorch and Numba use) is retained once and kept for the life of the
// process - never released, so no teardown ordering with CUDA arises.
// ScopedContext makes it current around driver calls when the calling
// thread's current context is a different one.
//
// Tests of the CUDA resources (tests/core/cuda) include this header too, for
// the few driver calls they need (streams, memsets, host functions).
#pragma once

#if TETHER_HAVE_CUDA_HEADERS

#include <cuda.h>

#include <cstdint>
#include <string>

#include "tether_core/error.hpp"
#include "tether_core/resource.hpp"

namespace tether::core::cuda::detail {

// Oldest driver tether accepts (cuGetProcAddress_v2 and the 12.0 ABI).
inline constexpr int kMinimumDriverVersion = 12000;

// The driver's entry points, one list: X(Name, (parameter types)) for the
// function cuName, which returns CUresult, stored as Driver::Name.
//
// TETHER_CUDA_LIBRARY_ENTRY_POINTS: what the library itself calls. A driver
// that lacks one of them is unusable, and the load fails naming it.
// TETHER_CUDA_TEST_ENTRY_POINTS: what only the tests (and benchmarks) call.
// Resolved when the driver has them, nullptr otherwise: a missing one never
// fails the load (tests check with test_entry_point()).
// To call a new driver function, add it to the first list (or, for tests
// only, the second); nothing else is written per entry point. Names are the
// base names (cuIpcOpenMemHandle, cuMemGetAddressRange, cuDeviceGetUuid):
// cuGetProcAddress at the 12.0 ABI returns their current (_v2) versions,
// whose signatures are the ones written here.
#define TETHER_CUDA_LIBRARY_ENTRY_POINTS(X)                                   \
  X(GetErrorName, (CUresult, const char**))                                   \
  X(GetErrorString, (CUresult, const char**))                                 \
  X(Init, (unsigned))                                                         \
  X(DeviceGetCount, (int*))                                                   \
  X(DeviceGet, (CUdevice*, int))                                              \
  X(DeviceGetName, (char*, int, CUdevice))                                    \
  X(DeviceGetAttribute, (int*, CUdevice_attribute, CUdevice))                 \
  X(DevicePrimaryCtxRetain, (CUcontext*, CUdevice))                           \
  X(CtxGetCurrent, (CUcontext*))                                              \
  X(CtxPushCurrent, (CUcontext))                                              \
  X(CtxPopCurrent, (CUcontext*))                                              \
  X(CtxGetDevice, (CUdevice*))                                                \
  X(CtxSynchronize, ())                                                       \
  X(MemGetInfo, (std::size_t*, std::size_t*))                                 \
  X(MemAlloc, (CUdeviceptr*, std::size_t))                                    \
  X(MemFree, (CUdeviceptr))                                                   \
  X(MemAllocManaged, (CUdeviceptr*, std::size_t, unsigned))                   \
  X(MemHostAlloc, (void**, std::size_t, unsigned))                            \
  X(MemFreeHost, (void*))                                                     \
  X(MemcpyAsync, (CUdeviceptr, CUdeviceptr, std::size_t, CUstream))           \
  X(PointerGetAttribute, (void*, CUpointer_attribute, CUdeviceptr))           \
  X(StreamSynchronize, (CUstream))                                            \
  X(StreamWaitEvent, (CUstream, CUevent, unsigned))                           \
  X(EventCreate, (CUevent*, unsigned))                                        \
  X(EventDestroy, (CUevent))                                                  \
  X(EventRecord, (CUevent, CUstream))                                         \
  X(EventQuery, (CUevent))                                                    \
  X(EventSynchronize, (CUevent))                                              \
  X(ThreadExchangeStreamCaptureMode, (CUstreamCaptureMode*))                  \
  X(DeviceGetDefaultMemPool, (CUmemoryPool*, CUdevice))                       \
  X(DeviceGetMemPool, (CUmemoryPool*, CUdevice))                              \
  X(MemPoolCreate, (CUmemoryPool*, const CUmemPoolProps*))                    \
  X(MemPoolDestroy, (CUmemoryPool))                                           \
  X(MemPoolSetAttribute, (CUmemoryPool, CUmemPool_attribute, void*))          \
  X(MemPoolTrimTo, (CUmemoryPool, std::size_t))                               \
  X(MemAllocFromPoolAsync, (CUdeviceptr*, std::size_t, CUmemoryPool, CUstream)) \
  X(MemFreeAsync, (CUdeviceptr, CUstream))                                   \
  X(DeviceGetUuid, (CUuuid*, CUdevice))                                       \
  X(MemGetAddressRange, (CUdeviceptr*, std::size_t*, CUdeviceptr))            \
  X(IpcGetMemHandle, (CUipcMemHandle*, CUdeviceptr))                          \
  X(IpcOpenMemHandle, (CUdeviceptr*, CUipcMemHandle, unsigned))               \
  X(IpcCloseMemHandle, (CUdeviceptr))                                         \
  X(IpcGetEventHandle, (CUipcEventHandle*, CUevent))                          \
  X(IpcOpenEventHandle, (CUevent*, CUipcEventHandle))

// TETHER_CUDA_OPTIONAL_ENTRY_POINTS: what the library calls only for an optional
// feature (prefetching; IPC of memory-pool allocations through a shareable handle). nullptr when the driver lacks it; the feature then
// reports NOT_SUPPORTED instead of failing the whole load.
#define TETHER_CUDA_OPTIONAL_ENTRY_POINTS(X)                                  \
  X(MemPrefetchAsync, (CUdeviceptr, std::size_t, CUdevice, CUstream))         \
  X(MemPoolExportToShareableHandle, (void*, CUmemoryPool, CUmemAllocationHandleType, unsigned long long)) \
  X(MemPoolImportFromShareableHandle, (CUmemoryPool*, void*, CUmemAllocationHandleType, unsigned long long)) \
  X(MemPoolExportPointer, (CUmemPoolPtrExportData*, CUdeviceptr))             \
  X(MemPoolImportPointer, (CUdeviceptr*, CUmemoryPool, CUmemPoolPtrExportData*)) \
  X(MemPoolSetAccess, (CUmemoryPool, const CUmemAccessDesc*, std::size_t))   \
  X(MemAdvise, (CUdeviceptr, std::size_t, CUmem_advise, CUdevice))

// TETHER_CUDA_NEWER_ENTRY_POINTS: optional entry points that only newer drivers have,
// X(Name, abi, (parameter types)), each resolved at the ABI of the CUDA version that
// introduced it (`abi`, e.g. 13000) instead of 12.0 - cuGetProcAddress refuses a function
// asked for at an older version than its own. nullptr on an older driver: the feature that
// needs it reports NOT_SUPPORTED naming the function and the version (newer_entry_point()).
#define TETHER_CUDA_NEWER_ENTRY_POINTS(X)                                     \
  X(MemGetDefaultMemPool, 13000, (CUmemoryPool*, CUmemLocation*, CUmemAllocationType))

#define TETHER_CUDA_TEST_ENTRY_POINTS(X)                                      \
  X(MemsetD8Async, (CUdeviceptr, unsigned char, std::size_t, CUstream))       \
  X(StreamCreate, (CUstream*, unsigned))                                      \
  X(StreamDestroy, (CUstream))                                                \
  X(StreamQuery, (CUstream))                                                  \
  X(LaunchHostFunc, (CUstream, CUhostFn, void*))                              \
  X(MemPoolGetAttribute, (CUmemoryPool, CUmemPool_attribute, void*))

// The driver's entry points, resolved at the 12.0 ABI.
struct Driver {
  int version = 0;       // cuDriverGetVersion
  int device_count = 0;  // > 0 once loaded

#define TETHER_CUDA_DRIVER_FIELD(name, params) CUresult(*name) params = nullptr;
#define TETHER_CUDA_DRIVER_FIELD_AT(name, abi, params) CUresult(*name) params = nullptr;
  TETHER_CUDA_LIBRARY_ENTRY_POINTS(TETHER_CUDA_DRIVER_FIELD)
  TETHER_CUDA_OPTIONAL_ENTRY_POINTS(TETHER_CUDA_DRIVER_FIELD)
  TETHER_CUDA_NEWER_ENTRY_POINTS(TETHER_CUDA_DRIVER_FIELD_AT)
  TETHER_CUDA_TEST_ENTRY_POINTS(TETHER_CUDA_DRIVER_FIELD)
#undef TETHER_CUDA_DRIVER_FIELD
#undef TETHER_CUDA_DRIVER_FIELD_AT
};

// cuGetProcAddress_v2 (CUDA 12.0+).
using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

// Resolve every entry point through `gpa` into `d`. False, with `why` naming
// the function, if a library entry point is missing; a missing test entry
// point stays nullptr. (Exposed so that a test can feed it a fake driver.)
bool resolve_all(GetProcAddress gpa, Driver& d, std::string& why);

// A test entry point, or Error(NOT_SUPPORTED) naming it if the driver lacks it.
template <class F>
F test_entry_point(F fn, const char* name) {
  if (fn == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED, std::string("the CUDA driver does not provide ") + name);
  return fn;
}

// An optional or newer entry point the library needs for `feature`, or
// Error(NOT_SUPPORTED) naming the function and the driver version it needs
// ("managed_async resource: the CUDA driver (12.8) does not provide cuMemGetDefaultMemPool,
// which needs a CUDA 13.0 driver").
template <class F>
F newer_entry_point(F fn, const char* feature, const char* name, int needed, int have) {
  if (fn == nullptr)
    throw Error(TETHER_ERROR_NOT_SUPPORTED,
                std::string(feature) + ": the CUDA driver (" + std::to_string(have / 1000) + "." +
                    std::to_string((have % 1000) / 10) + ") does not provide " + name + ", which needs a CUDA " +
                    std::to_string(needed / 1000) + "." + std::to_string((needed % 1000) / 10) + " driver");
  return fn;
}

// The loaded, initialised driver (cuInit done, at least one device). Throws
// Error(NO_DEVICE, reason) otherwise; the reason is found once and kept.
// Thread-safe.
const Driver& driver();

// A failed driver call. status() is TETHER_ERROR_CUDA; result() the CUresult.
class CudaError : public Error {
 public:
  CudaError(CUresult result, const std::string& message) : Error(TETHER_ERROR_CUDA, message), result_(result) {}
  CUresult result() const noexcept { return result_; }

 private:
  CUresult result_;
};

// "CUDA_ERROR_X (description)".
std::string result_text(CUresult r);

// Throw for a failed call: OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY, else
// CudaError. Message: "<call> failed: CUDA_ERROR_X (description) on device N<detail>".
[[noreturn]] void throw_result(CUresult r, const char* call, int device, const std::string& detail = {});

inline void check(CUresult r, const char* call, int device) {
  if (r != CUDA_SUCCESS) throw_result(r, call, device);
}

// Results that mean "CUDA is being torn down": frees that see them are done.
inline bool is_shutdown_result(CUresult r) noexcept {
  return r == CUDA_ERROR_DEINITIALIZED || r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

// The device's handle and its primary context (retained on first use, kept
// for the process). Throw INVALID_ARGUMENT for a bad id.
CUdevice device_handle(int device);
CUcontext primary_context(int device);

// Make `device`'s primary context current for the guard's lifetime, unless it
// already is (then no driver call beyond cuCtxGetCurrent).
class ScopedContext {
 public:
  explicit ScopedContext(int device);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

inline CUstream as_stream(stream_t s) noexcept { return reinterpret_cast<CUstream>(s); }
inline CUdeviceptr as_dptr(const void* p) noexcept { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }
inline void* as_ptr(CUdeviceptr p) noexcept { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

}  // namespace tether::core::cuda::detail

#endif  // TETHER_HAVE_CUDA_HEADERS
