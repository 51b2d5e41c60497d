// Process-exit and fork awareness. An atexit handler registered while the library is
// loaded flips a flag that resources holding CUDA memory consult in their
// destructors: once exit has begun the CUDA context may already be gone, so
// they leak rather than call into it.
#include "tether_core/process.hpp"

#include <atomic>
#include <cstdlib>

namespace tether::core {

namespace {

std::atomic<bool> g_exiting{false};
std::atomic<bool> g_cuda_initialized{false};
std::atomic<bool> g_cuda_lost{false};

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

bool process_is_exiting() noexcept {
  return g_exiting.load(std::memory_order_acquire) || g_cuda_lost.load(std::memory_order_acquire);
}

void mark_process_exiting() noexcept { g_exiting.store(true, std::memory_order_release); }

void note_cuda_initialized() noexcept { g_cuda_initialized.store(true, std::memory_order_release); }

std::atomic<void (*)()> g_cuda_loaded_hook{nullptr};
std::atomic<bool> g_cuda_loaded{false};

void set_cuda_loaded_hook(void (*hook)()) noexcept { g_cuda_loaded_hook.store(hook, std::memory_order_release); }

void note_cuda_loaded() noexcept {
  if (g_cuda_loaded.exchange(true, std::memory_order_acq_rel)) return;
  if (auto* hook = g_cuda_loaded_hook.load(std::memory_order_acquire)) hook();
}

// A forked child has one thread and a copy of the parent's memory, but no
// CUDA context: the driver's state in the child is unusable once the parent
// has called cuInit. A parent that never touched CUDA leaves the child free
// to initialise it itself.
void on_fork_child() noexcept {
  if (g_cuda_initialized.load(std::memory_order_acquire)) g_cuda_lost.store(true, std::memory_order_release);
}

bool cuda_lost_to_fork() noexcept { return g_cuda_lost.load(std::memory_order_acquire); }

const char* cuda_lost_to_fork_message() noexcept {
  return "CUDA does not survive fork(): this process is the child of a fork() made after CUDA was "
         "initialised, and CUDA contexts are not inherited; create CUDA resources before any fork "
         "only in the parent, or start workers with exec/'spawn' (multiprocessing.set_start_method"
         "(\"spawn\"))";
}

}  // namespace tether::core
