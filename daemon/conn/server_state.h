/*
 * server_state.h - the daemon's shared state, owned by the event-loop thread.
 *
 * Everything here is touched only on the loop thread (workers and lanes
 * hand results back through the completion queue, completions.h), so none
 * of it needs locks. Lanes read the lane table (dispatch.c's reroute runs
 * on a lane thread), which is fixed while the daemon serves. server.c sets
 * it up and tears it down; the files below it (connections, streams,
 * dispatch, stats) share it through this header, not through server.h.
 */
#ifndef GCD_SERVER_STATE_H
#define GCD_SERVER_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "peer.h"
#include "settings.h"
#include "workers.h"

struct gcd_conn;
struct gcd_lane;

#define GCD_MAX_LANES 16
#define GCD_MAX_CODECS 8

typedef struct gcd_counters {
    uint64_t started_ns;
    uint64_t requests_ok;
    uint64_t requests_failed;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t cpu_requests;
    uint64_t gpu_requests;
    uint64_t gpu_by_load;        /* routed to a lane below their break-even: the CPU pool was queued */
    uint64_t stream_loop_copied; /* stream bytes (input or output) the loop thread copied: 0 for file streams */
} gcd_counters;

typedef struct gcd_server {
    gcd_config cfg;
    struct event_base *base;
    struct evconnlistener *listener;
    bool owns_socket_file; /* created by us, so unlinked at exit */
    gcd_peer_policy peers; /* who may connect */
    bool accept_paused;    /* out of descriptors: listener off until a close or the timer */
    struct event *accept_timer;
    uint64_t accept_paused_log_ns; /* when the last "out of descriptors" line was logged */
    struct event *sigint_event, *sigterm_event, *drain_timer;
    struct event *sighup_event; /* reload the settings (gcd_server_reload) */
    int argc;                   /* the command line, re-read on SIGHUP (set by main) */
    char **argv;
    struct event *watchdog_timer;        /* WATCHDOG=1 at half of $WATCHDOG_USEC, from the loop */
    struct event *status_timer;          /* STATUS= with backend, lanes and load */
    struct gcd_completions *completions; /* finished requests, from workers and devices */
    gcd_workers *workers;
    struct gcd_io_pool *io;                /* file streams' reads and writes (io_pool.h) */
    struct gcd_lane *lanes[GCD_MAX_LANES]; /* --device-lanes per usable device */
    unsigned n_lanes;
    uint64_t requests_in_flight; /* handed to an engine, not yet answered (counted by conn.c) */
    gcd_counters counters;

    struct gcd_budget *budget;              /* memory held for requests (budget.h) */
    struct gcd_conn *wait_head, *wait_tail; /* connections waiting for budget, FIFO */
    struct event *sweep_timer;              /* timeouts (gcd_conn_sweep), idle heap trimming */
    struct gcd_trim *trim;                  /* gives freed heap back once idle (trim.h) */
    struct event *wake_event;               /* deferred gcd_conn_wake_waiters */

    struct gcd_conn *conns; /* doubly linked list of open connections */
    unsigned n_conns;
    /* A connection closed (conn.c): a descriptor is free again, so the
     * listener, paused when they ran out, accepts again (server.c). */
    void (*conn_closed)(struct gcd_server *s);
    bool shutting_down;
} gcd_server;

#endif
