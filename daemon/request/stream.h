/*
 * stream.h - stream sessions: an input of unknown length, compressed or
 * decompressed in parts (docs/PROTOCOL.md, "Streams").
 *
 * A stream gathers the client's input in a buffer bounded by the window it
 * announced, cuts it into parts as the codec says (codec.h, gcd_stream_ops),
 * and runs each part as an ordinary request on whichever engine its size
 * earns, so a stream's parts batch with everyone else's work. Parts come
 * back in any order; the stream turns them into output in order and sends it
 * as soon as it has it. Enough parts are at the engines for every lane and
 * worker (one for a codec whose parts are chained); a socket stream starts
 * none while its parts and unread answers hold 512 MiB, and none is started
 * while the client leaves more than the unread-answer limit unread: so a
 * stream holds at most the window, its parts and their outputs, whatever
 * its length. A socket stream's buffer becomes its next part's input, so
 * the loop copies each input byte once.
 *
 * A stream knows its connection only as a gcd_stream_set: where answers go,
 * whom memory is charged to, and callbacks to submit a part and to ask
 * whether the connection still serves.
 *
 * A file stream (input_fd) reads its input from a regular file its client
 * passed and may write its output to another: the reads and writes run on
 * the I/O pool (io_pool.h), the loop only decides offsets; its parts are
 * read straight into their own buffers, and it keeps more parts out.
 *
 * Loop thread only.
 */
#ifndef GCD_STREAM_H
#define GCD_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/gpucomp.pb-c.h"
#include "response.h"

struct gcd_conn;
struct gcd_request;
struct gcd_server;
typedef struct gcd_stream gcd_stream;

/* A connection's streams and what they need of it (conn.h holds one; conn.c fills it in). */
typedef struct gcd_stream_set {
    gcd_stream *list;                          /* held: open, or answered and not yet released */
    unsigned n;                                /* in list */
    unsigned n_open;                           /* of them, not yet answered: what max_streams bounds */
    gcd_output *out;                           /* where their answers go */
    struct gcd_server *server;                 /* budget, settings, counters, completion queue */
    uid_t uid;                                 /* whom their memory is charged to */
    struct gcd_conn *owner;                    /* the connection: the callbacks' argument, the parts' r->conn */
    bool (*serving)(const struct gcd_conn *c); /* answers may be sent */
    bool (*gone)(const struct gcd_conn *c);    /* closed: streams go as their parts return */
    void (*submit)(struct gcd_conn *c, struct gcd_request *part); /* to the engines, until it is done */
    /* File streams' reads and writes at the I/O pool: the connection stays until they are back */
    unsigned io;
    void (*released)(struct gcd_conn *c); /* a closed connection's last transfer is back */
} gcd_stream_set;

/* Input a client may send beyond what the daemon has taken (announced in Welcome). */
#define GCD_STREAM_WINDOW ((uint64_t)64 << 20)
/* Streams open at once on one connection (announced in Welcome): a stream
 * counts until its final answer is sent. */
#define GCD_STREAM_MAX_PER_CONN 4
/* A ring stream's ring holds at least the window (a cut may need that much
 * input before it can cut) and at most this (docs/PROTOCOL.md, "Ring streams"). */
#define GCD_STREAM_RING_MOST (2 * GCD_STREAM_WINDOW)
/* An output ring holds at least this (docs/PROTOCOL.md, "Output rings"): the
 * daemon writes it piece by piece as credit returns, so it needs no window of
 * its own, and at most GCD_STREAM_RING_MOST. */
#define GCD_STREAM_ORING_LEAST ((uint64_t)1 << 20)
/* The fewest parts of one stream at the engines at once (stream_session.c stream_depth
 * adds one per lane and worker): with four, the pool starts a part's blocks while
 * the last blocks of earlier parts run (docs/DECISIONS.md). A tuning build may set it. */
#ifndef GCD_STREAM_DEPTH
#define GCD_STREAM_DEPTH 4
#endif

/* The stream id names in set, or NULL. */
gcd_stream *gcd_stream_find(const gcd_stream_set *set, uint64_t id);

/*
 * A first frame with stream = true: open the stream (or answer why not) and
 * take its payload. fds: the descriptors the frame carried (-1: none), a
 * file stream's input and output; the stream owns them from here on.
 */
void gcd_stream_open(gcd_stream_set *set, const Gpucomp__Request *m, const int fds[2]);

/* A later frame of s: input, a flush mark, the end of the input. */
void gcd_stream_frame(gcd_stream *s, const Gpucomp__Request *m);

/* OP_CANCEL for s: answer CANCELLED (unless answered already) and drop its work. */
void gcd_stream_cancel(gcd_stream *s);

/* A part of a stream came back from an engine (the connection's bookkeeping is done). */
void gcd_stream_part_done(struct gcd_request *part);

/* The connection's queued answers drained: streams held back by them go on. */
void gcd_stream_resume_all(gcd_stream_set *set);

/* The connection closed: free its streams that have no part out (the rest go as their parts return). */
void gcd_stream_close_all(gcd_stream_set *set);

/* Whether one of the streams still takes input (its memory waits for the connection's later frames). */
bool gcd_stream_awaits_input(const gcd_stream_set *set);

/* Whether one of the streams has waited longer than request_ns for its client's input. */
bool gcd_stream_overdue(const gcd_stream_set *set, uint64_t now_ns, uint64_t request_ns);

/*
 * For a codec's stream hooks: append output to the stream's answer
 * (sent at once, in frames). False if the stream's max_output is passed:
 * the stream has then failed with LIMIT.
 */
bool gcd_stream_put(gcd_stream *s, const void *data, size_t len);

/* The same for a part's output (what is not sent yet of it), without copying
 * it: the frames refer to r->output, shared with r (r->shared), freed once
 * the request is freed and the client has been sent the last of it. */
bool gcd_stream_put_output(gcd_stream *s, struct gcd_request *r);

/*
 * For a codec's emit hook: part's output is the first len bytes of its
 * output buffer once place has run on them, on an I/O thread (io_pool.h):
 * the emit hook only decides len and what place needs (in part_state), so
 * the loop thread moves no byte of it. The bytes are written at their
 * offset in the output file, or sent in frames that refer to the buffer,
 * in stream order; the stream then frees part (emit must not touch it
 * again). Placements of consecutive parts run at once. The stream's finish
 * hook runs once every placement is back. False as for gcd_stream_put.
 */
typedef void (*gcd_stream_place_fn)(struct gcd_request *part);
bool gcd_stream_put_placed(gcd_stream *s, struct gcd_request *part, size_t len, gcd_stream_place_fn place);

/* A part at an engine has announced more final output (completions.h; loop thread). */
void gcd_stream_part_progress(struct gcd_request *r);

/* For a codec's emit hook: run part again, before any later part is
 * emitted, with its input and part_state as emit left them (its output
 * and status so far are dropped; what emit sent of it stays sent). */
void gcd_stream_rerun(gcd_stream *s, struct gcd_request *part);

/* For a codec's stream hooks: the input offset where ignored trailing bytes begin (decompress). */
void gcd_stream_mark_garbage(gcd_stream *s, uint64_t offset);

#endif
