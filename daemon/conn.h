/*
 * conn.h - one client connection: framing in, request assembly, responses out.
 *
 * State machine: AWAIT_HELLO -> SERVING -> (CLOSING: flush, then close) ->
 * CLOSED (bufferevent gone; the struct lives on until its in-flight requests
 * come back from the workers, whose results are then dropped).
 */
#ifndef GCD_CONN_H
#define GCD_CONN_H

#include <stdbool.h>

#include <event2/bufferevent.h>

#include "request.h"
#include "server.h"

typedef enum gcd_conn_state {
    GCD_CONN_AWAIT_HELLO,
    GCD_CONN_SERVING,
    GCD_CONN_CLOSING,
    GCD_CONN_CLOSED
} gcd_conn_state;

#define GCD_CONN_MAX_FDS 16   /* descriptors received and not yet claimed by a frame */

typedef struct gcd_conn {
    gcd_server *server;
    struct bufferevent *bev;      /* output only: input needs recvmsg for descriptors */
    struct event *read_event;
    struct evbuffer *in;
    int fds[GCD_CONN_MAX_FDS];    /* SCM_RIGHTS descriptors in arrival order */
    unsigned n_fds;
    gcd_conn_state state;
    unsigned in_flight;           /* requests at the workers */
    unsigned n_assembling;
    gcd_request *assembling;      /* requests still receiving frames */
    bool paused_for_output;       /* client not reading its responses */
    struct gcd_conn *prev, *next; /* server->conns */
} gcd_conn;

/* Take ownership of an accepted socket. */
void gcd_conn_accept(gcd_server *s, evutil_socket_t fd);

/* Enable or disable reading, honouring both budget and output pauses. */
void gcd_conn_update_reading(gcd_conn *c);

/* A request came back from the workers (loop thread). */
void gcd_conn_request_done(gcd_request *r, void *server);

/* Stop reading new requests (shutdown); in-flight ones still complete. */
void gcd_conn_stop_reading(gcd_conn *c);

/* Close now, dropping unsent output. */
void gcd_conn_close(gcd_conn *c);

#endif
