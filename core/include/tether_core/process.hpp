// Process-exit and fork awareness: once exit() has begun (atexit handlers,
// static destructors), or in the child of a fork() of a process that had
// initialised CUDA, tether makes no CUDA calls; memory still held is leaked on
// purpose rather than freed into a possibly dead (or, after fork, never
// inherited) CUDA context.
#pragma once

namespace tether::core {

// True once exit has begun, or in a fork() child that lost CUDA
// (cuda_lost_to_fork()): CUDA memory is leaked instead of freed.
bool process_is_exiting() noexcept;
// For tests: mark the process as exiting now.
void mark_process_exiting() noexcept;

// The CUDA driver loader calls this before its first driver call (cuInit).
void note_cuda_initialized() noexcept;
// The loader calls this once the driver is loaded (and has registered any
// fork handlers of its own); it runs the hook set below, once.
void note_cuda_loaded() noexcept;
// capi/src/fork.cpp registers its atfork handlers again from here, so that
// its prepare handler (which waits for threads inside tether, possibly inside
// a driver call) runs before the driver's.
void set_cuda_loaded_hook(void (*hook)()) noexcept;
// Called in the child of fork() (capi/src/fork.cpp's atfork handler). If the
// parent had initialised CUDA, every CUDA call in the child is refused:
// CUDA contexts do not survive fork().
void on_fork_child() noexcept;
// True in a fork() child whose parent had initialised CUDA.
bool cuda_lost_to_fork() noexcept;
// The message for TETHER_ERROR_NO_DEVICE in that case.
const char* cuda_lost_to_fork_message() noexcept;

}  // namespace tether::core
