/*
 * tether/common.h - definitions shared by every tether header.
 *
 * Ownership vocabulary used throughout the headers:
 *   "+1" / "owned"   the caller receives a reference it must give back with the
 *                    matching *_release() call.
 *   "borrowed"       valid for as long as the object it was read from is alive;
 *                    call *_retain() to keep it longer.
 *   "takes"          the callee now owns one reference the caller held.
 * Nothing in the tether ABI takes ownership unless its comment says so.
 */
#ifndef TETHER_COMMON_H
#define TETHER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(TETHER_BUILDING_LIBRARY)
#    define TETHER_API __declspec(dllexport)
#  else
#    define TETHER_API __declspec(dllimport)
#  endif
#else
#  define TETHER_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The host slot of the current-resource table (memory that lives in host RAM). */
#define TETHER_DEVICE_HOST (-1)
/** "The calling thread's current CUDA device" (its current context's device, else 0). */
#define TETHER_DEVICE_CURRENT (-2)

/** Alignment used when a call passes 0: 256 bytes, the CUDA allocation granularity. */
#define TETHER_DEFAULT_ALIGNMENT 256

/**
 * A CUDA stream as a plain integer: the value of a CUstream / cudaStream_t.
 * 0 is the default (legacy) stream. Host resources ignore streams.
 */
typedef uintptr_t tether_stream_t;

/** Opaque, refcounted, checked handle to a memory resource. */
typedef struct tether_resource tether_resource_t;
/** Opaque, refcounted, checked handle to an allocation that owns its memory. */
typedef struct tether_buffer tether_buffer_t;

#ifdef __cplusplus
}
#endif
#endif /* TETHER_COMMON_H */
