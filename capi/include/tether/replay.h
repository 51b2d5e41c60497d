/*
 * tether/replay.h - replay an allocation trace against any resource, timed.
 *
 * What the `tether bench` and `tether replay` commands run: a sequence of
 * allocate/free operations (from a logging adaptor's CSV, or a generated
 * pattern) is replayed against a resource stack on one or more threads, each
 * operation on a stream the caller supplies, and the run is measured: elapsed
 * time, peak live bytes, peak bytes held from upstream (through a statistics
 * adaptor the caller placed above the stack's leaf), and every allocation that
 * failed. The thread and stream structure of the trace is kept: operations of
 * replay thread t run on thread t in trace order; a free whose allocation was
 * made on another thread waits until that allocation has happened; a free
 * whose allocation failed is skipped (and counted). The memory is never
 * touched. Not a hot path: an engine for tools and benchmarks.
 */
#ifndef TETHER_REPLAY_H
#define TETHER_REPLAY_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What an operation does. Values are stable. */
typedef enum tether_replay_action {
  TETHER_REPLAY_ALLOCATE = 1,
  TETHER_REPLAY_DEALLOCATE = 2
} tether_replay_action_t;

/** One operation of a trace. A plain array element (no struct_size): its layout is fixed. */
typedef struct tether_replay_op {
  /** The allocation this operation makes or frees: an index below the trace's slot count. */
  uint64_t slot;
  /** Bytes to allocate (DEALLOCATE: ignored; the allocation's own size is freed). */
  uint64_t size;
  /** A tether_replay_action_t value. */
  uint32_t action;
  /** The replay thread that runs it (below tether_replay_options_t.threads). */
  uint32_t thread;
  /** Index into tether_replay_options_t.streams (0 when no streams are given). */
  uint32_t stream;
  /** Zero. */
  uint32_t reserved;
} tether_replay_op_t;

/** A point of the timeline (tether_replay_options_t.samples). */
typedef struct tether_replay_sample {
  /** Operations done when it was taken (across threads). */
  uint64_t ops_done;
  /** Nanoseconds since the replay started. */
  uint64_t time_ns;
  /** Bytes allocated by the replay and not yet freed. */
  uint64_t live_bytes;
  /** current_bytes of options.footprint (what the stack holds from upstream), or 0. */
  uint64_t footprint_bytes;
} tether_replay_sample_t;

/** Options of tether_replay_run(). Initialise with TETHER_REPLAY_OPTIONS_INIT. */
typedef struct tether_replay_options {
  uint32_t struct_size;
  /** Replay threads (1 or more; 0 means 1). */
  uint32_t threads;
  /** Allocation slots the trace uses (every op's slot is below it). */
  uint64_t slot_count;
  /** The streams ops name by index, borrowed for the call; NULL: every op on stream 0. */
  const tether_stream_t* streams;
  size_t stream_count;
  /** A statistics adaptor inside the stack whose current/peak bytes are "held from upstream", or NULL. */
  tether_resource_t* footprint;
  /** Record a timeline sample every this many operations (0: none), into samples[0..sample_capacity). */
  uint64_t sample_every;
  tether_replay_sample_t* samples;
  size_t sample_capacity;
  /** Indices (into ops) of the allocations that failed, into failed_ops[0..failed_capacity). */
  uint64_t* failed_ops;
  size_t failed_capacity;
} tether_replay_options_t;

#define TETHER_REPLAY_OPTIONS_INIT { sizeof(tether_replay_options_t), 1, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0 }

/** Set *options to the defaults (see tether_pool_options_init for struct_size). */
TETHER_API tether_status_t tether_replay_options_init(tether_replay_options_t* options, size_t struct_size);

/** What a replay measured. Initialise struct_size (TETHER_REPLAY_RESULT_INIT). */
typedef struct tether_replay_result {
  uint32_t struct_size;
  /** Wall time of the whole replay (all threads), in nanoseconds. */
  uint64_t elapsed_ns;
  /** Allocations made, frees made. */
  uint64_t allocations;
  uint64_t deallocations;
  /** Allocations that failed (OUT_OF_MEMORY or any other error) and frees skipped because of them. */
  uint64_t failed_allocations;
  uint64_t skipped_deallocations;
  /** Highest bytes live at once (allocated by the replay, not yet freed). */
  uint64_t peak_live_bytes;
  /** peak_bytes of options.footprint during the replay (its peak is reset at the start), or 0. */
  uint64_t peak_footprint_bytes;
  /** Entries written to options.samples and options.failed_ops. */
  uint64_t samples_written;
  uint64_t failed_written;
} tether_replay_result_t;

#define TETHER_REPLAY_RESULT_INIT { sizeof(tether_replay_result_t), 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * Replay `ops[0..count)` against `resource` (borrowed) and fill *out. A failed
 * allocation is recorded, not an error; memory still live at the end of the
 * trace is freed before returning (and counted as deallocations).
 * Errors: INVALID_HANDLE; INVALID_ARGUMENT for NULL ops with count > 0, an op
 * whose slot, thread, stream or action is out of range, an allocate of a slot
 * that is live or a free of a slot that is not (checked before anything runs:
 * the message names the op's index); OUT_OF_MEMORY for the engine's own tables.
 */
TETHER_API tether_status_t tether_replay_run(tether_resource_t* resource, const tether_replay_op_t* ops, size_t count,
                                             const tether_replay_options_t* options, tether_replay_result_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_REPLAY_H */
