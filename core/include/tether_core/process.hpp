// Process-exit awareness: once exit() has begun (atexit handlers, static
// destructors), tether makes no CUDA calls; memory still held is leaked on
// purpose rather than freed into a possibly dead CUDA context.
#pragma once

namespace tether::core {

bool process_is_exiting() noexcept;
// For tests: mark the process as exiting now.
void mark_process_exiting() noexcept;

}  // namespace tether::core
