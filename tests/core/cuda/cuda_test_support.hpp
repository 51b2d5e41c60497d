// Helpers shared by the CUDA core tests: device detection, host access to
// device memory, RAII streams, and a gate that holds a stream back.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "conformance.hpp"
#include "cuda_driver.hpp"
#include "tether_core/cuda.hpp"

namespace tether::test::cuda {

namespace cu = ::tether::core::cuda;
namespace dd = ::tether::core::cuda::detail;

// "" if device 0 can be used, else why not (the skip reason).
inline std::string gpu_skip_reason() {
  try {
    return cu::device_count() > 0 ? "" : "no CUDA device";
  } catch (const core::Error& e) {
    return std::string("no usable CUDA device: ") + e.what();
  }
}

#define TETHER_REQUIRE_GPU()                                    \
  do {                                                          \
    const std::string tether_skip_ = ::tether::test::cuda::gpu_skip_reason(); \
    if (!tether_skip_.empty()) GTEST_SKIP() << tether_skip_;   \
  } while (0)

// Fill / read memory of device 0 through the driver, ordered on `stream` and finished on return.
inline void device_fill(void* p, unsigned char byte, std::size_t n, core::stream_t stream = 0) {
  const dd::Driver& d = dd::driver();
  dd::ScopedContext ctx(0);
  dd::check(dd::test_entry_point(d.MemsetD8Async, "cuMemsetD8Async")(dd::as_dptr(p), byte, n, dd::as_stream(stream)),
            "cuMemsetD8Async", 0);
  dd::check(d.StreamSynchronize(dd::as_stream(stream)), "cuStreamSynchronize", 0);
}
inline void device_read(void* host, const void* p, std::size_t n, core::stream_t stream = 0) {
  cu::copy(host, p, n, 0, stream, true);
}

// For the conformance suite: memory the host cannot touch goes through the driver.
inline MemoryAccess device_access() {
  MemoryAccess a;
  a.fill = [](void* p, unsigned char byte, std::size_t n) { device_fill(p, byte, n); };
  a.read = [](void* host, const void* p, std::size_t n) { device_read(host, p, n); };
  return a;
}

// A non-blocking stream of device 0's primary context.
class Stream {
 public:
  Stream() {
    dd::ScopedContext ctx(0);
    CUstream s = nullptr;
    dd::check(dd::test_entry_point(dd::driver().StreamCreate, "cuStreamCreate")(&s, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate", 0);
    s_ = s;
  }
  ~Stream() {
    dd::ScopedContext ctx(0);
    (void)dd::driver().StreamSynchronize(s_);
    if (dd::driver().StreamDestroy != nullptr) (void)dd::driver().StreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  core::stream_t value() const noexcept { return reinterpret_cast<core::stream_t>(s_); }
  CUstream get() const noexcept { return s_; }
  // CUDA_SUCCESS when all its work is done, CUDA_ERROR_NOT_READY while some is pending.
  CUresult query() const {
    dd::ScopedContext ctx(0);
    return dd::test_entry_point(dd::driver().StreamQuery, "cuStreamQuery")(s_);
  }
  void synchronize() const { cu::stream_synchronize(0, value()); }

 private:
  CUstream s_ = nullptr;
};

// Holds back every later piece of work on the streams it blocks until open()
// (a host function on the stream that waits). Opens itself when destroyed, so
// a failing test never leaves a stream stuck. Declare it after the streams.
class Gate {
 public:
  Gate() = default;
  ~Gate() { open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void block(const Stream& s) {
    dd::ScopedContext ctx(0);
    dd::check(dd::test_entry_point(dd::driver().LaunchHostFunc, "cuLaunchHostFunc")(s.get(), &Gate::wait, this),
              "cuLaunchHostFunc", 0);
  }
  void open() noexcept { open_.store(true, std::memory_order_release); }

 private:
  static void CUDA_CB wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    while (!g->open_.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::atomic<bool> open_{false};
};

// Enqueue a memset on a stream (asynchronous).
inline void fill_async(void* p, unsigned char byte, std::size_t n, const Stream& s) {
  dd::ScopedContext ctx(0);
  dd::check(dd::test_entry_point(dd::driver().MemsetD8Async, "cuMemsetD8Async")(dd::as_dptr(p), byte, n, s.get()),
            "cuMemsetD8Async", 0);
}

// True if all n bytes at device pointer p hold `byte` (read on `stream`).
inline ::testing::AssertionResult device_holds(const void* p, unsigned char byte, std::size_t n,
                                               core::stream_t stream = 0) {
  std::string host(n, '\0');
  device_read(&host[0], p, n, stream);
  for (std::size_t i = 0; i < n; ++i)
    if (static_cast<unsigned char>(host[i]) != byte)
      return ::testing::AssertionFailure() << "byte " << i << " of " << n << " is "
                                           << int(static_cast<unsigned char>(host[i])) << ", expected " << int(byte);
  return ::testing::AssertionSuccess();
}

}  // namespace tether::test::cuda
