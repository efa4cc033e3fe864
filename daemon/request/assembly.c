/* assembly.c - request assembly (see assembly.h). */
#include "assembly.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "engine.h"
#include "gc_clock.h"

void gcd_assembly_init(gcd_assembly *a, const gcd_config *cfg, struct gcd_budget *budget, uid_t uid,
                       struct gcd_conn *owner)
{
    memset(a, 0, sizeof *a);
    a->cfg = cfg;
    a->budget = budget;
    a->uid = uid;
    a->owner = owner;
}

static gcd_request *find(const gcd_assembly *a, uint64_t id)
{
    for (gcd_request *r = a->list; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

bool gcd_assembly_has(const gcd_assembly *a, uint64_t id)
{
    return find(a, id) != NULL;
}

/* Refused requests stay as tombstones: they count too, so what a client makes the daemon remember is bounded. */
bool gcd_assembly_id_fits(const gcd_assembly *a, unsigned n_streams)
{
    return a->n + n_streams < GCD_ASSEMBLY_MAX_IDS;
}

static void link_request(gcd_assembly *a, gcd_request *r)
{
    if (!a->list)
        a->started_ns = gc_now_ns();
    r->next = a->list;
    a->list = r;
    a->n++;
}

/* The incomplete-request timeout runs while any request is in assembly. */
static void unlink_request(gcd_assembly *a, gcd_request *r)
{
    for (gcd_request **p = &a->list; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            a->n--;
            break;
        }
    if (!a->list)
        a->started_ns = 0;
}

static void drop_request(gcd_assembly *a, gcd_request *r)
{
    unlink_request(a, r);
    gcd_request_free(r); /* releases its charges */
}

void gcd_assembly_clear(gcd_assembly *a)
{
    while (a->list)
        drop_request(a, a->list);
}

bool gcd_assembly_holds_memory(const gcd_assembly *a)
{
    for (const gcd_request *r = a->list; r; r = r->next)
        if (r->charged)
            return true;
    return false;
}

/* The socket input of a request is dropped: give its buffer and charge back. */
static void drop_input(gcd_request *r)
{
    if (r->input_mapped)
        return;
    free(r->input);
    r->input = NULL;
    gcd_request_uncharge(r, r->input_charge);
    r->input_charge = 0;
}

/*
 * Refuse a request: free what was assembled. If more frames of it are
 * coming, a tombstone stays to swallow them, so the client gets exactly one
 * answer per id.
 */
static gcd_assembly_outcome refuse(gcd_assembly *a, gcd_request *r, bool more_frames)
{
    if (!more_frames) {
        drop_request(a, r);
        return GCD_ASSEMBLY_REFUSED;
    }
    drop_input(r);
    r->refused = true;
    return GCD_ASSEMBLY_REFUSED;
}

unsigned gcd_assembly_fds_carried(const Gpucomp__Request *m)
{
    if (!m->payload_in_fd) /* a file stream's: its input, then its output; a ring stream's ring */
        return (m->input_fd ? 1u : 0u) + (m->output_fd ? 1u : 0u) + (m->ring && m->stream ? 1u : 0u) +
               (m->output_ring && m->stream ? 1u : 0u);
    return gcd_op_is_registration(m->op) ? 1 : 2;
}

static void close_fds(const int fds[2])
{
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Map the descriptors the request was given. */
static int attach_fds(gcd_request *r, gc_error *err)
{
    if (r->in_fd < 0 || r->out_fd < 0)
        return gc_fail(err, GC_E_PROTOCOL, "request %llu: payload_in_fd set but fewer than 2 descriptors arrived",
                       (unsigned long long)r->id);
    return gcd_request_attach_fds(r, err);
}

/* OP_REGISTER/OP_UNREGISTER: one descriptor, no payload; the worker does the (slow) mapping. */
static int admit_registration(const gcd_assembly *a, gcd_request *r, bool payload_in_fd, gc_error *err)
{
    if (!payload_in_fd || r->in_fd < 0)
        return gc_fail(err, GC_E_PROTOCOL, "request %llu: a registration carries one memfd (payload_in_fd)",
                       (unsigned long long)r->id);
    if (r->total_size > a->cfg->register_limit) /* before any mapping or page is touched */
        return gc_fail(err, GC_E_LIMIT, "registering %llu bytes exceeds the daemon's register-limit of %llu",
                       (unsigned long long)r->total_size, (unsigned long long)a->cfg->register_limit);
    r->received = r->total_size;
    return GC_OK;
}

static int admit(const gcd_assembly *a, gcd_request *r, bool payload_in_fd, gc_error *err)
{
    const gcd_config *cfg = a->cfg;
    if (gcd_request_is_registration(r))
        return admit_registration(a, r, payload_in_fd, err);
    int rc = gcd_engine_check(r, err);
    if (rc != GC_OK)
        return rc;
    if (r->total_size > cfg->max_request)
        return gc_fail(err, GC_E_LIMIT, "request of %llu bytes exceeds the daemon's max-request of %llu",
                       (unsigned long long)r->total_size, (unsigned long long)cfg->max_request);
    if (r->max_output == 0 || r->max_output > cfg->max_output)
        r->max_output = cfg->max_output;
    if (payload_in_fd)
        return attach_fds(r, err);
    rc = gcd_request_charge(r, r->total_size, "input", err);
    if (rc != GC_OK)
        return rc;
    r->input_charge = r->total_size;
    r->input = malloc(r->total_size ? r->total_size : 1);
    if (!r->input)
        return gc_fail(err, GC_E_NOMEM, "cannot allocate %llu bytes for the request",
                       (unsigned long long)r->total_size);
    return GC_OK;
}

/* First frame of an id: PING/STATS are answered at once, anything else starts a request. */
static gcd_assembly_outcome start_request(gcd_assembly *a, const Gpucomp__Request *m, const int fds[2],
                                          unsigned n_streams, gcd_request **started, gc_error *err)
{
    *started = NULL;
    if (m->op == GPUCOMP__OP__OP_PING || m->op == GPUCOMP__OP__OP_STATS) {
        close_fds(fds);
        return m->op == GPUCOMP__OP__OP_PING ? GCD_ASSEMBLY_PING : GCD_ASSEMBLY_STATS;
    }
    if (!gcd_assembly_id_fits(a, n_streams)) {
        close_fds(fds);
        return GCD_ASSEMBLY_FULL;
    }
    gcd_request *r = gcd_request_new(a->owner, m);
    if (!r) {
        close_fds(fds);
        return GCD_ASSEMBLY_NO_MEMORY;
    }
    r->budget = a->budget;
    r->uid = a->uid;
    r->in_fd = fds[0]; /* from here on gcd_request_free closes them */
    r->out_fd = fds[1];
    link_request(a, r);
    if (m->input_fd || m->output_fd) {
        gc_fail(err, GC_E_PROTOCOL, "request %llu: input_fd and output_fd belong to a stream's first frame",
                (unsigned long long)m->id);
        return refuse(a, r, !m->last);
    }
    if (m->payload_in_fd && (!m->last || m->payload.len)) {
        gc_fail(err, GC_E_PROTOCOL, "request %llu: a payload_in_fd request is one frame without payload",
                (unsigned long long)m->id);
        return refuse(a, r, !m->last);
    }
    if (admit(a, r, m->payload_in_fd, err) != GC_OK)
        return refuse(a, r, !m->last);
    *started = r;
    return GCD_ASSEMBLY_TAKEN;
}

/* A frame's payload goes after what r has; the last frame must complete it. */
static gcd_assembly_outcome append(gcd_assembly *a, gcd_request *r, const Gpucomp__Request *m, bool first,
                                   gcd_request **done, gc_error *err)
{
    if (m->payload_in_fd && !first) {
        gc_fail(err, GC_E_PROTOCOL, "request %llu: payload_in_fd on a frame that is not its first",
                (unsigned long long)r->id);
        return refuse(a, r, !m->last);
    }
    if (m->payload.len > r->total_size - r->received) {
        gc_fail(err, GC_E_PROTOCOL, "request %llu: payload exceeds its total_size of %llu bytes",
                (unsigned long long)r->id, (unsigned long long)r->total_size);
        return refuse(a, r, !m->last);
    }
    if (m->payload.len)
        memcpy(r->input + r->received, m->payload.data, m->payload.len);
    r->received += m->payload.len;
    if (!m->last)
        return GCD_ASSEMBLY_TAKEN;
    if (!gcd_request_complete(r)) {
        gc_fail(err, GC_E_PROTOCOL, "request %llu ended after %llu of %llu bytes", (unsigned long long)r->id,
                (unsigned long long)r->received, (unsigned long long)r->total_size);
        return refuse(a, r, false);
    }
    unlink_request(a, r);
    *done = r;
    return GCD_ASSEMBLY_COMPLETE;
}

gcd_assembly_outcome gcd_assembly_frame(gcd_assembly *a, const Gpucomp__Request *m, const int fds[2],
                                        unsigned n_streams, gcd_request **done, gc_error *err)
{
    *done = NULL;
    gcd_request *r = find(a, m->id);
    bool first = !r;
    if (!first) {
        close_fds(fds); /* only a first frame may carry descriptors */
    } else {
        gcd_assembly_outcome o = start_request(a, m, fds, n_streams, &r, err);
        if (!r)
            return o;
    }
    if (r->refused) {
        if (m->last)
            drop_request(a, r);
        return GCD_ASSEMBLY_TAKEN;
    }
    return append(a, r, m, first, done, err);
}

bool gcd_assembly_cancel(gcd_assembly *a, uint64_t id, gc_error *err)
{
    gcd_request *r = find(a, id);
    if (!r)
        return false;
    if (!r->refused) {
        gc_fail(err, GC_E_CANCELLED, "request %llu cancelled by the client", (unsigned long long)id);
        refuse(a, r, true);
    }
    return true;
}

bool gcd_assembly_must_wait(const gcd_assembly *a, const Gpucomp__Request *m, bool known, bool expired,
                            bool streams_await_input)
{
    if (m->payload_in_fd || gcd_op_is_registration(m->op) || m->op == GPUCOMP__OP__OP_PING ||
        m->op == GPUCOMP__OP__OP_STATS || m->op == GPUCOMP__OP__OP_CANCEL || m->total_size == 0 || m->stream ||
        known || find(a, m->id))
        return false;
    gcd_budget *b = a->budget;
    if (!gcd_budget_could_fit(b, m->total_size) || m->total_size > a->cfg->max_request)
        return false; /* admit refuses it with GC_E_LIMIT */
    if (gcd_budget_in_use(b) + m->total_size <= gcd_budget_limit(b) &&
        gcd_budget_uid_in_use(b, a->uid) + m->total_size <= gcd_budget_uid_limit(b))
        return false;
    /* A wait for memory its own connection holds could end only by timing out. */
    if (expired || gcd_assembly_holds_memory(a) || streams_await_input)
        return false; /* admit's charge refuses it: "retry later" */
    return true;
}
