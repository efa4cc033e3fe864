/*
 * stream_internal.h - what the stream session (stream_session.c), its transfers at
 * the I/O pool (stream_io.c) and its output (stream_output.c) share: the
 * session's state and the few steps each file takes from the others. Not
 * for the rest of the daemon, which sees stream.h.
 */
#ifndef GCD_STREAM_INTERNAL_H
#define GCD_STREAM_INTERNAL_H

#include "stream.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "codec.h"
#include "engine.h"
#include "fd_file.h"
#include "gc_clock.h"
#include "gc_mem.h"
#include "part_cache.h"
#include "io_pool.h"
#include "log.h"
#include "response.h"
#include "server_state.h"
#include "shared_output.h"
#include "stream_ring.h"
#include "wire.h"

/* Output frames of a stream carry at most this: small enough that both ends
 * reuse heap memory for them instead of faulting in fresh pages per frame. */
#define STREAM_FRAGMENT ((size_t)1 << 20)
/* Past GCD_OUTPUT_HIGH_WATER (response.h) a stream takes no more parts, and none at all,
 * even with no part out, while this much is unread. */
#define STREAM_OUTPUT_MOST ((size_t)512 << 20)
/* A socket stream takes no new part while its parts' inputs, their outputs
 * (those at the engines counted at the largest part output seen) and its
 * connection's unread answers pass this: its reader's pace, not the depth,
 * bounds what one stream holds. */
#define STREAM_HELD_MOST ((uint64_t)512 << 20)
/* Room in front of a part's read for the bytes the part before it leaves
 * (under a block's input, which is rarely more); more moves the part. */
#define SETTLE_ROOM ((size_t)4 << 20)
/* A written output buffer this large is let go of on a pool thread, not the loop. */
#define STREAM_RELEASE_OFF_LOOP ((size_t)8 << 20)
/* Slots for parts out: the most any stream may have (file streams; socket streams GCD_STREAM_DEPTH). */
#define STREAM_SLOTS (GCD_STREAM_DEPTH > 16 ? GCD_STREAM_DEPTH : 16)

struct gcd_stream {
    uint64_t id;
    gcd_stream_set *set; /* its connection's */
    gcd_request proto;   /* op, codec, options, max_output, uid: what every part copies */
    const gcd_stream_ops *ops;
    void *state; /* the codec's */
    /* input not yet in a part: buf[0..len) is the stream's input from offset base */
    uint8_t *buf;
    size_t len, cap;
    uint64_t charged; /* budget held for buf */
    uint64_t base;
    size_t peek_at;    /* a file stream: buf[0] is its input at base + peek_at (what its cut asked to see) */
    uint64_t received; /* input bytes the client sent */
    uint64_t consumed; /* input bytes taken into parts (told to the client) */
    uint64_t flush_at; /* a flush mark not yet cut at: input offset, 0 if none */
    bool input_ended;  /* the client's last frame came */
    bool final_out;    /* the part after which no input follows has gone out */
    bool client_done;  /* last frame or cancel: no more frames of this id */
    bool answered;     /* the final frame is sent (or the connection is gone): see answered() */
    bool garbage;      /* trailing garbage: the rest of the input is dropped */
    uint64_t garbage_offset;
    /* parts */
    uint64_t next_seq, emit_seq;
    unsigned in_flight;              /* parts being read or at the engines */
    unsigned depth;                  /* most parts out and not yet emitted (<= STREAM_SLOTS) */
    uint64_t part_out_most;          /* the largest output of a part back from the engines */
    gcd_request *out[STREAM_SLOTS];  /* being read or at the engines, by part_seq % STREAM_SLOTS */
    gcd_request *done[STREAM_SLOTS]; /* back from the engines, waiting for their turn */
    /* a file stream (docs/PROTOCOL.md, "File streams"): the input is in_fd's
     * bytes [0, in_size); its output goes to out_fd at out_total, or in frames (-1) */
    int in_fd, out_fd;
    uint64_t in_size;
    bool peeking;         /* a read of the bytes the codec's cut_file asked to see (into buf) is at the pool */
    bool drop_after_peek; /* the stream let go of buf while that read ran: peek_done frees it */
    /* a file stream its codec settles (gcd_stream_ops.settle): parts read span bytes each */
    size_t span;                /* 0: not one */
    uint64_t read_to;           /* the file's bytes before this are read, or being read, into parts */
    uint64_t settle_seq;        /* the next part to settle */
    bool settling;              /* its settle is at the pool */
    bool read_in[STREAM_SLOTS]; /* that part's read is back, by part_seq % STREAM_SLOTS */
    uint64_t submit_seq;        /* a stream not settled: the next part to go to the engines */
    uint8_t *rest;              /* what the last settled part left: the next part's first bytes */
    size_t rest_len;            /* (charged to the budget) */
    unsigned io;                /* reads and writes at the pool */
    uint64_t write_bytes;       /* output bytes at the pool (charged to the budget until written) */
    bool finishing;             /* the last output is out: the final frame waits for the writes */
    gcd_request *rerun;         /* the part its emit asked to run again (gcd_stream_rerun) */
    gcd_request *kept;          /* the part its emit placed (gcd_stream_put_placed): the placement frees it */
    /* placed outputs at the pool, in stream order (socket output is sent in that order) */
    struct stream_io *placing_head, *placing_tail;
    unsigned placing;
    gcd_request *parked; /* ... waiting, as new parts do, for unread answers to drain */
    /* a ring stream (docs/PROTOCOL.md, "Ring streams"): input offset x is at
     * x % ring_size of ring_fd, the client's memfd, until consumed passes it */
    int ring_fd;
    uint64_t ring_size;
    uint64_t ring_charged;      /* its input not yet taken (received - consumed), charged to the budget */
    bool reading[STREAM_SLOTS]; /* a ring stream's part whose read from the ring is at the pool */
    /* an output ring (docs/PROTOCOL.md, "Output rings"; stream_oring.c): output offset y
     * goes at y % oring_size of oring_fd, the client's memfd, by pwrite on the pool */
    int oring_fd;
    uint64_t oring_size;
    uint64_t oring_credit;               /* the client's output_consumed */
    uint64_t oring_issued;               /* output before this is written, or being written, into the ring */
    uint64_t oring_told;                 /* output before this is in the ring and named in frames */
    struct oring_seg *oq_head, *oq_tail; /* output waiting for its turn or for credit (charged) */
    struct stream_io *ow_head, *ow_tail; /* writes into the ring at the pool, in stream order */
    gc_error failing;                    /* a part's error, sent once the output before it is in the ring */
    /* totals */
    uint64_t out_total, engine_ns;
    unsigned gpu_parts, cpu_parts;
    uint64_t waiting_since_ns; /* waiting for the client's input (or last frame) since (0: not waiting) */
    uint64_t opened_ns;        /* its timeline's zero (stream_trace) */
    gcd_stream *next;          /* set->list */
};

/* One transfer at the pool: a read into a part's input or into buf, a write of output, or a placement. */
typedef struct stream_io {
    gcd_io_task t;
    gcd_stream *s;
    gcd_request *part;         /* a part's read, or the part whose output is placed */
    gcd_shared_output *shared; /* a write: the buffer it writes from, one reference */
    gcd_stream_place_fn place; /* a placement: makes the part's output bytes on the pool thread */
    bool ready;                /* a placement (or an output ring's write) back from the pool */
    struct stream_io *next;    /* the next placement (or ring write) in stream order */
    uint8_t *rest;             /* a settle: the bytes before the part's read, then those it leaves */
    size_t rest_len;
} stream_io;

/* stream_session.c: the session's state and answers */
bool stream_is_ring(const gcd_stream *s);
bool stream_reads_parts(const gcd_stream *s);
bool stream_can_send(const gcd_stream *s);
bool stream_may_put(gcd_stream *s, size_t len);
void stream_trace(const gcd_stream *s, const char *event, uint64_t seq, uint64_t a, uint64_t b);
void stream_fragment_response(const gcd_stream *s, Gpucomp__Response *resp);
void stream_send_fragment(gcd_stream *s, const uint8_t *data, size_t len);
void stream_send_credit(gcd_stream *s);
void stream_fail(gcd_stream *s, const gc_error *err);
void stream_fail_after_output(gcd_stream *s, const gc_error *err);
void stream_end_output(gcd_stream *s);
void stream_maybe_free(gcd_stream *s);
void stream_drop_buffer(gcd_stream *s);
bool stream_reserve(gcd_stream *s, size_t more, gc_error *err);
bool stream_advance_consumed(gcd_stream *s);
void stream_pump(gcd_stream *s);

/* stream_io.c: reads, settles, peeks and writes at the I/O pool */
bool stream_io_start(gcd_stream *s, stream_io *x, gc_error *err);
void stream_io_end(stream_io *x);
void stream_io_error(gc_error *err, const gcd_io_task *t, const char *what);
void stream_start_part(gcd_stream *s, gcd_request *r);
bool stream_peek(gcd_stream *s, size_t from, size_t to, gc_error *err);
bool stream_write_out(gcd_stream *s, gcd_shared_output *o, const uint8_t *from, size_t len);
bool stream_write_copy(gcd_stream *s, const void *data, size_t len);
void stream_release_written(gcd_stream *s, gcd_shared_output *o, size_t len);

/* stream_oring.c: an output ring (docs/PROTOCOL.md, "Output rings") */
bool stream_has_oring(const gcd_stream *s);
bool stream_writes_out(const gcd_stream *s);
bool stream_oring_push(gcd_stream *s, gcd_shared_output *o, const uint8_t *from, size_t len);
void stream_oring_credit(gcd_stream *s, const Gpucomp__Request *m);
void stream_oring_drop(gcd_stream *s);

#endif
