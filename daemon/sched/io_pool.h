/*
 * io_pool.h - threads that read and write clients' files, so the event
 * loop never calls pread or pwrite on a descriptor a client passed (a file
 * on a slow disk or a network mount would stall every connection).
 *
 * The loop submits a task (a descriptor, a buffer, a byte range); a pool
 * thread moves the bytes with pread or pwrite, retrying short transfers,
 * and the task comes back to the loop, where its done callback runs. A
 * task may first make the bytes it writes (work), and one with no
 * descriptor (fd -1) only does that: the loop hands work off that would
 * otherwise hold up every connection (splicing a stream part's bits). Tasks
 * run in submission order but several at once, so consecutive parts of one
 * stream are read or written in parallel. The pool owns nothing a task
 * points to: its submitter keeps the buffer and the descriptor alive until
 * done has run.
 */
#ifndef GCD_IO_POOL_H
#define GCD_IO_POOL_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gcd_io_pool gcd_io_pool;
typedef struct gcd_io_task gcd_io_task;

struct gcd_io_task {
    /* set by the submitter */
    int fd;
    bool write;
    uint8_t *buf;
    size_t len;
    uint64_t offset;
    bool first; /* a short task that others wait on: queued ahead of every task not marked so, and
                 * the others leave one thread free for it */
    /* on the pool thread before the transfer (NULL: none): makes the bytes to write, in buf */
    void (*work)(gcd_io_task *t);
    void (*after)(gcd_io_task *t); /* on the pool thread after a read that moved all of len (NULL: none) */
    void (*done)(gcd_io_task *t);  /* on the loop thread */
    void *ctx;
    /* set by the pool before done */
    size_t moved; /* bytes read or written: < len after a read that met the file's end, or an error */
    int error;    /* errno of a failed transfer, ECANCELED if the pool stopped first; 0: none */
    gcd_io_task *next;
};

/*
 * The pool's size for a configured count (0: one per two CPUs, within
 * bounds): reading into and writing out of memory is CPU work in the kernel,
 * one thread's worth per transfer, so with many streams at once too few
 * threads bound them; with one per CPU their copies slowed the GPU
 * pipeline's own (docs/DECISIONS.md, "I/O threads: one per two CPUs").
 */
unsigned gcd_io_threads(unsigned configured);

/* n threads (at least 1) whose finished tasks come back on base's loop. NULL if none could start. */
gcd_io_pool *gcd_io_pool_start(struct event_base *base, unsigned n);

/* Queue t (loop thread). */
void gcd_io_pool_submit(gcd_io_pool *p, gcd_io_task *t);

/*
 * Stop: tasks not started are given ECANCELED, running ones finish, the
 * threads are joined and every task's done runs (loop thread). NULL: nothing.
 */
void gcd_io_pool_stop(gcd_io_pool *p);

#endif
