// tether/cpp/common.hpp - constants and versions of the headers and of the loaded library.
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_COMMON_HPP
#define TETHER_CPP_COMMON_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "tether/cpp/error.hpp"
#include "tether/tether.h"

namespace tether {

/// The host slot of the current-resource table / "host memory" as a device id.
inline constexpr int device_host = TETHER_DEVICE_HOST;
/// "The calling thread's current CUDA device" as a device id.
inline constexpr int device_current = TETHER_DEVICE_CURRENT;
/// Alignment used when a call passes 0.
inline constexpr std::size_t default_alignment = TETHER_DEFAULT_ALIGNMENT;

/// TETHER_VERSION_NUMBER of the headers this code was compiled against.
inline constexpr std::uint32_t header_version_number = TETHER_VERSION_NUMBER;
/// TETHER_ABI_VERSION of the headers this code was compiled against.
inline constexpr std::uint32_t header_abi_version = TETHER_ABI_VERSION;

/// The loaded library's version (MAJOR * 10000 + MINOR * 100 + PATCH).
inline std::uint32_t version_number() noexcept { return tether_version_number(); }
/// The loaded library's ABI version.
inline std::uint32_t abi_version() noexcept { return tether_abi_version(); }
/// The loaded library's "MAJOR.MINOR.PATCH".
inline const char* version_string() noexcept { return tether_version_string(); }
/// Throw version_mismatch_error if the loaded library's ABI differs from the headers'.
inline void check_abi_version() {
  if (abi_version() != header_abi_version)
    throw version_mismatch_error(TETHER_ERROR_VERSION_MISMATCH,
                                 "libtether ABI version " + std::to_string(abi_version()) +
                                     " does not match the headers' " + std::to_string(header_abi_version));
}

}  // namespace tether

#endif  // TETHER_CPP_COMMON_HPP
