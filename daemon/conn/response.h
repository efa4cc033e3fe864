/*
 * response.h - serialise frames into a connection's output buffer.
 *
 * Frames of one response are queued back to back, so responses to different
 * requests never interleave at frame level (docs/PROTOCOL.md). This file
 * knows a connection only as its output (gcd_output), so connections and
 * streams both build on it.
 */
#ifndef GCD_RESPONSE_H
#define GCD_RESPONSE_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/bufferevent.h>

#include "request.h"
#include "settings.h"

struct gcd_server;

/* A client leaving more answers than this unread is not read from (conn.c), and its
 * streams start no more parts (stream_session.c), until they drain. */
#define GCD_OUTPUT_HIGH_WATER ((size_t)64 << 20)

/* Where a connection's answers are queued (conn.h holds one, its streams point to it). */
typedef struct gcd_output {
    struct bufferevent *bev;              /* the socket: answers go to its output buffer */
    const gcd_config *cfg;                /* max_frame: the largest frame sent */
    void (*broken)(struct gcd_output *o); /* queueing failed: the connection closes */
} gcd_output;

/* Bytes of answers queued and not yet taken by the kernel. */
size_t gcd_output_queued(const gcd_output *o);

/* Answer a Hello: status OK, or an error after which the connection closes; with the
 * stream window and streams per connection the daemon announces. */
void gcd_send_welcome(gcd_output *o, gc_status status, const char *message, uint64_t stream_window,
                      uint32_t max_streams);

/* A one-frame error for request id (0: a connection-level error). */
void gcd_send_error(gcd_output *o, uint64_t id, gc_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The result of a finished request: its output in as many frames as needed. */
void gcd_send_result(gcd_output *o, const gcd_request *r);

/* Queue one Response frame as it is (streams build their own). */
void gcd_send_response(gcd_output *o, Gpucomp__Response *resp);

/*
 * Queue one Response frame whose payload is referenced, not copied: resp
 * (its payload unset) is packed, and the frame's payload field is payload.
 * done(payload, len, arg) runs once the frame has been written or dropped,
 * also when queueing fails (false: the connection is closing).
 */
typedef void (*gcd_payload_done_fn)(const void *payload, size_t len, void *arg);
bool gcd_send_response_ref(gcd_output *o, Gpucomp__Response *resp, const uint8_t *payload, size_t len,
                           gcd_payload_done_fn done, void *arg);

/* A one-frame error answer; stream: it ends a stream (Response.stream set). */
void gcd_send_error_frame(gcd_output *o, uint64_t id, gc_status status, bool stream, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Replies to PING and STATS (the server's counters). */
void gcd_send_pong(gcd_output *o, uint64_t id);
void gcd_send_stats(gcd_output *o, uint64_t id, const struct gcd_server *s);

#endif
