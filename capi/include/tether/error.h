/*
 * tether/error.h - status codes and per-thread error messages.
 *
 * Every fallible call returns a tether_status_t. TETHER_OK is 0; the other
 * values are stable and are never renumbered (new codes are only appended).
 * When a call fails it records a message for the calling thread, readable
 * with tether_last_error_message(). Successful calls leave the message alone.
 * Recording a message never allocates, so a call that fails because host
 * memory is exhausted still returns TETHER_ERROR_OUT_OF_MEMORY with its
 * message (messages are cut at 1023 bytes).
 * retain/release and plain getters never touch the message.
 */
#ifndef TETHER_ERROR_H
#define TETHER_ERROR_H

#include "tether/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tether_status {
  TETHER_OK = 0,
  /** An argument is out of range: bad alignment, unknown device, NULL out-pointer, ... */
  TETHER_ERROR_INVALID_ARGUMENT = 1,
  /** A handle was NULL where one is required, already released, of the wrong type, or forged. */
  TETHER_ERROR_INVALID_HANDLE = 2,
  /** The resource (or its upstream) could not provide the memory. */
  TETHER_ERROR_OUT_OF_MEMORY = 3,
  /** This build, resource or platform does not offer the operation. */
  TETHER_ERROR_NOT_SUPPORTED = 4,
  /**
   * No CUDA driver, no device, or a driver too old for tether; also every CUDA
   * call in the child of a fork() made after CUDA was initialised (CUDA does
   * not survive fork(); the host side of tether does).
   */
  TETHER_ERROR_NO_DEVICE = 5,
  /** A CUDA driver call failed; the message names the call and the CUresult. */
  TETHER_ERROR_CUDA = 6,
  /** The current-resource slot was locked by the application. */
  TETHER_ERROR_LOCKED = 7,
  /** An options struct is smaller than the oldest layout this library accepts. */
  TETHER_ERROR_VERSION_MISMATCH = 8,
  /** The process is exiting; the call was refused rather than risk a dead CUDA context. */
  TETHER_ERROR_SHUTTING_DOWN = 9,
  /** A bug in tether (an invariant failed). Please report it. */
  TETHER_ERROR_INTERNAL = 10
} tether_status_t;

/**
 * The message of the most recent failed tether call on this thread.
 * Never NULL ("" if no call has failed yet). Borrowed: valid until the next
 * failing tether call on this thread.
 */
TETHER_API const char* tether_last_error_message(void);

/**
 * The enumerator's name ("TETHER_ERROR_OUT_OF_MEMORY"). Any value that is not
 * an enumerator (from a newer library, negative, garbage) gives the fixed string
 * "TETHER_UNKNOWN_STATUS". Static storage, never NULL.
 */
TETHER_API const char* tether_status_name(tether_status_t status);

/** Forget this thread's last error message (tether_last_error_message() then returns ""). */
TETHER_API void tether_clear_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_ERROR_H */
