// Process-exit awareness. An atexit handler registered while the library is
// loaded flips a flag that resources holding CUDA memory consult in their
// destructors: once exit has begun the CUDA context may already be gone, so
// they leak rather than call into it.
#include "tether_core/process.hpp"

#include <atomic>
#include <cstdlib>

namespace tether::core {

namespace {

std::atomic<bool> g_exiting{false};

extern "C" void tether_core_on_exit() { g_exiting.store(true, std::memory_order_release); }

// Registered when the library is loaded. exit() runs handlers and static
// destructors in reverse order of registration, so the flag is set after the
// application's own statics are gone and before the library's early statics
// and the ELF destructors (where CUDA tears itself down) run.
struct ExitHook {
  ExitHook() noexcept { std::atexit(tether_core_on_exit); }
};
const ExitHook g_exit_hook;

}  // namespace

bool process_is_exiting() noexcept { return g_exiting.load(std::memory_order_acquire); }

void mark_process_exiting() noexcept { g_exiting.store(true, std::memory_order_release); }

}  // namespace tether::core
