/* fair_queue.c - requests served fairly by user, then by connection (see fair_queue.h). */
#include "fair_queue.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void gcd_fair_init(gcd_fair_queue *q)
{
    memset(q, 0, sizeof *q);
}

static bool is_overflow(const gcd_fair_queue *q, const gcd_fair_flow *f)
{
    return f == &q->overflow_user || f == &q->overflow_conn;
}

/* The flow of key among list, skipping the overflow flow; *tail gets the last one walked. */
static gcd_fair_flow *find(const gcd_fair_queue *q, gcd_fair_flow *list, uintptr_t key, gcd_fair_flow **tail)
{
    *tail = NULL;
    for (gcd_fair_flow *f = list; f; f = f->next) {
        if (f->key == key && !is_overflow(q, f))
            return f;
        *tail = f;
    }
    return NULL;
}

static void append(gcd_fair_flow **list, gcd_fair_flow *tail, gcd_fair_flow *f)
{
    f->next = NULL;
    if (tail)
        tail->next = f;
    else
        *list = f;
}

static gcd_fair_flow *new_flow(gcd_fair_queue *q, uintptr_t key, uint64_t served)
{
    gcd_fair_flow *f = calloc(1, sizeof *f);
    if (f) {
        f->key = key;
        f->served = served;
        q->flows++;
    }
    return f;
}

static void free_flow(gcd_fair_queue *q, gcd_fair_flow *f)
{
    if (is_overflow(q, f))
        return;
    q->flows--;
    free(f);
}

/* The overflow connection, its user made active if it was not. */
static gcd_fair_flow *overflow(gcd_fair_queue *q)
{
    gcd_fair_flow *tail = NULL;
    for (gcd_fair_flow *f = q->users; f; f = f->next) {
        if (f == &q->overflow_user)
            return &q->overflow_conn;
        tail = f;
    }
    q->overflow_user = (gcd_fair_flow){ .served = q->clock, .children = &q->overflow_conn };
    q->overflow_conn = (gcd_fair_flow){ 0 };
    append(&q->users, tail, &q->overflow_user);
    return &q->overflow_conn;
}

/* r's connection flow, created (and its user's) if need be. */
static gcd_fair_flow *flow_of(gcd_fair_queue *q, const gcd_request *r)
{
    gcd_fair_flow *user_tail, *conn_tail;
    gcd_fair_flow *user = find(q, q->users, (uintptr_t)r->uid, &user_tail);
    if (!user) {
        user = new_flow(q, (uintptr_t)r->uid, q->clock);
        gcd_fair_flow *conn = user ? new_flow(q, (uintptr_t)r->conn, 0) : NULL;
        if (!conn) {
            if (user)
                free_flow(q, user);
            return overflow(q);
        }
        user->children = conn;
        append(&q->users, user_tail, user);
        return conn;
    }
    gcd_fair_flow *conn = find(q, user->children, (uintptr_t)r->conn, &conn_tail);
    if (!conn) {
        conn = new_flow(q, (uintptr_t)r->conn, user->clock);
        if (!conn)
            return overflow(q);
        append(&user->children, conn_tail, conn);
    }
    return conn;
}

void gcd_fair_push(gcd_fair_queue *q, gcd_request *r)
{
    gcd_queue_push(&flow_of(q, r)->requests, r);
    q->count++;
    q->bytes += r->total_size;
}

/* The flow of list served the fewest bytes, the earliest of equals; *prev gets the one before it. */
static gcd_fair_flow *least_served(gcd_fair_flow *list, gcd_fair_flow **prev)
{
    gcd_fair_flow *best = list;
    *prev = NULL;
    for (gcd_fair_flow *f = list; f && f->next; f = f->next) {
        if (f->next->served < best->served) {
            best = f->next;
            *prev = f;
        }
    }
    return best;
}

gcd_request *gcd_fair_peek(const gcd_fair_queue *q)
{
    gcd_fair_flow *prev;
    gcd_fair_flow *user = least_served(q->users, &prev);
    return user ? least_served(user->children, &prev)->requests.head : NULL;
}

static void unlink_flow(gcd_fair_flow **list, gcd_fair_flow *prev, gcd_fair_flow *f)
{
    if (prev)
        prev->next = f->next;
    else
        *list = f->next;
    f->next = NULL;
}

gcd_request *gcd_fair_pop(gcd_fair_queue *q)
{
    gcd_fair_flow *user_prev, *conn_prev;
    gcd_fair_flow *user = least_served(q->users, &user_prev);
    if (!user)
        return NULL;
    gcd_fair_flow *conn = least_served(user->children, &conn_prev);
    gcd_request *r = gcd_queue_pop(&conn->requests);
    uint64_t cost = r->total_size + GCD_FAIR_REQUEST_COST;
    q->clock = user->served;
    user->served += cost;
    user->clock = conn->served;
    conn->served += cost;
    q->count--;
    q->bytes -= r->total_size;
    if (!conn->requests.head) {
        unlink_flow(&user->children, conn_prev, conn);
        free_flow(q, conn);
    }
    if (!user->children) {
        unlink_flow(&q->users, user_prev, user);
        free_flow(q, user);
    }
    return r;
}

gcd_request *gcd_fair_take_all(gcd_fair_queue *q)
{
    gcd_request_queue all = { 0 };
    gcd_request *r;
    while ((r = gcd_fair_pop(q)))
        gcd_queue_push(&all, r);
    return all.head;
}
