/*
 * assembly.h - request assembly: a connection's request frames become
 * admitted requests, refusals or tombstones.
 *
 * The first frame of an id starts a request (or refuses it: unknown codec,
 * over a limit, memory that does not fit, bad descriptors); later frames
 * append payload; the last frame completes it. A refused request whose
 * client still sends frames stays as a tombstone that swallows them, so the
 * client gets exactly one answer per id. Requests in assembly and the
 * connection's streams count under one cap (GCD_ASSEMBLY_MAX_IDS).
 *
 * Only decisions and the requests' memory live here: no sockets, no event
 * loop. The connection (conn.c) reads frames, claims descriptors, sends the
 * answers this module asks for and submits complete requests; the frame
 * fuzzer (tests/fuzz/fuzz_frame.c) drives this module as the connection does.
 * Loop thread only.
 */
#ifndef GCD_ASSEMBLY_H
#define GCD_ASSEMBLY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/gpucomp.pb-c.h"
#include "request.h"
#include "settings.h"

struct gcd_budget;
struct gcd_conn;

/* Requests in assembly (refused ones included) and streams held, together, per
 * connection: every id a client makes the daemon remember is bounded. */
#define GCD_ASSEMBLY_MAX_IDS 64

typedef struct gcd_assembly {
    gcd_request *list;   /* requests still receiving frames, tombstones included */
    unsigned n;          /* in list; with the connection's streams at most GCD_ASSEMBLY_MAX_IDS */
    uint64_t started_ns; /* the oldest request in list began, else 0 */
    /* what every request of the connection is admitted against */
    const gcd_config *cfg;     /* limits (read per request: reload may change them) */
    struct gcd_budget *budget; /* charged for socket input */
    uid_t uid;                 /* the peer the charges belong to */
    struct gcd_conn *owner;    /* the requests' connection (fd_map_cache's owner of their mappings) */
} gcd_assembly;

/* What became of a request frame. */
typedef enum gcd_assembly_outcome {
    GCD_ASSEMBLY_TAKEN,     /* nothing to answer now (more frames to come, or a tombstone's frame) */
    GCD_ASSEMBLY_COMPLETE,  /* *done is whole and out of the assembly: submit it */
    GCD_ASSEMBLY_REFUSED,   /* answer err for the id (a failed request) */
    GCD_ASSEMBLY_NO_MEMORY, /* answer NOMEM "out of memory" for the id: nothing was made of it */
    GCD_ASSEMBLY_PING,      /* a first frame of OP_PING: answer it */
    GCD_ASSEMBLY_STATS,     /* a first frame of OP_STATS: answer it */
    GCD_ASSEMBLY_FULL       /* the id cap is reached: answer LIMIT and close the connection */
} gcd_assembly_outcome;

/* An empty assembly for a connection of uid. */
void gcd_assembly_init(gcd_assembly *a, const gcd_config *cfg, struct gcd_budget *budget, uid_t uid,
                       struct gcd_conn *owner);

/* Descriptors a request frame claims: two for a codec request over memfds, one to (un)register. */
unsigned gcd_assembly_fds_carried(const Gpucomp__Request *m);

/* Whether id is a request in assembly (or a tombstone). */
bool gcd_assembly_has(const gcd_assembly *a, uint64_t id);

/* Whether c may hold one more id, with n_streams streams held besides its requests. */
bool gcd_assembly_id_fits(const gcd_assembly *a, unsigned n_streams);

/*
 * One frame of a request (not a stream's, not OP_CANCEL, id not 0). fds are
 * the descriptors claimed for it (-1 where none): this takes them, whatever
 * the outcome. n_streams: the connection's streams, for the id cap. On
 * GCD_ASSEMBLY_COMPLETE *done is the request; on GCD_ASSEMBLY_REFUSED err
 * says why.
 */
gcd_assembly_outcome gcd_assembly_frame(gcd_assembly *a, const Gpucomp__Request *m, const int fds[2],
                                        unsigned n_streams, gcd_request **done, gc_error *err);

/*
 * OP_CANCEL of an id in assembly: true if id is one (a tombstone from now
 * on); err is then set when it must be answered CANCELLED (not for a
 * request answered already).
 */
bool gcd_assembly_cancel(gcd_assembly *a, uint64_t id, gc_error *err);

/*
 * Whether the first frame m must wait for memory before it is read (the
 * rules are docs/SECURITY.md's "No wait without an end"): its input does
 * not fit the budget now, and the memory it waits for is not its own
 * connection's (held by a request in assembly, or streams_await_input).
 * known: m's id is a stream's. expired: m has waited request-timeout
 * already. Not waiting, the frame is read: admission charges it or refuses it.
 */
bool gcd_assembly_must_wait(const gcd_assembly *a, const Gpucomp__Request *m, bool known, bool expired,
                            bool streams_await_input);

/* Whether a request in assembly holds memory (tombstones hold none). */
bool gcd_assembly_holds_memory(const gcd_assembly *a);

/* Drop every request in assembly (the connection closes). */
void gcd_assembly_clear(gcd_assembly *a);

#endif
