/*
 * fd_payload.h - the zero-copy transport, daemon side.
 *
 * A request may carry its input in a memfd and name a memfd for its output
 * (docs/PROTOCOL.md). The daemon maps both instead of copying through the
 * socket. Safety against a client that shrinks a file while the daemon
 * touches its pages (which would be SIGBUS): the daemon itself adds
 * F_SEAL_SHRINK to both descriptors before mapping, and refuses descriptors
 * that cannot be sealed. Mappings come from fd_map_cache.h, so a client that
 * reuses its memfds costs no mapping work per request.
 */
#ifndef GCD_FD_PAYLOAD_H
#define GCD_FD_PAYLOAD_H

#include "request.h"

/* Seal and map in_fd as r->input (total_size bytes); takes ownership of in_fd and out_fd. */
int gcd_fd_payload_attach(gcd_request *r, int in_fd, int out_fd, gc_error *err);

/*
 * Make r->output a buffer of `size` bytes: malloc'd, or for an fd request
 * the output memfd grown to size, sealed against shrinking and mapped
 * (NULL when size is 0). The size is charged to the memory budget first:
 * GC_E_LIMIT when it does not fit.
 */
int gcd_request_alloc_output(gcd_request *r, size_t size, gc_error *err);

/* Give the output buffer (and its charge) back: a device failure reruns the request. */
void gcd_request_drop_output(gcd_request *r);

/*
 * OP_REGISTER / OP_UNREGISTER of r->in_fd for r's connection (run on a
 * worker: mapping and page-locking a large file takes milliseconds). A
 * registered file is sealed against shrinking like any other; r->backend
 * says whether its pages were page-locked for DMA (GPU) or only mapped.
 */
int gcd_fd_payload_register(gcd_request *r);

/* Unmap and close whatever the fd transport holds (called by gcd_request_free). */
void gcd_fd_payload_release(gcd_request *r);

#endif
