/* io_pool.c - the file I/O threads (see io_pool.h). */
#include "io_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "parallel.h"

#define IO_POOL_MAX_THREADS 64

struct gcd_io_pool {
    pthread_mutex_t lock;
    pthread_cond_t more;
    gcd_io_task *head, *tail; /* queued: those marked first, then the others, each oldest first */
    gcd_io_task *first_tail;  /* the last of those marked first (NULL: none queued) */
    gcd_io_task *done;        /* finished, newest first: order does not matter to the callbacks */
    unsigned plain_running;   /* tasks not marked first being run */
    bool stopping;
    struct event *wake;
    pthread_t threads[IO_POOL_MAX_THREADS];
    unsigned n;
};

/* One whole task: its work, then pread or pwrite until all of it moved, the file ended (a read) or an error. */
static void transfer(gcd_io_task *t)
{
    t->moved = 0;
    t->error = 0;
    if (t->work)
        t->work(t);
    if (t->fd < 0) { /* work only */
        t->moved = t->len;
        return;
    }
    while (t->moved < t->len) {
        size_t want = t->len - t->moved;
        off_t at = (off_t)(t->offset + t->moved);
        ssize_t n =
            t->write ? pwrite(t->fd, t->buf + t->moved, want, at) : pread(t->fd, t->buf + t->moved, want, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            t->error = errno;
            return;
        }
        if (n == 0) { /* a read at the end of the file; a write that cannot move on */
            if (t->write)
                t->error = EIO;
            return;
        }
        t->moved += (size_t)n;
    }
}

static void finished(gcd_io_pool *p, gcd_io_task *t)
{
    t->next = p->done;
    p->done = t;
    event_active(p->wake, EV_READ, 0);
}

/*
 * Whether a thread may take the queue's head: tasks not marked first leave
 * one thread free, so a first task (a chain every part waits on) never
 * waits for a long read to end.
 */
static bool may_take(const gcd_io_pool *p)
{
    return p->head && (p->head->first || p->n < 2 || p->plain_running < p->n - 1);
}

static void *run(void *arg)
{
    gcd_io_pool *p = arg;
    pthread_setname_np(pthread_self(), "gcd-io"); /* top -H and /proc tell the threads apart */
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!may_take(p) && !p->stopping)
            pthread_cond_wait(&p->more, &p->lock);
        gcd_io_task *t = p->head;
        if (!t)
            break;
        p->head = t->next;
        if (!p->head)
            p->tail = NULL;
        if (p->first_tail == t)
            p->first_tail = NULL;
        bool plain = !t->first;
        p->plain_running += plain;
        pthread_mutex_unlock(&p->lock);
        transfer(t);
        if (t->after && !t->write && !t->error && t->moved == t->len)
            t->after(t);
        pthread_mutex_lock(&p->lock);
        if (plain) {
            p->plain_running--;
            pthread_cond_signal(&p->more); /* a plain task held back may go now */
        }
        finished(p, t);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void drain(gcd_io_pool *p)
{
    pthread_mutex_lock(&p->lock);
    gcd_io_task *t = p->done;
    p->done = NULL;
    pthread_mutex_unlock(&p->lock);
    while (t) {
        gcd_io_task *next = t->next;
        t->next = NULL;
        t->done(t);
        t = next;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    drain(arg);
}

/* The default's floor: enough for the streams of a small host. */
#define IO_THREADS_MIN 8

unsigned gcd_io_threads(unsigned configured)
{
    if (configured)
        return configured;
    unsigned n = gc_cpu_count() / 2;
    return n < IO_THREADS_MIN ? IO_THREADS_MIN : n > IO_POOL_MAX_THREADS ? IO_POOL_MAX_THREADS : n;
}

gcd_io_pool *gcd_io_pool_start(struct event_base *base, unsigned n)
{
    gcd_io_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->wake = event_new(base, -1, 0, on_wake, p);
    if (!p->wake) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->more, NULL);
    if (n == 0)
        n = 1;
    if (n > IO_POOL_MAX_THREADS)
        n = IO_POOL_MAX_THREADS;
    while (p->n < n && pthread_create(&p->threads[p->n], NULL, run, p) == 0)
        p->n++;
    if (p->n == 0) {
        gcd_io_pool_stop(p);
        return NULL;
    }
    return p;
}

void gcd_io_pool_submit(gcd_io_pool *p, gcd_io_task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (t->first) { /* behind the other first ones only */
        gcd_io_task **at = p->first_tail ? &p->first_tail->next : &p->head;
        t->next = *at;
        *at = t;
        p->first_tail = t;
        if (!t->next)
            p->tail = t;
    } else {
        if (p->tail)
            p->tail->next = t;
        else
            p->head = t;
        p->tail = t;
    }
    pthread_cond_signal(&p->more);
    pthread_mutex_unlock(&p->lock);
}

void gcd_io_pool_stop(gcd_io_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    gcd_io_task *t = p->head;
    p->head = p->tail = p->first_tail = NULL;
    while (t) {
        gcd_io_task *next = t->next;
        t->moved = 0;
        t->error = ECANCELED;
        finished(p, t);
        t = next;
    }
    pthread_cond_broadcast(&p->more);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    drain(p);
    event_free(p->wake);
    pthread_cond_destroy(&p->more);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
