/* request.c - request lifetime (see request.h). */
#include "request.h"

#include <stdlib.h>
#include <unistd.h>

#include "budget.h"
#include "fd_map_cache.h"
#include "fd_payload.h"
#include "part_cache.h"
#include "shared_output.h"

gcd_request *gcd_request_new(struct gcd_conn *conn, const Gpucomp__Request *first)
{
    gcd_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->id = first->id;
    r->op = first->op;
    r->codec = first->codec;
    if (first->options) {
        r->level = first->options->level;
        r->element_width = first->options->element_width;
        r->chunk_size = first->options->chunk_size;
    }
    r->max_output = first->max_output;
    r->total_size = first->total_size;
    r->conn = conn;
    r->backend = GPUCOMP__BACKEND__BACKEND_CPU;
    r->in_fd = r->out_fd = -1;
    atomic_init(&r->cancelled, false);
    atomic_init(&r->output_final, 0);
    return r;
}

int gcd_request_charge(gcd_request *r, uint64_t bytes, const char *what, gc_error *err)
{
    if (!r->budget || bytes == 0)
        return GC_OK;
    if (gcd_budget_try_charge(r->budget, r->uid, bytes)) {
        r->charged += bytes;
        return GC_OK;
    }
    if (!gcd_budget_could_fit(r->budget, bytes))
        return gc_fail(err, GC_E_LIMIT,
                       "%s of %llu bytes exceeds the %llu bytes of daemon memory one user may hold", what,
                       (unsigned long long)bytes, (unsigned long long)gcd_budget_uid_limit(r->budget));
    return gc_fail(err, GC_E_LIMIT,
                   "%s of %llu bytes does not fit the daemon's memory budget now "
                   "(%llu of %llu bytes held, %llu by this user): retry later",
                   what, (unsigned long long)bytes, (unsigned long long)gcd_budget_in_use(r->budget),
                   (unsigned long long)gcd_budget_limit(r->budget),
                   (unsigned long long)gcd_budget_uid_in_use(r->budget, r->uid));
}

void gcd_request_uncharge(gcd_request *r, uint64_t bytes)
{
    if (bytes > r->charged)
        bytes = r->charged;
    if (r->budget)
        gcd_budget_release(r->budget, r->uid, bytes);
    r->charged -= bytes;
}

int gcd_request_attach_fds(gcd_request *r, gc_error *err)
{
    int rc = gcd_fd_payload_map_input(r->in_fd, r->out_fd, r->total_size, r->conn, &r->in_map, err);
    if (rc != GC_OK)
        return rc;
    if (r->in_map)
        r->input = gcd_fd_map_addr(r->in_map);
    r->input_mapped = true;
    r->received = r->total_size;
    return GC_OK;
}

int gcd_request_alloc_output(gcd_request *r, size_t size, gc_error *err)
{
    int rc = gcd_request_charge(r, size, "output", err);
    if (rc != GC_OK)
        return rc;
    r->output_charge += size;
    if (r->out_fd < 0) {
        r->output = gcd_part_cache_alloc(r->uid, size);
        return r->output ? GC_OK : gc_fail(err, GC_E_NOMEM, "cannot allocate %zu bytes for the output", size);
    }
    rc = gcd_fd_payload_map_output(r->out_fd, size, r->conn, &r->out_map, err);
    if (rc == GC_OK && r->out_map)
        r->output = gcd_fd_map_addr(r->out_map);
    return rc;
}

void gcd_request_drop_output(gcd_request *r)
{
    if (r->out_map) {
        gcd_fd_map_release(r->out_map);
        r->out_map = NULL;
    } else if (r->shared) {
        gcd_shared_output_unref(r->shared);
        r->shared = NULL;
    } else {
        gcd_part_cache_free(r->uid, r->output);
    }
    r->output = NULL;
    r->output_len = 0;
    gcd_request_uncharge(r, r->output_charge);
    r->output_charge = 0;
}

/* Unmap and close what the memfd transport holds. */
static void release_fds(gcd_request *r)
{
    gcd_fd_map_release(r->in_map);
    r->in_map = NULL;
    if (r->input_mapped)
        r->input = NULL;
    if (r->out_map) {
        gcd_fd_map_release(r->out_map);
        r->out_map = NULL;
        r->output = NULL;
    }
    if (r->in_fd >= 0)
        close(r->in_fd);
    if (r->out_fd >= 0)
        close(r->out_fd);
    r->in_fd = r->out_fd = -1;
}

void gcd_request_free(gcd_request *r)
{
    if (!r)
        return;
    release_fds(r);
    gcd_part_cache_free(r->uid, r->input_base ? r->input_base : r->input);
    if (r->shared) /* the frames that carry it may outlive the request */
        gcd_shared_output_unref(r->shared);
    else
        gcd_part_cache_free(r->uid, r->output);
    free(r->part_state);
    free(r->part_scan);
    gcd_request_uncharge(r, r->charged);
    free(r);
}
