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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gc_status.h"

struct gcd_fd_map;

/*
 * A request's input memfd: in_fd must name another file than out_fd, be a
 * sealable memfd (sealed here) and hold size bytes; it is mapped from
 * owner's cache into *map (left NULL for size 0).
 */
int gcd_fd_payload_map_input(int in_fd, int out_fd, uint64_t size, const void *owner, struct gcd_fd_map **map,
                             gc_error *err);

/*
 * A request's output memfd grown to size, sealed against shrinking and
 * mapped from owner's cache into *map (left NULL for size 0).
 */
int gcd_fd_payload_map_output(int out_fd, size_t size, const void *owner, struct gcd_fd_map **map, gc_error *err);

/*
 * OP_REGISTER (unregister false) or OP_UNREGISTER of fd for owner (run on
 * a worker: mapping and page-locking a large file takes milliseconds). A
 * registered file is sealed against shrinking like any other; *pinned says
 * whether its pages were page-locked for DMA (GPU) or only mapped.
 */
int gcd_fd_payload_register(int fd, bool unregister, uint64_t size, const void *owner, bool *pinned,
                            gc_error *err);

#endif
