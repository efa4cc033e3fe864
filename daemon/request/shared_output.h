/*
 * shared_output.h - a stream part's output buffer, shared by the request
 * whose engine fills it and by the frames that carry it to the client
 * (evbuffer references): the last of them frees it.
 *
 * A part sends its output while its engine still decodes (stream_session.c), so
 * the buffer outlives whichever of the request and the frames ends first.
 * The first reference is the request's, taken on the worker that makes
 * the buffer before the loop ever sees it; every other reference is taken
 * and dropped on the loop thread.
 */
#ifndef GCD_SHARED_OUTPUT_H
#define GCD_SHARED_OUTPUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gcd_shared_output {
    uint8_t *buf;
    uid_t uid; /* whose output it is: the freed buffer is kept for them (part_cache.h) */
    atomic_size_t refs;
} gcd_shared_output;

/*
 * Share buf (malloc'd; given to gcd_part_cache_free for uid with the last
 * reference), one reference held. NULL: out of memory, buf not taken.
 */
gcd_shared_output *gcd_shared_output_wrap(uint8_t *buf, uid_t uid);

/* n more references. */
void gcd_shared_output_ref(gcd_shared_output *o, size_t n);

/* Drop one reference (NULL: nothing). */
void gcd_shared_output_unref(gcd_shared_output *o);

/* gcd_shared_output_unref in the shape of an evbuffer reference's cleanup (arg: the shared output). */
void gcd_shared_output_done(const void *data, size_t len, void *arg);

#endif
