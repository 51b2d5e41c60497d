/*
 * tether/spec.h - resource specs: a resource stack named by one string.
 *
 * A spec names a resource and its parameters, nesting upstreams, e.g.
 *
 *   statistics(pool(cuda(device=0), initial_size=80%, maximum_size=100GiB))
 *   pool(host, initial_size=64MiB)
 *
 * Grammar (whitespace between tokens is ignored):
 *
 *   spec      := resource
 *   resource  := NAME [ "(" [ argument ("," argument)* ] ")" ]
 *   argument  := [ NAME "=" ] value
 *   value     := resource | size | integer | boolean
 *
 * NAME is a resource name as tether_resource_get_name() gives it ("host",
 * "pool", "statistics", "cuda", "async", "managed", "pinned_host", ...) and
 * parameter names are the fields of the resource's options struct (the
 * Python keyword names). One positional argument is allowed, first: the
 * upstream of a pool or adaptor, or the device of a CUDA resource. Sizes are
 * written as in Python: 4096, 64MiB, "1.5 GiB", 100MB (binary units are
 * powers of 1024, decimal ones of 1000), or a percentage of the total memory of
 * the resource's device (80%; device resources and stacks over them only).
 * A value may be quoted ("1.5 GiB" or '1.5 GiB'). Booleans: true/false/1/0. A CUDA resource without a device takes the
 * calling thread's current device, or the slot's device when built for the
 * current-resource table (below). The full grammar and every resource's
 * parameters: docs/specs.rst.
 *
 * The environment. When a slot of the current-resource table is unset at its
 * first tether_current_resource_get(), its default is built from a spec in the
 * environment, if there is one: TETHER_RESOURCE_HOST for the host slot;
 * TETHER_RESOURCE_<N> for device N, else TETHER_RESOURCE for every device slot.
 * Without one, the default is a plain host or CUDA resource. A spec that does
 * not parse, cannot be built or does not suit the slot makes every get of that
 * slot fail (INVALID_ARGUMENT naming the variable, the position and the token;
 * reported once on stderr) until the variable is fixed or a resource is set:
 * never a crash and never a silent fallback. Nothing is read at load time.
 */
#ifndef TETHER_SPEC_H
#define TETHER_SPEC_H

#include "tether/common.h"
#include "tether/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Build the resource stack that `spec` (a NUL-terminated string, at most 4096
 * bytes) names. *out receives +1 on the outermost resource; it retains its
 * upstreams, so the caller owns exactly one reference.
 * Errors: INVALID_ARGUMENT for a NULL argument or a spec that does not parse,
 * names an unknown resource or parameter, or has a bad value; the message
 * names the position and the token ("spec:23: unknown parameter 'initial' of
 * pool"). Any error of the create functions it calls (OUT_OF_MEMORY,
 * NO_DEVICE, ...) with the position of the resource that failed. *out is NULL
 * on error and nothing is leaked.
 */
TETHER_API tether_status_t tether_resource_create_from_spec(const char* spec, tether_resource_t** out);

/**
 * Write a spec naming `resource`'s whole stack (upstreams included) into
 * `buffer`: building it with tether_resource_create_from_spec() gives an
 * equivalent new stack. Parameters at their defaults are left out; sizes are
 * written in bytes or exact binary units. *out_length (required) receives the
 * spec's length without the terminating NUL. With buffer NULL and capacity 0
 * only the length is reported. Otherwise capacity must exceed the length
 * (INVALID_ARGUMENT naming the size needed, buffer untouched); the spec is then
 * written NUL-terminated. Borrows `resource`; the caller owns `buffer`.
 */
TETHER_API tether_status_t tether_resource_get_spec(tether_resource_t* resource, char* buffer, size_t capacity,
                                                    size_t* out_length);

/**
 * Read `text` (NUL-terminated) as a size, in the grammar of a spec's size
 * parameters, into *out: a whole number of bytes given as digits with an
 * optional decimal point and an optional unit, B, KiB/MiB/GiB/TiB/PiB (powers
 * of 1024) or kB/MB/GB/TB/PB (powers of 1000), case-insensitive, with optional
 * spaces between ("4096", "64 MiB", "1.5GiB", "100 MB"), or a percentage of a
 * device's total memory, rounded down ("80%", "12.5 %"). ASCII white space
 * around the text is ignored. `device` is used by a percentage only: a CUDA
 * device id, TETHER_DEVICE_CURRENT (the calling thread's device), or
 * TETHER_DEVICE_HOST (a percentage is refused). Language bindings read sizes
 * through this function, so every layer accepts the same strings.
 * Errors (*out is 0): INVALID_ARGUMENT for a NULL argument, text longer than
 * 64 characters, text that is not a size (the message quotes it and says why:
 * unknown unit, not a whole number of bytes, does not fit in 64 bits, more
 * than 100%), or a percentage with TETHER_DEVICE_HOST or a bad device id;
 * NO_DEVICE for a percentage without a CUDA driver or device.
 */
TETHER_API tether_status_t tether_parse_size(const char* text, int device, size_t* out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_SPEC_H */
