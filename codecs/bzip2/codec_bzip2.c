/* codec_bzip2.c - the bzip2 codec's entry in the codec table (docs/BZIP2.md). */
#include "codec.h"

#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "completions.h"
#include "fd_payload.h"
#include "gpu.h"
#include "settings.h"
#include "shared_output.h"
#include "stream.h"

/* What a stream's part carries to its engine and back (r->part_state). */
typedef struct bz2_part {
    uint32_t blocks; /* compress: blocks in the part's stream */
    bz2_dstate ds;   /* decompress: where decoding resumes, then where it stopped */
    size_t used;     /* decompress: input bytes wholly consumed */
} bz2_part;

static int check(const gcd_request *r, gc_error *err)
{
    if (r->level > 9)
        return gc_fail(err, GC_E_INVALID, "bzip2 level %u out of range 1..9", r->level);
    return GC_OK;
}

static uint64_t work_bytes(const gcd_request *r)
{
    return r->total_size;
}

/* The decoder asks before its output buffer grows: growth is charged to the request. */
static bool charge_growth(void *ctx, size_t more)
{
    gcd_request *r = ctx;
    gc_error ignored;
    if (gcd_request_charge(r, more, "output", &ignored) != GC_OK)
        return false;
    r->output_charge += more;
    return true;
}

/* Compress into a buffer of the codec's own, charged once it exists (not run if it cannot be). */
static int compress(gcd_request *r, unsigned threads, const gc_job *job, uint8_t **out, size_t *out_len)
{
    bz2_options opt = { .level = (int)r->level, .threads = threads, .job = job };
    bz2_part *part = r->part_state;
    int rc =
        bz2_compress_counted(r->input, r->total_size, &opt, out, out_len, part ? &part->blocks : NULL, &r->error);
    if (rc == GC_OK && r->out_fd < 0) {
        rc = gcd_request_charge(r, *out_len, "output", &r->error);
        if (rc == GC_OK)
            r->output_charge += *out_len;
    }
    return rc;
}

static void announce(void *ctx, size_t final)
{
    gcd_completions_announce(ctx, final);
}

/* Whether a decompress part may send its output while it decodes (stream.c sets progress_to). */
static bool shares_output(const gcd_request *r)
{
    const bz2_part *part = r->part_state;
    return r->op == GPUCOMP__OP__OP_DECOMPRESS && part && r->progress_to && r->out_fd < 0 && part->ds.out_soft;
}

/*
 * Such a part decodes into a buffer that never moves, shared with the
 * frames that carry it, so the loop sends each block's output while the
 * next blocks decode (gcd_stream_part_progress). The buffer is reserved
 * whole: pages never written cost nothing, and the budget is charged block
 * by block as it fills.
 */
static int decompress_part_shared(gcd_request *r, unsigned threads, gc_job *job, size_t *out_len)
{
    bz2_part *part = r->part_state;
    size_t cap = part->ds.out_soft + BZ2_MAX_BLOCK_OUTPUT;
    if (r->max_output && r->max_output < cap)
        cap = (size_t)r->max_output;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf || !(r->shared = gcd_shared_output_wrap(buf))) {
        free(buf);
        return gc_fail(&r->error, GC_E_NOMEM, "out of memory for a stream part's output");
    }
    r->output = buf;
    job->progress = announce;
    return bz2_decompress_part_into(r->input, r->total_size, !r->part_final, &part->ds, r->max_output, buf, cap,
                                    threads, job, out_len, &part->used, &r->error);
}

/*
 * The bzip2 codec allocates its own output (charged as it grows when
 * decompressing, once made when compressing); an fd request gets it copied
 * into its memfd, charged there instead.
 */
static int run_cpu(gcd_request *r, unsigned threads)
{
    gc_job job = { .cancel = &r->cancelled, .may_grow = charge_growth, .ctx = r };
    uint8_t *out = NULL;
    size_t out_len = 0;
    bz2_part *part = r->part_state;
    int rc;
    if (shares_output(r)) {
        rc = decompress_part_shared(r, threads, &job, &out_len);
        r->output_len = rc == GC_OK ? out_len : 0;
        return rc;
    }
    if (r->op == GPUCOMP__OP__OP_COMPRESS)
        rc = compress(r, threads, &job, &out, &out_len);
    else if (part) /* a stream's part: decode what is whole, say where it stopped */
        rc = bz2_decompress_part(r->input, r->total_size, !r->part_final, &part->ds, r->max_output, threads, &job,
                                 &out, &out_len, &part->used, &r->error);
    else
        rc = bz2_decompress_job(r->input, r->total_size, r->max_output, threads, &job, &out, &out_len, &r->error);
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

/*
 * The GPU backend encodes (the CPU engine's stream, byte for byte) and
 * decodes (the CPU engine's checks, its verdicts less exact: see
 * gpu_reruns_failures).
 */
static bool gpu_takes(const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_COMPRESS || r->op == GPUCOMP__OP__OP_DECOMPRESS;
}

/* bzip2's own settings (codec.h gcd_codec_option), by index. */
enum { OPTION_GPU_MIN_COMPRESS, OPTION_GPU_MIN_DECOMPRESS };
static const gcd_codec_option options[] = {
    [OPTION_GPU_MIN_COMPRESS] = { "gpu-min-bytes-bzip2",
                                  "smaller bzip2 compress requests run on the CPU engine (default 4M)", 4ull << 20,
                                  true },
    [OPTION_GPU_MIN_DECOMPRESS] = { "gpu-min-bytes-bzip2-decompress",
                                    "smaller bzip2 decompress requests (compressed input) run on the CPU engine "
                                    "(default 8M)",
                                    8ull << 20, true },
};

/*
 * The device's break-even, one per operation: the decoder has a larger fixed
 * latency per request than the encoder (docs/DECISIONS.md). A decompress
 * counts its compressed input: its output size is not known beforehand.
 */
static uint64_t gpu_min_bytes(const gcd_config *cfg, const gcd_request *r)
{
    unsigned option = r->op == GPUCOMP__OP__OP_DECOMPRESS ? OPTION_GPU_MIN_DECOMPRESS : OPTION_GPU_MIN_COMPRESS;
    return cfg->codec_options[gcd_codec_option_slot(&gcd_codec_bzip2, option)];
}

/* The first capacity a decode job gets: its output is rarely smaller than its input. */
#define GPU_DECODE_FIRST_CAP ((size_t)1 << 20)

/*
 * An fd request's decode output is its memfd from the first grow on: the file
 * keeps its bytes as it grows (only the mapping is made again), so nothing
 * is copied, and it grows to exactly the length asked (an output memfd is
 * sealed against shrinking; the device asks once per wave of blocks).
 */
static int grow_memfd(gcd_request *r, gc_gpu_job *job, size_t len, gc_error *err)
{
    gcd_request_drop_output(r);
    int rc = gcd_request_alloc_output(r, len, err);
    if (rc != GC_OK)
        return rc;
    job->dst = r->output;
    job->dst_cap = len;
    return GC_OK;
}

/*
 * A decode job's output, as the device asks for room (gpu.h `grow`): a
 * malloc'd buffer in r->output, charged to the request as the CPU decoder's
 * growth is (charge_growth), never beyond max_output. The capacity at least
 * doubles, so the copies stay linear in the output. An fd request's output
 * is its memfd (grow_memfd).
 */
static int gpu_grow(gc_gpu_job *job, size_t len, gc_error *err)
{
    gcd_request *r = job->user;
    if (len <= job->dst_cap)
        return GC_OK;
    if (len > r->max_output)
        return gc_fail(err, GC_E_LIMIT, "bzip2: decompressed size exceeds the %llu byte limit",
                       (unsigned long long)r->max_output);
    if (r->out_fd >= 0)
        return grow_memfd(r, job, len, err);
    size_t cap = job->dst_cap > SIZE_MAX / 2 ? SIZE_MAX : job->dst_cap * 2;
    if (cap < GPU_DECODE_FIRST_CAP)
        cap = GPU_DECODE_FIRST_CAP;
    if (cap < len)
        cap = len;
    if (cap > r->max_output)
        cap = (size_t)r->max_output; /* >= len */
    size_t more = cap - job->dst_cap;
    int rc = gcd_request_charge(r, more, "output", err);
    if (rc != GC_OK)
        return rc;
    uint8_t *grown = realloc(job->dst, cap);
    if (!grown) {
        gcd_request_uncharge(r, more);
        return gc_fail(err, GC_E_NOMEM, "bzip2: cannot grow the output to %zu bytes", cap);
    }
    r->output_charge += more;
    r->output = job->dst = grown;
    job->dst_cap = cap;
    return GC_OK;
}

/*
 * A compress's stream that outgrows gc_gpu_bzip2_encode_cap fails its job
 * with GC_E_LIMIT and the lane reruns the request on the CPU engine
 * (device.h). A decompress's output grows as it is decoded (gpu_grow).
 */
static int gpu_job(gcd_request *r, gc_gpu_job *job, size_t *out_cap)
{
    job->codec = GC_GPU_CODEC_BZIP2;
    if (r->op != GPUCOMP__OP__OP_COMPRESS) {
        const bz2_part *part = r->part_state;
        job->op = GC_GPU_DECODE;
        job->grow = gpu_grow;
        if (part) { /* a stream's part: the state goes back only if the device succeeds */
            job->partial = 1;
            job->part_more = !r->part_final;
            job->part = part->ds;
        }
        *out_cap = 0;
        return GC_OK;
    }
    job->op = GC_GPU_ENCODE;
    job->opt.bzip2.level = (int)r->level; /* 0 = 9, as bz2_options */
    *out_cap = gc_gpu_bzip2_encode_cap((size_t)r->total_size);
    return GC_OK;
}

/*
 * After a decode job: an fd request's output is in its memfd already
 * (grow_memfd); one whose output is empty never grew, so its memfd is sized
 * here, to 0 bytes, as the CPU path sizes it.
 */
static int gpu_finish(gcd_request *r, gc_gpu_job *job)
{
    bz2_part *part = r->part_state;
    if (job->op == GC_GPU_ENCODE && part)
        part->blocks = job->blocks;
    if (job->op == GC_GPU_DECODE && part && job->partial) {
        part->ds = job->part;
        part->used = job->part_used;
    }
    if (job->op != GC_GPU_DECODE || r->out_fd < 0 || r->out_map)
        return GC_OK;
    return gcd_request_alloc_output(r, 0, &r->error);
}

/*
 * A decompress the device fails, whatever the status (but GC_E_DEVICE),
 * reruns on the CPU engine: the client gets the CPU engine's exact status
 * and message, and a stream the device refuses but the CPU engine accepts
 * still decodes. A compress keeps the codec-neutral rule (device.h).
 */
static bool gpu_reruns_failures(const gcd_request *r)
{
    return r->op == GPUCOMP__OP__OP_DECOMPRESS;
}

/* ---- streams (docs/BZIP2.md, "Streaming") ---- */

/* Compress parts: one 32 MiB segment each, so their blocks are the whole input's. */
#define STREAM_COMPRESS_PART ((size_t)32 << 20)
/* Decompress parts: at least this much input (far over BZ2_PART_PROGRESS_BYTES; the GPU's fixed
 * cost per job wants large parts, docs/history/BENCHMARKS-2026-11-27.md "Streams"), at most twice it. */
#define STREAM_DECOMPRESS_PART ((size_t)32 << 20)

typedef struct bz2_stream {
    int level;         /* compress */
    bz2_splicer sp;    /* compress: the output as a bit string */
    bool started;      /* compress: the header is out */
    uint32_t combined; /* compress: the stream's combined CRC so far */
    bz2_dstate ds;     /* decompress: where the next part resumes */
} bz2_stream;

static void *stream_open(const gcd_request *proto, gc_error *err)
{
    bz2_stream *st = calloc(1, sizeof *st);
    if (!st) {
        gc_fail(err, GC_E_NOMEM, "out of memory");
        return NULL;
    }
    st->level = proto->level ? (int)proto->level : 9;
    return st;
}

/* A decompress part resumes where the previous one's decoding stopped. */
static bool stream_chained(const gcd_request *proto)
{
    return proto->op == GPUCOMP__OP__OP_DECOMPRESS;
}

/* A flush ends a compress part early (a new segment) and decodes what is whole. */
static int stream_cut(void *state, const gcd_request *proto, const uint8_t *buf, size_t avail, bool final,
                      bool flush, size_t *take, gc_error *err)
{
    (void)state, (void)buf, (void)err;
    size_t part = proto->op == GPUCOMP__OP__OP_COMPRESS ? STREAM_COMPRESS_PART : STREAM_DECOMPRESS_PART;
    size_t most = proto->op == GPUCOMP__OP__OP_COMPRESS ? part : 2 * part;
    *take = avail >= part || final || flush ? (avail < most ? avail : most) : 0;
    return GC_OK;
}

/*
 * A decompress part's output: the CPU engine stops at a block boundary from
 * STREAM_PART_OUTPUT (the rest of the input goes to the next part), so a
 * stream of zeros, which expands ~45000 times, still streams in bounded
 * memory; the device has no such stop and fails a part over
 * STREAM_PART_OUTPUT_MAX, which then reruns on the CPU engine. Smaller stops
 * cost the CPU engine more: each chained part copies the input it does not
 * use back for the next (docs/DECISIONS.md, "Streams").
 */
#define STREAM_PART_OUTPUT ((size_t)256 << 20)
#define STREAM_PART_OUTPUT_MAX ((uint64_t)1 << 30)

static int stream_prepare(void *state, gcd_request *r, gc_error *err)
{
    bz2_stream *st = state;
    bz2_part *part = calloc(1, sizeof *part);
    if (!part)
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    part->ds = st->ds;
    part->ds.out_soft = STREAM_PART_OUTPUT;
    if (r->op == GPUCOMP__OP__OP_DECOMPRESS && r->max_output > STREAM_PART_OUTPUT_MAX)
        r->max_output = STREAM_PART_OUTPUT_MAX;
    r->part_state = part;
    return GC_OK;
}

/* Append a part's blocks to the output: the header before the first, bit-spliced after the last. */
static int emit_compressed(bz2_stream *st, gcd_stream *s, const gcd_request *r, gc_error *err)
{
    const bz2_part *part = r->part_state;
    uint64_t body_bits;
    uint32_t combined;
    int rc = bz2_stream_body(r->output, r->output_len, &body_bits, &combined, err);
    if (rc != GC_OK)
        return gc_fail(err, GC_E_INTERNAL, "bzip2 stream part: %s", err->msg);
    uint8_t *out = malloc(body_bits / 8 + 8);
    if (!out)
        return gc_fail(err, GC_E_NOMEM, "out of memory splicing a stream part");
    size_t n = st->started ? 0 : bz2_splice_header(&st->sp, st->level, out);
    st->started = true;
    /* the body starts at bit 32, after the 4-byte header: byte aligned */
    n += bz2_splice(&st->sp, r->output + 4, body_bits, out + n);
    st->combined = bz2_combine_parts(st->combined, part->blocks, combined);
    gcd_stream_put(s, out, n);
    free(out);
    return GC_OK;
}

static int stream_emit(void *state, gcd_stream *s, gcd_request *r, size_t *carry, gc_error *err)
{
    bz2_stream *st = state;
    *carry = 0;
    if (r->op == GPUCOMP__OP__OP_COMPRESS)
        return emit_compressed(st, s, r, err);
    const bz2_part *part = r->part_state;
    st->ds = part->ds;
    *carry = r->total_size - part->used;
    if (part->ds.garbage)
        gcd_stream_mark_garbage(s, r->part_offset + part->ds.garbage_at);
    gcd_stream_put_output(s, r);
    return GC_OK;
}

/* Compress: the end-of-stream marker and combined CRC (a stream of no parts is just a header). */
static int stream_finish(void *state, gcd_stream *s, gc_error *err)
{
    (void)err;
    bz2_stream *st = state;
    uint8_t out[16];
    if (st->started) /* compress: every stream has at least its (maybe empty) last part */
        gcd_stream_put(s, out, bz2_splice_finish(&st->sp, st->combined, out));
    return GC_OK;
}

static const gcd_stream_ops stream_ops = {
    .chained = stream_chained,
    .open = stream_open,
    .cut = stream_cut,
    .prepare = stream_prepare,
    .emit = stream_emit,
    .finish = stream_finish,
};

const gcd_codec gcd_codec_bzip2 = {
    .id = GPUCOMP__CODEC__CODEC_BZIP2,
    .name = "bzip2",
    .options = options,
    .n_options = sizeof options / sizeof options[0],
    .check = check,
    .work_bytes = work_bytes,
    .run_cpu = run_cpu,
    .gpu_takes = gpu_takes,
    .gpu_min_bytes = gpu_min_bytes,
    .gpu_job = gpu_job,
    .gpu_finish = gpu_finish,
    .gpu_reruns_failures = gpu_reruns_failures,
    .stream = &stream_ops,
};
