/*
 * tether/debug.h - census and leak reporting, for tests and diagnostics.
 */
#ifndef TETHER_DEBUG_H
#define TETHER_DEBUG_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tether_object_type {
  TETHER_OBJECT_ANY = 0,
  TETHER_OBJECT_RESOURCE = 1,
  TETHER_OBJECT_BUFFER = 2
} tether_object_type_t;

/**
 * Live handles of `type` in the process (referenced by anyone: callers, the
 * table, other objects). Resources the table created as defaults count too.
 */
TETHER_API size_t tether_debug_live_objects(tether_object_type_t type);

/**
 * Resources whose last handle was released while raw allocations were still
 * outstanding: tether keeps them (and their memory) rather than free memory
 * behind the caller's back. This is how many there are now.
 */
TETHER_API size_t tether_debug_orphaned_resources(void);

/**
 * Bytes of raw allocations outstanding in orphaned resources.
 */
TETHER_API uint64_t tether_debug_orphaned_bytes(void);

/**
 * Enable (nonzero) or disable a report on stderr, at process exit, of orphaned
 * resources and live buffers. Also enabled by the environment variable
 * TETHER_LEAK_REPORT=1.
 */
TETHER_API void tether_debug_set_leak_report(int enable);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_DEBUG_H */
