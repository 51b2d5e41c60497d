/*
 * tether/version.h - library and ABI versions.
 *
 * TETHER_ABI_VERSION equals the shared library's SOVERSION. It changes only
 * when an existing declaration changes incompatibly; appending functions or
 * appending fields to option structs does not change it.
 */
#ifndef TETHER_VERSION_H
#define TETHER_VERSION_H

#include "tether/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TETHER_VERSION_MAJOR 0
#define TETHER_VERSION_MINOR 1
#define TETHER_VERSION_PATCH 0
/** MAJOR * 10000 + MINOR * 100 + PATCH of the headers compiled against. */
#define TETHER_VERSION_NUMBER 100
#define TETHER_ABI_VERSION 0

/** The version of the loaded library, as TETHER_VERSION_NUMBER encodes it. */
TETHER_API uint32_t tether_version_number(void);
/** The ABI version of the loaded library; compare with TETHER_ABI_VERSION. */
TETHER_API uint32_t tether_abi_version(void);
/** "MAJOR.MINOR.PATCH" of the loaded library. Static storage. */
TETHER_API const char* tether_version_string(void);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_VERSION_H */
