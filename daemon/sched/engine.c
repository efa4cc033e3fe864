/* engine.c - codec dispatch for one request (see engine.h). */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "codec.h"
#include "fd_payload.h"
#include "gc_clock.h"

/* The codecs the table holds, as words ("a, b and c"): the answer to an unknown codec names them. */
static void known_codecs(char *buf, size_t size)
{
    unsigned n;
    const gcd_codec *const *all = gcd_codec_all(&n);
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s",
                               i == 0       ? ""
                               : i + 1 == n ? " and "
                                            : ", ",
                               all[i]->name);
}

int gcd_engine_check(const gcd_request *r, gc_error *err)
{
    if (r->op != GPUCOMP__OP__OP_COMPRESS && r->op != GPUCOMP__OP__OP_DECOMPRESS)
        return gc_fail(err, GC_E_UNSUPPORTED, "unsupported operation %d", (int)r->op);
    const gcd_codec *codec = gcd_codec_find(r->codec);
    if (!codec) {
        char known[128];
        known_codecs(known, sizeof known);
        return gc_fail(err, GC_E_UNSUPPORTED, "unknown codec %d (this daemon knows %s)", (int)r->codec, known);
    }
    return codec->check(r, err);
}

/* OP_REGISTER / OP_UNREGISTER of r->in_fd for r's connection; backend GPU if its pages were page-locked. */
static int register_fd(gcd_request *r)
{
    bool pinned = false;
    r->backend = GPUCOMP__BACKEND__BACKEND_CPU;
    int rc = gcd_fd_payload_register(r->in_fd, r->op == GPUCOMP__OP__OP_UNREGISTER, r->total_size, r->conn,
                                     &pinned, &r->error);
    if (rc == GC_OK && pinned)
        r->backend = GPUCOMP__BACKEND__BACKEND_GPU;
    return rc;
}

int gcd_engine_compute_cpu(gcd_request *r, unsigned threads)
{
    if (gcd_request_is_registration(r))
        return register_fd(r);
    const gcd_codec *codec = gcd_codec_find(r->codec); /* gcd_engine_check admitted it */
    if (!codec)
        return gc_fail(&r->error, GC_E_INTERNAL, "codec %d vanished from the table", (int)r->codec);
    return codec->run_cpu(r, threads);
}

void gcd_engine_finish(gcd_request *r)
{
    if (r->error.code != GC_OK) {
        if (!r->error.msg[0]) /* a codec that returned a code without a message */
            gc_fail(&r->error, r->error.code, "%s", gc_status_str(r->error.code));
        r->output_len = 0;
    }
    /* The input is no longer needed: release it before the response is written.
     * A stream's part keeps it until its turn: the unused tail of a chained
     * part's input begins the next part (stream.h). */
    if (!r->input_mapped && !r->stream) {
        free(r->input);
        r->input = NULL;
        gcd_request_uncharge(r, r->input_charge);
        r->input_charge = 0;
    }
}

static bool cancelled(gcd_request *r)
{
    if (!atomic_load_explicit(&r->cancelled, memory_order_relaxed))
        return false;
    gc_fail(&r->error, GC_E_IO, "the client disconnected: request cancelled");
    r->output_len = 0;
    gcd_engine_finish(r);
    return true;
}

/*
 * A user whose share of the budget is full (typically: answers it does not
 * read) gets no more work run for it until its share drains.
 */
static bool over_share(gcd_request *r)
{
    if (!r->budget || gcd_request_is_registration(r))
        return false;
    uint64_t held = gcd_budget_uid_in_use(r->budget, r->uid);
    held -= r->charged < held ? r->charged : held; /* its own input does not count */
    if (held < gcd_budget_uid_limit(r->budget))
        return false;
    gc_fail(&r->error, GC_E_LIMIT,
            "this user holds its whole share of the daemon's memory (%llu bytes, answers not yet "
            "read among them): request not run",
            (unsigned long long)held);
    gcd_engine_finish(r);
    return true;
}

bool gcd_engine_skip(gcd_request *r)
{
    return cancelled(r) || over_share(r);
}

void gcd_engine_run_cpu(gcd_request *r, unsigned threads)
{
    if (gcd_engine_skip(r))
        return;
    uint64_t start = gc_now_ns();
    gc_error_clear(&r->error);
    r->backend = GPUCOMP__BACKEND__BACKEND_CPU; /* a registration may say GPU: pinned */
    int rc = gcd_engine_compute_cpu(r, threads);
    if (rc != GC_OK && r->error.code == GC_OK)
        r->error.code = (gc_status)rc;
    r->engine_ns = gc_now_ns() - start;
    gcd_engine_finish(r);
}
