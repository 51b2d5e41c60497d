/*
 * tether/tracking.h - the tracking adaptor: outstanding allocations and a leak report.
 *
 * The adaptor forwards to its upstream and records every allocation it handed
 * out and has not taken back: pointer, size, alignment, stream, the id of the
 * allocating thread (the kernel's thread id, gettid(); Python's
 * threading.get_native_id()) and, if options.capture_stacks is set, the call
 * stack (glibc backtrace(); symbolised only when read). Without stack capture
 * a call costs one short critical section on one of 16 address-sharded locks.
 * It accepts frees only of memory it handed out (INVALID_ARGUMENT otherwise,
 * nothing changed). Thread-safe; works over host and CUDA upstreams.
 *
 * Text out-parameters (report, stack) follow one rule: the text and its
 * terminating NUL are written to `buffer` as far as `capacity` allows (always
 * NUL-terminated when capacity > 0), and *out_needed receives the size the
 * whole text needs, NUL included. Pass buffer = NULL, capacity = 0 to ask for
 * the size; if *out_needed > capacity the text was cut short - call again with
 * a larger buffer (the records may have changed meanwhile).
 */
#ifndef TETHER_TRACKING_H
#define TETHER_TRACKING_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_tracking_adaptor_create(). Initialise with TETHER_TRACKING_OPTIONS_INIT. */
typedef struct tether_tracking_options {
  uint32_t struct_size;
  /** Nonzero: capture each allocation's call stack (costs a backtrace() per allocation). Default 0. */
  int32_t capture_stacks;
} tether_tracking_options_t;

#define TETHER_TRACKING_OPTIONS_INIT { sizeof(tether_tracking_options_t), 0 }

/** One outstanding allocation. Fields are only ever appended. */
typedef struct tether_tracking_record {
  uint32_t struct_size;
  /** The memory (owned by whoever allocated it; the record does not keep it). */
  void* ptr;
  /** Bytes requested. */
  size_t size;
  /** Alignment requested (0 was recorded as TETHER_DEFAULT_ALIGNMENT). */
  size_t alignment;
  /** The stream the allocation was ordered on. */
  tether_stream_t stream;
  /** The allocating thread's id (gettid()). */
  uint64_t thread_id;
  /** 1 for the adaptor's first allocation, 2 for the next, ...: allocation order. */
  uint64_t sequence;
  /** Frames captured (0 without stack capture), libtether's own included; read the stack with tether_tracking_adaptor_get_stack(). */
  uint32_t stack_depth;
} tether_tracking_record_t;

#define TETHER_TRACKING_RECORD_INIT { sizeof(tether_tracking_record_t), NULL, 0, 0, 0, 0, 0, 0 }

/**
 * Set *options to the defaults; struct_size is the caller's sizeof.
 * INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a size below the first layout.
 */
TETHER_API tether_status_t tether_tracking_options_init(tether_tracking_options_t* options, size_t struct_size);

/**
 * A tracking adaptor over `upstream` (not taken: the adaptor retains it).
 * options may be NULL for the defaults (no stack capture).
 * out: receives +1.
 */
TETHER_API tether_status_t tether_tracking_adaptor_create(tether_resource_t* upstream,
                                                          const tether_tracking_options_t* options,
                                                          tether_resource_t** out);

/**
 * The outstanding allocations, oldest first. *out_count receives how many
 * there are; the first min(that, capacity) are written to `records`.
 * Count query: records = NULL, capacity = 0. The caller owns `records` and
 * sets records[0].struct_size (TETHER_TRACKING_RECORD_INIT): that is the
 * stride of the array, and every element written gets it as struct_size.
 * Errors: NOT_SUPPORTED if `resource` is not a tracking adaptor;
 * INVALID_ARGUMENT for NULL out_count or NULL records with capacity > 0;
 * VERSION_MISMATCH for a struct_size below the first layout.
 */
TETHER_API tether_status_t tether_tracking_adaptor_get_outstanding(tether_resource_t* resource,
                                                                   tether_tracking_record_t* records,
                                                                   size_t capacity, size_t* out_count);

/**
 * The call stack captured for the outstanding allocation at `ptr`, one frame
 * per line ("  #0 binary(function+0x1f) [0x...]"), innermost first, starting
 * at the first frame outside libtether (its own allocate frames are left out);
 * "" without stack capture. Text rule at the top of this file.
 * Errors: NOT_SUPPORTED (not a tracking adaptor); INVALID_ARGUMENT if `ptr` is
 * not outstanding, for NULL out_needed, or NULL buffer with capacity > 0.
 */
TETHER_API tether_status_t tether_tracking_adaptor_get_stack(tether_resource_t* resource, const void* ptr,
                                                             char* buffer, size_t capacity, size_t* out_needed);

/**
 * A leak report, oldest allocation first:
 *
 *     tether tracking adaptor: 2 outstanding allocations, 5120 bytes
 *     #1 ptr=0x7f12... size=4096 alignment=256 stream=0x0 thread=4242
 *       #0 ./app(main+0x2a) [0x55...]     <- stack lines, if captured
 *     #3 ptr=0x7f13... size=1024 alignment=256 stream=0x0 thread=4243
 *
 * Text rule at the top of this file. Errors: NOT_SUPPORTED (not a tracking
 * adaptor); INVALID_ARGUMENT for NULL out_needed, or NULL buffer with capacity > 0.
 */
TETHER_API tether_status_t tether_tracking_adaptor_report(tether_resource_t* resource, char* buffer,
                                                          size_t capacity, size_t* out_needed);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_TRACKING_H */
