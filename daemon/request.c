/* request.c - request lifetime (see request.h). */
#include "request.h"

#include <stdlib.h>

#include "fd_payload.h"

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
    return r;
}

void gcd_request_free(gcd_request *r)
{
    if (!r)
        return;
    gcd_fd_payload_release(r);
    free(r->input);
    free(r->output);
    free(r);
}
