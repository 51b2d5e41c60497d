// An asymmetric fence: two threads that each store a flag and then load the
// other's (Dekker) need a full memory barrier between the store and the load
// on both sides. Where one side runs on every call and the other rarely, the
// frequent (light) side can order them with a compiler barrier only
// (std::atomic_signal_fence), if the rare (heavy) side makes every running
// thread of the process execute a full barrier: Linux membarrier
// MEMBARRIER_CMD_PRIVATE_EXPEDITED, one system call of about a microsecond.
//
// Users: the fork gate and the registry's hazard words (capi/src/fork.cpp,
// entered.hpp) and the pool's biased arena locks (core/src/biased_lock.hpp).
#pragma once

namespace tether::core {

// Whether heavy_fence() is the kernel's membarrier: the kernel offers
// PRIVATE_EXPEDITED and the process registered for it (once, when the library
// loads; a fork() child inherits the registration). Where false, a light side
// must use sequentially consistent operations instead of a compiler barrier.
bool asymmetric_fence_available() noexcept;

// The heavy side. On return, every store that another thread made before its
// light-side compiler barrier is visible to the caller, and every load that
// thread makes after its barrier sees what the caller stored before this call.
// Without membarrier (or if it fails now, which it does not once registered,
// short of the kernel running out of memory) it issues a full fence and waits
// 1 ms, far longer than a store buffer takes to drain.
void heavy_fence() noexcept;

}  // namespace tether::core
