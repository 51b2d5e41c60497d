/*
 * tether_internal.h - entry points of libtether for tether's own Python
 * extension (python/src/tether_py.c), NOT part of the public API or ABI.
 *
 * Not installed and not in the cdef. They carry the tether_ prefix only
 * because the linker version script (capi/tether.map) exports nothing else;
 * the prefix tether_internal_ marks them (ci/abi.sh leaves them out of the ABI
 * description: abi/internal.suppr), and tests/python/test_cdef.py
 * allows exactly the functions declared here besides the public ones. They
 * may change or go in any release; nothing but the extension built with the
 * same libtether may call them.
 *
 * The quick paths. Each does what the public call named in its comment does,
 * but only where that cannot wait for anything: it takes no lock it cannot
 * try (or a leaf lock whose holders never wait; see buffer.cpp), makes no
 * CUDA call, calls no upstream and no callback, destroys no resource, and
 * enters the fork gate without waiting (registry::try_enter). So a caller
 * may keep Python's GIL around it: nothing it could wait for can be waiting
 * for the GIL. Whenever the public call would need more, it refuses
 * (TETHER_QUICK_REFUSED: nothing changed, no error recorded) and the caller
 * makes the public call instead - with the GIL released - which also reports
 * every error. Core's Resource::try_allocate_quick() (resource.hpp) has the
 * rules of the allocation itself; only a pool has a quick path.
 */
#ifndef TETHER_INTERNAL_H
#define TETHER_INTERNAL_H

#include "tether/tether.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TETHER_QUICK_REFUSED = 0, /* nothing changed: make the public call */
  TETHER_QUICK_DONE = 1,    /* done, as the public call would have done it */
  TETHER_QUICK_FINISH = 2   /* begun: finish with the function the comment names, then (create) the public call */
};

/* tether_buffer_create(resource, any device, size, stream) with a resource
   given (not NULL) and size > 0. DONE: *out is the new buffer (+1). FINISH
   (a race with a release of the resource's last handle, or no memory for
   the handle): *out is a half-made buffer that must be given to
   tether_internal_buffer_discard() (which may block), then the public call
   made. REFUSED: *out is untouched. */
TETHER_API int tether_internal_buffer_create_quick(tether_resource_t* resource, size_t size,
                                                   tether_stream_t stream, void** out);
TETHER_API void tether_internal_buffer_discard(void* unfinished);

/* tether_buffer_release(buffer) (NULL: DONE, a no-op). Refused unless the
   handle is live; where this was the buffer's last reference, also unless
   the buffer is unpinned, never exported (IPC), has no recorded streams,
   its memory goes back through its resource's quick path, and the
   resource's handle keeps another reference (the release must not destroy
   the resource). FINISH: the reference is dropped (the handle is dead), but
   the buffer could not be destroyed without waiting: call
   tether_internal_buffer_release_finish(buffer), which may block. */
TETHER_API int tether_internal_buffer_release_quick(tether_buffer_t* buffer);
TETHER_API void tether_internal_buffer_release_finish(tether_buffer_t* buffer);

/* tether_resource_allocate(): DONE with *out (size > 0). */
TETHER_API int tether_internal_allocate_quick(tether_resource_t* resource, size_t size, size_t alignment,
                                              tether_stream_t stream, void** out);
/* tether_resource_deallocate(). */
TETHER_API int tether_internal_deallocate_quick(tether_resource_t* resource, void* ptr, size_t size,
                                                size_t alignment, tether_stream_t stream);

/* tether_current_resource_get(device, out): DONE with *out (+1). Refused
   when the slot is unset (its default would be made now), another thread
   holds the slot, or the public call would fail. */
TETHER_API int tether_internal_current_resource_get_quick(int device, tether_resource_t** out);
/* tether_resource_release(resource) (NULL: DONE, a no-op), unless this is
   the handle's last reference (the release would destroy the resource) or
   the handle is not live. */
TETHER_API int tether_internal_resource_release_quick(tether_resource_t* resource);

#ifdef __cplusplus
}
#endif

#endif /* TETHER_INTERNAL_H */
