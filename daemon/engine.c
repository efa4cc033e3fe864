/* engine.c - codec dispatch for one request (see engine.h). */
#include "engine.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "bzip2.h"
#include "fd_payload.h"
#include "rle.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static rle_options rle_opts(const gcd_request *r, unsigned threads)
{
    return (rle_options){ .width = r->element_width, .chunk_size = r->chunk_size, .threads = threads };
}

int gcd_engine_check(const gcd_request *r, gc_error *err)
{
    if (r->op != GPUCOMP__OP__OP_COMPRESS && r->op != GPUCOMP__OP__OP_DECOMPRESS)
        return gc_fail(err, GC_E_UNSUPPORTED, "unsupported operation %d", (int)r->op);
    switch (r->codec) {
    case GPUCOMP__CODEC__CODEC_RLE: {
        rle_options in = rle_opts(r, 1), out;
        return r->op == GPUCOMP__OP__OP_COMPRESS ? rle_options_resolve(&in, &out, err) : GC_OK;
    }
    case GPUCOMP__CODEC__CODEC_BZIP2:
        if (r->level > 9)
            return gc_fail(err, GC_E_INVALID, "bzip2 level %u out of range 1..9", r->level);
        return GC_OK;
    default:
        return gc_fail(err, GC_E_UNSUPPORTED, "unknown codec %d (this daemon knows rle and bzip2)",
                       (int)r->codec);
    }
}

static int rle_compress_request(gcd_request *r, unsigned threads)
{
    rle_options opt = rle_opts(r, threads);
    size_t cap = rle_compress_bound(r->total_size, &opt);
    int rc = gcd_request_alloc_output(r, cap, &r->error);
    if (rc != GC_OK)
        return rc;
    return rle_compress(r->input, r->total_size, &opt, r->output, cap, &r->output_len, &r->error);
}

static int rle_decompress_request(gcd_request *r, unsigned threads)
{
    rle_frame_info info;
    int rc = rle_frame_parse(r->input, r->total_size, &info, &r->error);
    if (rc != GC_OK)
        return rc;
    if (info.original_size > r->max_output)
        return gc_fail(&r->error, GC_E_LIMIT,
                       "rle: frame would decompress to %llu bytes, over the limit of %llu",
                       (unsigned long long)info.original_size, (unsigned long long)r->max_output);
    rc = gcd_request_alloc_output(r, info.original_size, &r->error);
    if (rc != GC_OK)
        return rc;
    return rle_decompress(r->input, r->total_size, threads, r->output, info.original_size,
                          &r->output_len, &r->error);
}

/* The bzip2 decoder asks before its output buffer grows: growth is charged to the request. */
static bool charge_growth(void *ctx, size_t more)
{
    gcd_request *r = ctx;
    gc_error ignored;
    if (gcd_request_charge(r, more, "output", &ignored) != GC_OK)
        return false;
    r->output_charge += more;
    return true;
}

/*
 * The bzip2 codec allocates its own output (charged as it grows when
 * decompressing, once made when compressing); an fd request gets it copied
 * into its memfd, charged there instead.
 */
static int bzip2_request(gcd_request *r, unsigned threads)
{
    gc_job job = { .cancel = &r->cancelled, .may_grow = charge_growth, .ctx = r };
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc;
    if (r->op == GPUCOMP__OP__OP_COMPRESS) {
        bz2_options opt = { .level = (int)r->level, .threads = threads, .job = &job };
        rc = bz2_compress(r->input, r->total_size, &opt, &out, &out_len, &r->error);
        if (rc == GC_OK && r->out_fd < 0) {
            rc = gcd_request_charge(r, out_len, "output", &r->error);
            if (rc == GC_OK)
                r->output_charge += out_len;
        }
    } else {
        rc = bz2_decompress_job(r->input, r->total_size, r->max_output, threads, &job, &out, &out_len,
                                &r->error);
    }
    if (rc == GC_OK && r->out_fd >= 0) {
        gcd_request_uncharge(r, r->output_charge); /* the staging buffer: freed right after the copy */
        r->output_charge = 0;
        rc = gcd_request_alloc_output(r, out_len, &r->error);
        if (rc == GC_OK && out_len)
            memcpy(r->output, out, out_len);
        free(out);
    } else if (rc == GC_OK) {
        r->output = out;
    } else {
        free(out);
    }
    r->output_len = rc == GC_OK ? out_len : 0;
    return rc;
}

int gcd_engine_compute_cpu(gcd_request *r, unsigned threads)
{
    if (gcd_request_is_registration(r))
        return gcd_fd_payload_register(r);
    if (r->codec == GPUCOMP__CODEC__CODEC_BZIP2)
        return bzip2_request(r, threads);
    if (r->op == GPUCOMP__OP__OP_COMPRESS)
        return rle_compress_request(r, threads);
    return rle_decompress_request(r, threads);
}

void gcd_engine_finish(gcd_request *r)
{
    if (r->error.code != GC_OK) {
        if (!r->error.msg[0]) /* a codec that returned a code without a message */
            gc_fail(&r->error, r->error.code, "%s", gc_status_str(r->error.code));
        r->output_len = 0;
    }
    /* The input is no longer needed: release it before the response is written. */
    if (!r->input_mapped) {
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
    uint64_t start = now_ns();
    gc_error_clear(&r->error);
    r->backend = GPUCOMP__BACKEND__BACKEND_CPU; /* a registration may say GPU: pinned */
    int rc = gcd_engine_compute_cpu(r, threads);
    if (rc != GC_OK && r->error.code == GC_OK)
        r->error.code = (gc_status)rc;
    r->engine_ns = now_ns() - start;
    gcd_engine_finish(r);
}
