// core::status_name: the one table of status names behind tether_status_name()
// and the logging adaptor's status column (replay and users' scripts parse
// those names, so they are part of the interface).
#include <gtest/gtest.h>

#include <climits>

#include "tether_core/error.hpp"

namespace {

using tether::core::status_name;

TEST(StatusName, EveryStatusByItsEnumeratorName) {
  EXPECT_STREQ(status_name(TETHER_OK), "TETHER_OK");
  EXPECT_STREQ(status_name(TETHER_ERROR_INVALID_ARGUMENT), "TETHER_ERROR_INVALID_ARGUMENT");
  EXPECT_STREQ(status_name(TETHER_ERROR_INVALID_HANDLE), "TETHER_ERROR_INVALID_HANDLE");
  EXPECT_STREQ(status_name(TETHER_ERROR_OUT_OF_MEMORY), "TETHER_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(status_name(TETHER_ERROR_NOT_SUPPORTED), "TETHER_ERROR_NOT_SUPPORTED");
  EXPECT_STREQ(status_name(TETHER_ERROR_NO_DEVICE), "TETHER_ERROR_NO_DEVICE");
  EXPECT_STREQ(status_name(TETHER_ERROR_CUDA), "TETHER_ERROR_CUDA");
  EXPECT_STREQ(status_name(TETHER_ERROR_LOCKED), "TETHER_ERROR_LOCKED");
  EXPECT_STREQ(status_name(TETHER_ERROR_VERSION_MISMATCH), "TETHER_ERROR_VERSION_MISMATCH");
  EXPECT_STREQ(status_name(TETHER_ERROR_SHUTTING_DOWN), "TETHER_ERROR_SHUTTING_DOWN");
  EXPECT_STREQ(status_name(TETHER_ERROR_INTERNAL), "TETHER_ERROR_INTERNAL");
}

TEST(StatusName, AnyOtherIntIsUnknown) {
  for (int v : {-1, 11, 12, 100000, INT_MIN, INT_MAX}) EXPECT_STREQ(status_name(v), "TETHER_UNKNOWN_STATUS") << v;
}

}  // namespace
