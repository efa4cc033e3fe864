/*
 * fair_queue.h - the requests waiting for an engine (the CPU worker pool, a
 * lane), served fairly: one user's flood slows that user, not the others.
 *
 * Two levels of flows: a user (uid) per flow, and within a user, one flow
 * per connection; each connection's requests in arrival order. Each flow
 * counts the bytes it has been served (a request costs its input bytes plus
 * GCD_FAIR_REQUEST_COST, so that empty requests are not free). The next
 * request is the one of the user served the fewest bytes, and within that
 * user, of its connection served the fewest; ties go to the flow queued
 * longest. A flow that becomes active starts level with the last one served
 * (no credit for having been idle, no debt for having been busy), so a
 * newcomer's request goes out before any other user's next one, and a user
 * with one huge request and a user with many small ones get the same bytes.
 *
 * Flows live only while they hold requests: memory is at most two small
 * nodes per queued request. A node that cannot be allocated sends the
 * request to a built-in overflow flow, served as one more user, so a push
 * never fails. Finding a flow walks the active ones (at most one per
 * connection with queued work). Not locked: its owner holds its own lock.
 */
#ifndef GCD_FAIR_QUEUE_H
#define GCD_FAIR_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "request_queue.h"

/* What a request costs beyond its input bytes: a request's fixed work. */
#define GCD_FAIR_REQUEST_COST 4096u

typedef struct gcd_fair_flow {
    uintptr_t key;                  /* the uid, or the connection */
    uint64_t served;                /* bytes served, in the parent's reckoning */
    struct gcd_fair_flow *next;     /* the parent's next active flow */
    struct gcd_fair_flow *children; /* a user's connections */
    uint64_t clock;                 /* a user: what its connection served last had served */
    gcd_request_queue requests;     /* a connection's requests */
} gcd_fair_flow;

typedef struct gcd_fair_queue {
    gcd_fair_flow *users;                       /* active users, oldest first */
    uint64_t clock;                             /* what the user served last had served: a newcomer starts there */
    size_t count;                               /* requests queued */
    uint64_t bytes;                             /* their input bytes */
    size_t flows;                               /* nodes allocated (users and connections) */
    gcd_fair_flow overflow_user, overflow_conn; /* where a request goes when a node cannot be had */
} gcd_fair_queue;

void gcd_fair_init(gcd_fair_queue *q);

/* Queue r (keyed by r->uid and r->conn). Never fails. */
void gcd_fair_push(gcd_fair_queue *q, gcd_request *r);

/* The request pop would return, left queued; NULL if empty. */
gcd_request *gcd_fair_peek(const gcd_fair_queue *q);

/* The next request in fair order, off the queue; NULL if empty. */
gcd_request *gcd_fair_pop(gcd_fair_queue *q);

/* Everything queued, in fair order, as a list through ->next; the queue is left empty. */
gcd_request *gcd_fair_take_all(gcd_fair_queue *q);

#endif
