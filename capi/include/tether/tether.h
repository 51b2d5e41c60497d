/*
 * tether/tether.h - the umbrella header of the tether C ABI.
 *
 * Include this one header. See docs/ (the ownership guide first) for the rules
 * every handle follows: *_create gives +1, *_retain adds one, *_release drops
 * one (NULL is a no-op), dependents retain their dependencies, and a stale
 * handle is an error (TETHER_ERROR_INVALID_HANDLE), never undefined behaviour.
 */
#ifndef TETHER_TETHER_H
#define TETHER_TETHER_H

#include "tether/common.h"
#include "tether/error.h"
#include "tether/version.h"
#include "tether/resource.h"
#include "tether/pool.h"
#include "tether/statistics.h"
#include "tether/buffer.h"
#include "tether/current.h"
#include "tether/cuda.h"
#include "tether/debug.h"
#include "tether/torch.h"
#include "tether/spec.h"
#include "tether/replay.h"
#include "tether/limiting.h"
#include "tether/tracking.h"
#include "tether/aligned.h"
#include "tether/prefetch.h"
#include "tether/arena.h"
#include "tether/binning.h"
#include "tether/fixed_size.h"
#include "tether/callback.h"
#include "tether/logging.h"
#include "tether/failure_callback.h"
#include "tether/ipc.h"

#endif /* TETHER_TETHER_H */
