/*
 * server.h - the daemon's shared state, owned by the event-loop thread.
 *
 * Everything here is touched only on the loop thread (workers hand results
 * back through workers.h), so none of it needs locks.
 */
#ifndef GCD_SERVER_H
#define GCD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "engine.h"
#include "settings.h"
#include "workers.h"

struct gcd_conn;
struct gcd_batcher;

#define GCD_MAX_DEVICES 16

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
    struct event *sigint_event, *sigterm_event, *drain_timer;
    gcd_workers *workers;
    gcd_engine engine;
    struct gcd_batcher *devices[GCD_MAX_DEVICES]; /* one scheduler per usable device */
    unsigned n_devices;
    uint64_t requests_in_flight;  /* handed to an engine, not yet answered */
    gcd_counters counters;

    uint64_t memory_in_use;       /* request bytes held (budget.h) */
    bool reading_paused;          /* over budget: no connection reads */

    struct gcd_conn *conns;       /* doubly linked list of open connections */
    unsigned n_conns;
    bool shutting_down;
} gcd_server;

/* Set up listener, workers and signals; false (logged) on failure. */
bool gcd_server_init(gcd_server *s, const gcd_config *cfg);

/* Run the loop until SIGINT/SIGTERM and a clean drain; returns exit status. */
int gcd_server_run(gcd_server *s);

/* Free everything (safe after a failed init). */
void gcd_server_cleanup(gcd_server *s);

/* Monotonic clock in nanoseconds. */
uint64_t gcd_now_ns(void);

#endif
