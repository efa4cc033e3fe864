/*
 * request.h - one client request, from its first frame to its response.
 *
 * Ownership: a request belongs to its connection while it is being
 * assembled, to a worker while the engine runs it, and to the event loop
 * again while its response is written. Only the engine fields (result) are
 * written off the loop thread, and only while the worker owns it.
 */
#ifndef GCD_REQUEST_H
#define GCD_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gc_status.h"
#include "proto/gpucomp.pb-c.h"

struct gcd_conn;
struct gcd_budget;
struct gcd_completions;
struct gcd_shared_output;

typedef struct gcd_request {
    uint64_t id;
    Gpucomp__Op op;
    Gpucomp__Codec codec;
    uint32_t level;
    uint32_t element_width;
    uint32_t chunk_size;
    uint64_t max_output; /* resolved: the client's limit capped by the daemon's */

    uint8_t *input;      /* total_size bytes (malloc'd, or mapped from in_fd) */
    uint8_t *input_base; /* the malloc'd block input lies inside, freed instead of it (NULL: input's own) */
    uint64_t total_size;
    uint64_t received;
    uint64_t input_charge;  /* of `charged`: the socket input's buffer, until it is freed */
    uint64_t output_charge; /* of `charged`: the output buffer */
    bool refused;           /* answered with an error; its later frames are dropped */

    /* zero-copy transport (fd_payload.h); -1 / false / NULL when unused */
    int in_fd, out_fd;
    bool input_mapped;
    struct gcd_fd_map *in_map, *out_map;

    /* result, written by the engine */
    gc_error error; /* code GC_OK on success */
    uint8_t *output;
    size_t output_len;
    Gpucomp__Backend backend;
    uint64_t engine_ns;
    bool device_declined; /* a device handed it back (device.h): the lane reruns it on the CPU */

    /* memory budget (budget.h): everything charged for this request, released when it is freed */
    struct gcd_budget *budget;
    uid_t uid;
    uint64_t charged;
    atomic_bool cancelled; /* its client is gone or cancelled it: stop at the next chunk or block */
    bool client_cancelled; /* OP_CANCEL named it: a stopped run answers CANCELLED */
    /* a part of a stream (stream.h); stream NULL for a request of its own */
    struct gcd_stream *stream;
    uint64_t part_seq;       /* its place in the stream's output */
    uint64_t part_offset;    /* input offset of input[0] in the stream */
    bool part_final;         /* no input follows this part */
    bool part_flush;         /* a settled part that ends at the client's flush: it keeps all its bytes */
    void *part_state;        /* the codec's (codec.h gcd_stream_ops.prepare; freed with the request) */
    void *part_scan;         /* the codec's look at its read until it settles (gcd_stream_ops.scan; freed) */
    uint64_t part_out_guess; /* stream: the output it counts for this part while it runs (0: none yet) */
    uint64_t part_out_slack; /* codec: how far past part_out_guess its output may still go */
    /* A part whose output goes out while its engine still writes it (stream_session.c): output is
     * shared->buf, freed through shared; the engine announces each final prefix to
     * progress_to (completions.h), and the loop sends it. */
    struct gcd_shared_output *shared;
    struct gcd_completions *progress_to;
    atomic_size_t output_final; /* engine: bytes of output that are final */
    size_t output_sent;         /* loop: bytes of output queued to the client */
    bool progress_queued;       /* in progress_to's list (under its lock) */
    struct gcd_request *progress_next;

    struct gcd_conn *conn;
    struct gcd_request *next;                      /* in the connection's assembly list or a queue */
    struct gcd_request *flight_prev, *flight_next; /* the connection's requests at the workers and lanes */
} gcd_request;

/* The one callback shape for handing a request on (a finished request, one
 * to reroute, one to deliver); each use says which thread calls it. */
typedef void (*gcd_request_fn)(gcd_request *r, void *ctx);

/* Allocate a request from the first frame of its id (no payload copied yet). */
gcd_request *gcd_request_new(struct gcd_conn *conn, const Gpucomp__Request *first);

/* Free a request and its buffers, releasing everything it has charged. */
void gcd_request_free(gcd_request *r);

/* Charge bytes to the request's user (any thread); GC_E_LIMIT with a message if they do not fit. */
int gcd_request_charge(gcd_request *r, uint64_t bytes, const char *what, gc_error *err);

/* Give back bytes charged earlier (at most what the request holds). */
void gcd_request_uncharge(gcd_request *r, uint64_t bytes);

/* Seal and map r->in_fd as r->input (total_size bytes; fd_payload.h), r->out_fd kept for the output. */
int gcd_request_attach_fds(gcd_request *r, gc_error *err);

/*
 * Make r->output a buffer of `size` bytes: malloc'd, or for an fd request
 * the output memfd grown to size, sealed against shrinking and mapped
 * (NULL when size is 0). The size is charged to the memory budget first:
 * GC_E_LIMIT when it does not fit.
 */
int gcd_request_alloc_output(gcd_request *r, size_t size, gc_error *err);

/* Give the output buffer (and its charge) back: a device failure reruns the request. */
void gcd_request_drop_output(gcd_request *r);

/* OP_REGISTER / OP_UNREGISTER: no codec work, one descriptor names the file. */
static inline bool gcd_op_is_registration(Gpucomp__Op op)
{
    return op == GPUCOMP__OP__OP_REGISTER || op == GPUCOMP__OP__OP_UNREGISTER;
}

static inline bool gcd_request_is_registration(const gcd_request *r)
{
    return gcd_op_is_registration(r->op);
}

/* Whole input present. */
static inline bool gcd_request_complete(const gcd_request *r)
{
    return r->received == r->total_size;
}

#endif
