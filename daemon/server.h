/*
 * server.h - the daemon's shared state, owned by the event-loop thread.
 *
 * Workers and lanes hand results back through the completion queue
 * (completions.h), so most of this is touched only on the loop thread and
 * needs no locks. Two exceptions, each safe by its own means: engine threads
 * charge the budget (budget.h locks it), and a retired lane's reroute
 * (dispatch.c) reads `lanes` and `n_lanes` on that lane's thread and submits
 * to another lane or to the workers: the array is fixed while serving, and
 * each lane and the worker pool lock their own queue.
 */
#ifndef GCD_SERVER_H
#define GCD_SERVER_H

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
} gcd_counters;

typedef struct gcd_server {
    gcd_config cfg;
    struct event_base *base;
    struct evconnlistener *listener;
    bool owns_socket_file;        /* created by us, so unlinked at exit */
    gcd_peer_policy peers;        /* who may connect */
    bool accept_paused;           /* out of descriptors: listener off until a close or the timer */
    struct event *accept_timer;
    uint64_t accept_paused_log_ns; /* when the last "out of descriptors" line was logged */
    struct event *sigint_event, *sigterm_event, *drain_timer;
    struct event *sighup_event;   /* reload the settings (gcd_server_reload) */
    int argc;                     /* the command line, re-read on SIGHUP (set by main) */
    char **argv;
    struct event *watchdog_timer; /* WATCHDOG=1 at half of $WATCHDOG_USEC, from the loop */
    struct event *status_timer;   /* STATUS= with backend, lanes and load */
    struct gcd_completions *completions; /* finished requests, from workers and devices */
    gcd_workers *workers;
    struct gcd_lane *lanes[GCD_MAX_LANES]; /* --device-lanes per usable device */
    unsigned n_lanes;
    uint64_t requests_in_flight;  /* handed to an engine, not yet answered */
    gcd_counters counters;

    struct gcd_budget *budget;    /* memory held for requests (budget.h) */
    struct gcd_conn *wait_head, *wait_tail; /* connections waiting for budget, FIFO */
    struct event *sweep_timer;    /* timeouts (gcd_conn_sweep), idle heap trimming */
    struct gcd_trim *trim;        /* gives freed heap back once idle (trim.h) */
    struct event *wake_event;     /* deferred gcd_conn_wake_waiters */

    struct gcd_conn *conns;       /* doubly linked list of open connections */
    unsigned n_conns;
    bool shutting_down;
} gcd_server;

/* Set up listener, workers and signals; false (logged) on failure. */
bool gcd_server_init(gcd_server *s, const gcd_config *cfg);

/* Run the loop until SIGINT/SIGTERM and a clean drain; returns exit status. */
int gcd_server_run(gcd_server *s);

/* Accept again after running out of descriptors (a connection closed); no-op if not paused. */
void gcd_server_accept_resume(gcd_server *s);

/*
 * Re-read the settings (defaults < --config file < command line, as at start).
 * Settings that can change live take effect; the others are logged as needing
 * a restart; a file that does not parse keeps every current setting.
 * Returns false if the new settings were rejected.
 */
bool gcd_server_reload(gcd_server *s);

/* Free everything (safe after a failed init). */
void gcd_server_cleanup(gcd_server *s);

#endif
