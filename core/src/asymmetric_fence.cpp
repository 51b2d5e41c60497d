// The heavy side of the asymmetric fence (tether_core/asymmetric_fence.hpp).
#include "tether_core/asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace tether::core {

namespace {

bool membarrier_register() noexcept {
  const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 ||
      (cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
    return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
}

// Registered on first use (a function-local static: the fork gate's own
// static initialiser in another file may ask before this file's would run).
bool registered() noexcept {
  static const bool ok = membarrier_register();
  return ok;
}

}  // namespace

bool asymmetric_fence_available() noexcept { return registered(); }

void heavy_fence() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (registered() && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0) return;
  const timespec nap{0, 1000000};  // 1 ms
  nanosleep(&nap, nullptr);
}

}  // namespace tether::core
