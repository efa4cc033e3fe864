/*
 * stream_ring.h - a ring stream's ring: the memfd its client writes input
 * into and the daemon's I/O threads read it from (docs/PROTOCOL.md, "Ring
 * streams"; docs/SECURITY.md, "Client memory").
 *
 * The ring is client memory, so everything about it is the client's claim:
 * its size is fixed by sealing it here (it can then neither shrink nor
 * grow), it is read with pread, never mapped, and each frame's claim about
 * where its input lies is checked against what the daemon knows before the
 * stream believes it.
 */
#ifndef GCD_STREAM_RING_H
#define GCD_STREAM_RING_H

#include <stddef.h>
#include <stdint.h>

#include "gc_status.h"

/* GC_OK and *size, or INVALID with why: a sealable memfd of min..max bytes, now sealed at that size. */
int gcd_stream_ring_check(int fd, uint64_t min, uint64_t max, uint64_t *size, gc_error *err);

/* The same for an output ring (docs/PROTOCOL.md, "Output rings"), which must be open for writing. */
int gcd_stream_ring_check_output(int fd, uint64_t min, uint64_t max, uint64_t *size, gc_error *err);

/*
 * GC_OK, or INVALID with why, for a frame adding length bytes at offset of
 * a ring of size bytes, to a stream that has received bytes so far of which
 * consumed are in parts: the bytes must begin exactly where the last frame's
 * ended, stay inside the ring, and not overwrite bytes not yet consumed.
 */
int gcd_stream_ring_check_frame(uint64_t size, uint64_t received, uint64_t consumed, uint64_t offset,
                                uint64_t length, gc_error *err);

/* Read len bytes of the stream's input from input offset at (the ring wraps) into buf; 0 or an errno. */
int gcd_stream_ring_read(int fd, uint64_t size, uint64_t at, uint8_t *buf, size_t len);

#endif
