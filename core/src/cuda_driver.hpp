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

// The driver's entry points tether uses, resolved at the 12.0 ABI.
struct Driver {
  int version = 0;       // cuDriverGetVersion
  int device_count = 0;  // > 0 once loaded

  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*CtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*CtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*CtxGetDevice)(CUdevice*) = nullptr;
  CUresult (*CtxSynchronize)() = nullptr;
  CUresult (*MemGetInfo)(std::size_t*, std::size_t*) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemAllocManaged)(CUdeviceptr*, std::size_t, unsigned) = nullptr;
  CUresult (*MemHostAlloc)(void**, std::size_t, unsigned) = nullptr;
  CUresult (*MemFreeHost)(void*) = nullptr;
  CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, std::size_t, CUstream) = nullptr;
  CUresult (*PointerGetAttribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  CUresult (*StreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*StreamDestroy)(CUstream) = nullptr;
  CUresult (*StreamSynchronize)(CUstream) = nullptr;
  CUresult (*StreamQuery)(CUstream) = nullptr;
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*LaunchHostFunc)(CUstream, CUhostFn, void*) = nullptr;
  CUresult (*EventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*EventDestroy)(CUevent) = nullptr;
  CUresult (*EventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice) = nullptr;
  CUresult (*MemPoolCreate)(CUmemoryPool*, const CUmemPoolProps*) = nullptr;
  CUresult (*MemPoolDestroy)(CUmemoryPool) = nullptr;
  CUresult (*MemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void*) = nullptr;
  CUresult (*MemPoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void*) = nullptr;
  CUresult (*MemPoolTrimTo)(CUmemoryPool, std::size_t) = nullptr;
  CUresult (*MemAllocFromPoolAsync)(CUdeviceptr*, std::size_t, CUmemoryPool, CUstream) = nullptr;
  CUresult (*MemFreeAsync)(CUdeviceptr, CUstream) = nullptr;
  CUresult (*MemPrefetchAsync)(CUdeviceptr, std::size_t, CUdevice, CUstream) = nullptr;
};

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
