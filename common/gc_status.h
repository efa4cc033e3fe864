/*
 * gc_status.h - status codes and error reporting shared by every layer.
 *
 * The numeric values are part of the wire protocol (proto/gpucomp.proto,
 * enum Status) and of the public client API (libclient/gpucomp.h,
 * GPUCOMP_E_*): never renumber, only append.
 */
#ifndef GC_STATUS_H
#define GC_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gc_status {
    GC_OK = 0,
    GC_E_INVALID = 1,     /* invalid argument or option */
    GC_E_CORRUPT = 2,     /* input is not a valid stream of the codec */
    GC_E_TRUNCATED = 3,   /* input ends before the stream does */
    GC_E_CRC = 4,         /* checksum mismatch */
    GC_E_LIMIT = 5,       /* a size limit (frame, request, output) was exceeded */
    GC_E_NOMEM = 6,       /* out of memory (or memory budget) */
    GC_E_UNSUPPORTED = 7, /* unknown codec, operation or protocol version */
    GC_E_PROTOCOL = 8,    /* malformed protocol frame or message sequence */
    GC_E_IO = 9,          /* read/write/socket failure */
    GC_E_CONNECT = 10,    /* cannot reach the daemon */
    GC_E_BUSY = 11,       /* daemon is shutting down or over capacity */
    GC_E_INTERNAL = 12,   /* a bug: please report */
    GC_E_DEVICE = 13,     /* GPU failure that could not be recovered */
    GC_E_PERMISSION = 14, /* this user may not use the daemon (allow-users/allow-groups) */
    GC_E_CANCELLED = 15,  /* the client cancelled the request */
    GC_E_IN_USE = 16,     /* client side, never sent: the connection is taken by its own
                           * stream or asynchronous requests (not the daemon's BUSY) */
    GC_E_TOO_SMALL = 17   /* client side, never sent: the caller's output buffer is too small */
} gc_status;

#define GC_ERROR_MSG_MAX 192

/* An error with a human-readable message a person can act on. */
typedef struct gc_error {
    gc_status code;
    char msg[GC_ERROR_MSG_MAX];
} gc_error;

/* Short fixed description of a status code (never NULL). */
const char *gc_status_str(int code);

/*
 * Record an error (printf-style message) in *err if err is not NULL and
 * return code, so callers can write `return gc_fail(err, GC_E_CRC, ...)`.
 */
int gc_fail(gc_error *err, gc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Clear *err to GC_OK with an empty message. */
void gc_error_clear(gc_error *err);

#ifdef __cplusplus
}
#endif

#endif
