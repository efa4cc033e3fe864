/*
 * response.h - serialise frames into a connection's output buffer.
 *
 * Frames of one response are queued back to back, so responses to different
 * requests never interleave at frame level (docs/PROTOCOL.md).
 */
#ifndef GCD_RESPONSE_H
#define GCD_RESPONSE_H

#include <stdbool.h>
#include <stdint.h>

#include "conn.h"
#include "request.h"

/* Answer a Hello: status OK, or an error after which the connection closes. */
void gcd_send_welcome(gcd_conn *c, gc_status status, const char *message);

/* A one-frame error for request id (0: a connection-level error). */
void gcd_send_error(gcd_conn *c, uint64_t id, gc_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The result of a finished request: its output in as many frames as needed. */
void gcd_send_result(gcd_conn *c, const gcd_request *r);

/* Queue one Response frame as it is (streams build their own). */
void gcd_send_response(gcd_conn *c, Gpucomp__Response *resp);

/* A one-frame error answer; stream: it ends a stream (Response.stream set). */
void gcd_send_error_frame(gcd_conn *c, uint64_t id, gc_status status, bool stream, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Replies to PING and STATS. */
void gcd_send_pong(gcd_conn *c, uint64_t id);
void gcd_send_stats(gcd_conn *c, uint64_t id);

#endif
