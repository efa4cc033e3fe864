/*
 * conn.h - one client connection, on the loop thread: the Hello, frames in
 * (with their descriptors) handed to request assembly (assembly.h: the ids a
 * client holds, requests, tombstones, streams), the wait for the memory
 * budget, cancellation, back-pressure (no reading while too much is in
 * flight or unread), the once-a-second timeout sweep, and answers out as
 * completed requests come back from the workers and lanes.
 *
 * State machine: AWAIT_HELLO -> SERVING -> (CLOSING: flush, then close) ->
 * CLOSED (bufferevent gone, requests in flight marked cancelled, streams
 * closed; the struct lives on until its in-flight requests come back from
 * the workers and lanes, whose results are then dropped).
 */
#ifndef GCD_CONN_H
#define GCD_CONN_H

#include <stdbool.h>

#include <event2/bufferevent.h>

#include "assembly.h"
#include "fdpass.h"
#include "request.h"
#include "response.h"
#include "server_state.h"
#include "stream.h"

typedef enum gcd_conn_state {
    GCD_CONN_AWAIT_HELLO,
    GCD_CONN_SERVING,
    GCD_CONN_CLOSING,
    GCD_CONN_CLOSED
} gcd_conn_state;

#define GCD_CONN_MAX_FDS GC_FDPASS_RECV_MAX /* descriptors received and not yet claimed by a frame */

typedef struct gcd_conn {
    gcd_server *server;
    gcd_output out; /* answers: out.bev, output only (input needs recvmsg for descriptors) */
    struct event *read_event;
    struct event *hup_event; /* while not reading: notices the client's close at once */
    struct evbuffer *in;
    int fds[GCD_CONN_MAX_FDS];           /* SCM_RIGHTS descriptors in arrival order */
    uint64_t fd_owner[GCD_CONN_MAX_FDS]; /* each one's frame: that frame's input offset */
    unsigned n_fds;
    uint64_t in_pos;    /* input offset of the first byte in `in` (bytes of frames taken before) */
    uint64_t frame_pos; /* input offset of the frame being handled */
    gcd_conn_state state;
    unsigned in_flight;     /* requests at the workers */
    gcd_assembly assembly;  /* requests still receiving frames (with streams.n: the ids it holds) */
    bool paused_for_output; /* client not reading its responses */
    bool waiting_budget;    /* its next request waits for memory (budget.h) */
    bool wait_expired;      /* waited request-timeout: admit now or refuse */
    uint64_t wait_since_ns; /* waiting_budget since */
    struct gcd_conn *wait_prev, *wait_next; /* server->wait_head FIFO */
    gcd_request *flight;                    /* requests handed to workers or lanes (in_flight of them) */
    uint64_t frame_started_ns;              /* first byte of an incomplete frame, else 0 */
    uint64_t last_active_ns;                /* last frame or answer: for the idle timeout */
    uint64_t closing_since_ns;              /* CLOSING: flushing its last answers since */
    uint64_t output_moved_ns;               /* the kernel last took queued answers (or they were first queued) */
    struct evbuffer_cb_entry *out_cb;       /* charges queued answers to the budget */
    gcd_stream_set streams;                 /* streams held: open, or answered and not yet released (stream.h) */
    bool refused_peer;                      /* not allowed (peer.h): its Hello gets PERMISSION, then close */
    uid_t peer_uid;
    struct gcd_conn *prev, *next; /* server->conns */
} gcd_conn;

/*
 * Take ownership of an accepted socket of peer uid (whom the memory budget
 * charges); the new connection, or NULL (fd closed, logged). A refused peer
 * is answered PERMISSION at its Hello.
 */
gcd_conn *gcd_conn_accept(gcd_server *s, evutil_socket_t fd, uid_t uid, bool refused_peer);

/* Enable or disable reading, honouring both budget and output pauses. */
void gcd_conn_update_reading(gcd_conn *c);

/* Hand a complete request (or a stream's part) to the engines; it is in flight until done. */
void gcd_conn_submit(gcd_conn *c, gcd_request *r);

/* A request came back from the workers (loop thread). */
void gcd_conn_request_done(gcd_request *r, void *server);

/* More of a running request's output is final (completions.h: loop thread). */
void gcd_conn_request_progress(gcd_request *r, void *server);

/* Stop reading new requests (shutdown); in-flight ones still complete. */
void gcd_conn_stop_reading(gcd_conn *c);

/* Close now, dropping unsent output and cancelling its requests at the workers and lanes. */
void gcd_conn_close(gcd_conn *c);

/* Memory was released: let connections waiting for budget try again (loop thread; deferred). */
void gcd_conn_wake_waiters(gcd_server *s);

/* Close connections past the idle or incomplete-request timeouts (called every second). */
void gcd_conn_sweep(gcd_server *s, uint64_t now_ns);

#endif
