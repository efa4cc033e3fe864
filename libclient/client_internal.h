/*
 * client_internal.h - the client handle and the helpers behind gpucomp.h.
 *
 * client.c is the public API; client_connect.c opens the socket and does
 * the Hello/Welcome handshake; client_request.c sends a request in frames
 * and reassembles its response. None of these names is exported from the
 * shared library (libclient.am exports ^gpucomp_ only).
 */
#ifndef GPUCOMP_CLIENT_INTERNAL_H
#define GPUCOMP_CLIENT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpucomp.h"
#include "wire.h"

struct gpucomp_client {
    int fd;                       /* -1 once the connection is unusable */
    uint64_t next_id;             /* request ids: per-client counter, never 0 */
    uint32_t max_frame;           /* from Welcome: largest frame body either way */
    uint64_t max_request;         /* from Welcome: largest request input; 0 = none declared */
    char server_version[64];      /* from Welcome */
    gpucomp_backend last_backend; /* engine of the last successful request */
    uint64_t last_engine_ns;
    gc_error err; /* last failure on this client */
    /* memfd transport staging, reused across calls so steady-state requests
     * touch pages that already exist (-1 until first needed) */
    int stage_in_fd, stage_out_fd;
    size_t memfd_threshold; /* inputs this large go through the staging memfds */
    /* streams (client_stream.c), asynchronous requests (client_async.c),
     * time limits and reconnection */
    gpucomp_stream *stream;        /* the open stream; the client serves only it */
    struct client_async *async;    /* asynchronous state, made by the first gpucomp_submit */
    atomic_uint async_outstanding; /* submitted and not yet completed */
    unsigned timeout_ms;           /* gpucomp_set_timeout; 0 = wait forever */
    bool reconnect;                /* gpucomp_set_reconnect (default on) */
    uint64_t stream_window;        /* from Welcome: 0 = the daemon has no streams */
    uint32_t max_streams;          /* from Welcome */
    bool file_streams;             /* from Welcome: the daemon takes file streams (client_file.c) */
    bool stream_rings;             /* from Welcome: the daemon takes ring streams (client_stream.c) */
    bool stream_output_rings;      /* from Welcome: the daemon writes streams' output into rings */
    char path[108];                /* the socket path connected to (for reconnecting) */
    /* the in-process CPU engine (client_local.c) */
    bool local_only; /* gpucomp_open found no daemon, or was refused: every request runs here */
    bool fallback;   /* a request the daemon cannot take (gone, refusing, busy) runs here */
};

/* GPUCOMP_E_IN_USE, with a message in c->err, while c serves a stream or
 * asynchronous requests (the blocking calls may not interleave with them). */
int client_check_idle(gpucomp_client *c);

/* What to send: one request, already validated by the API layer. */
typedef struct client_req {
    Gpucomp__Op op;
    Gpucomp__Codec codec;
    Gpucomp__CodecOptions *options; /* NULL for PING/STATS */
    const uint8_t *src;
    size_t src_len;
    uint64_t max_output; /* 0 = no client-side limit */
    /* memfd transport: src is unused, the input is src_len bytes of in_fd
     * and the daemon writes the output into out_fd; OP_REGISTER and
     * OP_UNREGISTER send in_fd alone (out_fd -1) */
    bool via_fd;
    int in_fd, out_fd;
} client_req;

static inline bool client_req_is_registration(const client_req *req)
{
    return req->op == GPUCOMP__OP__OP_REGISTER || req->op == GPUCOMP__OP__OP_UNREGISTER;
}

/* What came back. buf (len bytes, never NULL on success; NULL with via_fd,
 * where the len bytes are in out_fd) goes to the user. */
typedef struct client_reply {
    uint8_t *buf;
    size_t len;
    Gpucomp__Backend backend;
    uint64_t engine_ns;
    Gpucomp__Frame *head; /* first response frame (stats live here); gc_wire_free it */
} client_reply;

/*
 * A Status from the daemon as a GPUCOMP_E_* code. Codes this client does
 * not know (a newer daemon) become GPUCOMP_E_PROTOCOL so that callers only
 * ever see the documented values; the daemon's message is kept. IN_USE is
 * the client's own and never comes from a daemon.
 */
static inline int client_wire_status(Gpucomp__Status s)
{
    return s > GPUCOMP__STATUS__STATUS_OK && s <= GPUCOMP__STATUS__STATUS_CANCELLED ? (int)s : GPUCOMP_E_PROTOCOL;
}

/* Name of a frame's body, for "expected X, got Y" messages. */
static inline const char *client_frame_kind(const Gpucomp__Frame *f)
{
    switch (f->body_case) {
    case GPUCOMP__FRAME__BODY_HELLO: return "Hello";
    case GPUCOMP__FRAME__BODY_WELCOME: return "Welcome";
    case GPUCOMP__FRAME__BODY_REQUEST: return "Request";
    case GPUCOMP__FRAME__BODY_RESPONSE: return "Response";
    default: return "empty";
    }
}

/* o as the wire carries it; GC_E_INVALID (err) for what it cannot carry (client.c). */
int client_wire_options(const gpucomp_options *o, Gpucomp__CodecOptions *w, gc_error *err);

/* The next request id on c: a per-client counter that skips 0, which names the connection. */
uint64_t client_take_id(gpucomp_client *c);

/* Write all of buf at offset 0 of memfd fd; false on a write error (client_memfd.c). */
bool client_memfd_fill(int fd, const uint8_t *buf, size_t len);

/*
 * Connect to path and shake hands; on failure *out is NULL and err says why.
 * local_if_unreachable (gpucomp_open): no daemon, or a refusal, still gives a
 * client, local_only, whose c->err says why; and every client made so has
 * fallback on.
 */
int client_connect(const char *path, bool local_if_unreachable, gpucomp_client **out, gc_error *err);

/*
 * Run one buffer request in this process with the codecs' CPU engine, as
 * the daemon's CPU workers would (client_local.c): on success *out (malloc'd,
 * never NULL) holds *out_len bytes. o is resolved (not NULL).
 */
int client_local_run(bool decompress, const gpucomp_options *o, const uint8_t *in, size_t in_len, uint8_t **out,
                     size_t *out_len, gc_error *err);

/*
 * A stream run in this process with the codecs' CPU engine
 * (client_local_stream.c): parts cut as the daemon's streams cut them, so the
 * output is a daemon stream's, in the memory of about one part. run is
 * gpucomp_stream_run's work (arguments already checked); the message of a
 * failure goes to err, and the stream then fails every call with it.
 */
typedef struct client_local_stream client_local_stream;
int client_local_stream_open(bool decompress, const gpucomp_options *o, client_local_stream **out, gc_error *err);
int client_local_stream_run(client_local_stream *l, gpucomp_inbuf *in, gpucomp_outbuf *out, gpucomp_end_op op,
                            size_t *pending, gc_error *err);
uint64_t client_local_stream_bytes_in(const client_local_stream *l);
uint64_t client_local_stream_bytes_out(const client_local_stream *l);
int client_local_stream_trailing_garbage(const client_local_stream *l, uint64_t *offset);
void client_local_stream_free(client_local_stream *l);

/* Failures that say the daemon cannot take a request now, not that the request is bad. */
static inline bool client_daemon_unavailable(int rc)
{
    return rc == GC_E_CONNECT || rc == GC_E_PERMISSION || rc == GC_E_IO || rc == GC_E_BUSY;
}

/*
 * Open a stream on c that runs in this process (client_local_stream.c), as
 * gpucomp_stream_open does on a client with no daemon; client_file.c's
 * local runs use it whatever c is connected to.
 */
int client_stream_open_local(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o,
                             gpucomp_stream **out);

/* Most bytes compressing len bytes with o can give (o resolved); 0 if that does not fit in a size_t. */
size_t client_local_bound(const gpucomp_options *o, size_t len);

/*
 * Run one request: send it in frames no larger than the daemon allows,
 * read and validate the whole response. On failure the reply is empty,
 * c->err has the message, and the connection is closed if it can no longer
 * be trusted to be at a frame boundary.
 */
int client_call(gpucomp_client *c, const client_req *req, client_reply *rep);

/*
 * Run req (inline fields set, src_len >= c->memfd_threshold) through
 * the memfd transport, src copied into a memfd; on success rep->buf holds
 * the output like an inline reply. CLIENT_STAGING_UNAVAILABLE (not a
 * gc_status) if no memfd could be made: nothing was sent, use the socket.
 */
#define CLIENT_STAGING_UNAVAILABLE (-1)
int client_call_staged(gpucomp_client *c, client_req *req, const uint8_t *src, client_reply *rep);

/* Close the cached staging memfds (gpucomp_close). */
void client_release_staging(gpucomp_client *c);

/* Free what a reply holds and zero it (safe on a zeroed reply). */
void client_reply_free(client_reply *rep);

/*
 * Open a file stream (client_file.c): the daemon reads the regular file
 * in_fd and writes the output into out_fd (-1: it sends the output in
 * frames). Nothing more is sent on it: the caller only runs it to its end.
 */
int client_stream_open_file(gpucomp_client *c, gpucomp_direction dir, const gpucomp_options *o, int in_fd,
                            int out_fd, gpucomp_stream **out);

/* A client that connects to nothing: everything it can run, it runs in this process (gpucomp_open_local). */
int client_open_local(gpucomp_client **out, gc_error *err);

/* Close the socket: every later call on c fails with GPUCOMP_E_IO. */
void client_disconnect(gpucomp_client *c);

#endif
