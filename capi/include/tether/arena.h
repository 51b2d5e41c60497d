/*
 * tether/arena.h - the arena resource: per-thread (host) or per-stream (CUDA)
 * arenas over one global arena, for many threads without one lock.
 *
 * The global arena holds chunks from the upstream cut into superblocks; each
 * thread's (or stream's) arena takes whole superblocks and carves requests of
 * up to half a superblock out of them under its own lock. Larger requests
 * take whole superblocks from the global arena. Before reporting out of
 * memory every arena gives its wholly free superblocks back to the global
 * arena (defragmentation), where neighbours coalesce.
 */
#ifndef TETHER_ARENA_H
#define TETHER_ARENA_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of tether_arena_resource_create(). Initialise with TETHER_ARENA_OPTIONS_INIT. */
typedef struct tether_arena_options {
  uint32_t struct_size;
  /** Bytes of the global arena, all taken from upstream at creation; it never grows beyond.
      0 (default): nothing up front, grow on demand (chunks of at least 32 MiB), no limit. */
  size_t arena_size;
  /** Superblock size: a power of two from 64 KiB to 1 GiB (0: 1 MiB). */
  size_t superblock_size;
} tether_arena_options_t;

#define TETHER_ARENA_OPTIONS_INIT { sizeof(tether_arena_options_t), 0, 0 }

/**
 * Set *options to the defaults (struct_size is the caller's sizeof).
 * INVALID_ARGUMENT for NULL, VERSION_MISMATCH for a struct_size below the first published layout.
 */
TETHER_API tether_status_t tether_arena_options_init(tether_arena_options_t* options, size_t struct_size);

/** What an arena resource holds. Initialise struct_size (TETHER_ARENA_INFO_INIT). */
typedef struct tether_arena_info {
  uint32_t struct_size;
  /** Bytes held from the upstream. */
  uint64_t arena_size;
  /** Bytes of one superblock. */
  uint64_t superblock_size;
  /** Bytes in free superblocks of the global arena. */
  uint64_t global_free_bytes;
  /** Per-thread or per-stream arenas created so far. */
  uint64_t arena_count;
  /** Superblocks held by those arenas (in use or cached). */
  uint64_t arena_superblocks;
  /** Bytes of superblocks serving large requests. */
  uint64_t large_bytes;
  /** Chunks held from the upstream. */
  uint64_t chunk_count;
} tether_arena_info_t;

#define TETHER_ARENA_INFO_INIT { sizeof(tether_arena_info_t), 0, 0, 0, 0, 0, 0, 0 }

/**
 * An arena resource over `upstream` (not taken: the resource retains it
 * itself). options may be NULL for the defaults. Over a host upstream there
 * is one arena per thread and streams are ignored. Over a CUDA upstream
 * there is one arena per stream, and memory moves between streams only
 * safely: a superblock given back by a free on stream A carries an event
 * recorded on A, which the next stream to use it waits on (the host does not
 * block); superblocks collected by defragmentation, or emptied by a free on
 * another stream, are reused by other streams only after one device
 * synchronisation. A free on a stream other than the allocation's arena's
 * waits on the host for that stream (its memory is reused by the arena's
 * stream at once). tether_resource_trim() defragments and gives back wholly
 * free chunks. Frees are checked (pointer, size, alignment).
 * Errors: INVALID_ARGUMENT for a bad superblock_size; OUT_OF_MEMORY if
 * arena_size cannot be obtained. out: receives +1.
 */
TETHER_API tether_status_t tether_arena_resource_create(tether_resource_t* upstream,
                                                        const tether_arena_options_t* options,
                                                        tether_resource_t** out);

/** What an arena resource holds; NOT_SUPPORTED for other resources. */
TETHER_API tether_status_t tether_arena_get_info(tether_resource_t* resource, tether_arena_info_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_ARENA_H */
