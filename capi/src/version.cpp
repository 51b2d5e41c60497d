// Versions of the loaded library.
#include "internal.hpp"

extern "C" {

TETHER_API uint32_t tether_version_number(void) { return TETHER_VERSION_NUMBER; }
TETHER_API uint32_t tether_abi_version(void) { return TETHER_ABI_VERSION; }
TETHER_API const char* tether_version_string(void) {
#define TETHER_STR2(x) #x
#define TETHER_STR(x) TETHER_STR2(x)
  return TETHER_STR(TETHER_VERSION_MAJOR) "." TETHER_STR(TETHER_VERSION_MINOR) "." TETHER_STR(
      TETHER_VERSION_PATCH);
}

}  // extern "C"
