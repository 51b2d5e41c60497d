/*
 * tether/logging.h - an adaptor that logs every allocate and free.
 *
 * One CSV line per event, after a header line:
 *
 *   time_ns,thread,action,pointer,size,stream,status
 *
 * time_ns: nanoseconds since the adaptor was created (a monotonic clock);
 * thread: the OS thread id of the caller; action: "allocate" or "free";
 * pointer: the address in hex ("0x0" for a failed allocation); size: the
 * bytes asked for (or freed); stream: the stream value as an unsigned decimal
 * integer (0: the default stream); status: the name of the resulting status
 * ("TETHER_OK", "TETHER_ERROR_OUT_OF_MEMORY", ...). Failed allocations and
 * refused frees are logged too. Allocations of size 0 never reach the adaptor
 * and are not logged.
 */
#ifndef TETHER_LOGGING_H
#define TETHER_LOGGING_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Receives one log line: `line` is NUL-terminated, `length` bytes long,
 * without a newline, and borrowed for the duration of the call. Called on the
 * thread that allocated or freed, with no tether lock held, possibly from
 * several threads at once; it must not use the logging adaptor.
 */
typedef void (*tether_log_callback_t)(const char* line, size_t length, void* user);

/** Options of tether_logging_adaptor_create(). Initialise with TETHER_LOGGING_OPTIONS_INIT. */
typedef struct tether_logging_options {
  uint32_t struct_size;
  /** File to write the log to (created, or truncated if it exists), or NULL. Copied. */
  const char* path;
  /** Function that receives every line, or NULL. path, callback or both must be given. */
  tether_log_callback_t callback;
  /** Passed to callback and destroy. */
  void* user;
  /**
   * Optional: called exactly once with `user` when the adaptor is destroyed
   * (and never if creation fails: the caller keeps `user` then).
   */
  void (*destroy)(void* user);
} tether_logging_options_t;

#define TETHER_LOGGING_OPTIONS_INIT { sizeof(tether_logging_options_t), NULL, NULL, NULL, NULL }

/**
 * Set *options to the defaults (no path, no callback). struct_size is the caller's sizeof.
 * Errors: INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a too small struct_size.
 */
TETHER_API tether_status_t tether_logging_options_init(tether_logging_options_t* options, size_t struct_size);

/**
 * An adaptor that forwards to `upstream` (retained by the adaptor) and logs
 * every allocate/free through it to options->path and/or options->callback
 * (the header line first). The file is flushed by tether_logging_adaptor_flush()
 * and closed (so flushed) when the adaptor is destroyed.
 * Errors: INVALID_HANDLE for a bad upstream; INVALID_ARGUMENT if options is
 * NULL, if neither path nor callback is given, or if the file cannot be
 * opened (the message names the path). out: receives +1.
 */
TETHER_API tether_status_t tether_logging_adaptor_create(tether_resource_t* upstream,
                                                         const tether_logging_options_t* options,
                                                         tether_resource_t** out);

/**
 * Write out the lines the log file buffers. A no-op for a callback-only adaptor.
 * A write that fails (a full disk, a closed pipe, EIO) drops the lines it
 * carried, which tether_logging_adaptor_get_info() counts as lost_lines. The
 * failure is never forgotten: from then on every flush returns INTERNAL with
 * a message naming the path, the reason and the lines lost so far, until a
 * flush writes pending lines successfully again. When the adaptor is destroyed
 * the log is flushed once more, and a log that lost lines no flush reported is
 * reported on stderr. Callback lines are never lost (the callback runs at once).
 * Errors: INVALID_HANDLE; NOT_SUPPORTED if `resource` is not a logging adaptor;
 * INTERNAL as above.
 */
TETHER_API tether_status_t tether_logging_adaptor_flush(tether_resource_t* resource);

/** What a logging adaptor wrote and lost. Initialise struct_size (TETHER_LOGGING_INFO_INIT). */
typedef struct tether_logging_info {
  uint32_t struct_size;
  /** Lines logged to the file so far, the header included (0 without a path). */
  uint64_t lines;
  /** Of those, the lines a failed write dropped. */
  uint64_t lost_lines;
  /** The errno of a write failure that no successful flush has cleared yet, else 0. */
  int32_t error;
} tether_logging_info_t;

#define TETHER_LOGGING_INFO_INIT { sizeof(tether_logging_info_t), 0, 0, 0 }

/**
 * Write the adaptor's counts into *out (struct_size set by the caller). Borrows `resource`.
 * Errors: INVALID_HANDLE; NOT_SUPPORTED if `resource` is not a logging adaptor;
 * INVALID_ARGUMENT for a NULL out; VERSION_MISMATCH for a too small struct_size.
 */
TETHER_API tether_status_t tether_logging_adaptor_get_info(tether_resource_t* resource, tether_logging_info_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_LOGGING_H */
