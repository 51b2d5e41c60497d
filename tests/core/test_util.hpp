// Small helpers shared by the core unit tests.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "tether_core/error.hpp"

namespace tether::test {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;

// Success iff f() throws a tether::core::Error with `status`.
template <class F>
::testing::AssertionResult fails_with(tether_status_t status, F&& f) {
  try {
    f();
  } catch (const core::Error& e) {
    if (e.status() == status) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "threw status " << e.status() << " (wanted " << status
                                         << "): " << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-tether exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw (wanted status " << status << ")";
}

// The message of the tether::core::Error f() throws ("" if none).
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tether::test
