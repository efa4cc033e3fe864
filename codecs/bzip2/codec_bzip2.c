/* codec_bzip2.c - the bzip2 codec's entry in the codec table (docs/BZIP2.md). */
#include "codec.h"

#include <stdlib.h>
#include <string.h>

#include "bzip2.h"
#include "completions.h"
#include "fd_payload.h"
#include "gc_mem.h"
#include "part_cache.h"
#include "gpu.h"
#include "parallel.h"
#include "settings.h"
#include "shared_output.h"
#include "stream.h"

/* What a stream's part carries to its engine and back (r->part_state). */
typedef struct bz2_part {
    uint32_t blocks; /* compress: blocks in the part's stream */
    /* compress, set by emit: where its blocks join the output; place_compressed splices them */
    bz2_joint joint;
    bz2_dstate ds; /* decompress: where decoding resumes, then where it stopped */
    size_t used;   /* decompress: input bytes wholly consumed */
    /* decompress: the part begins at a magic found in its input, not where the part before it
     * stopped (bz2_dstate_at_magic): the stream confirms it in its turn or runs it again */
    bool spec;
    bool failed;        /* spec: its decode failed (a chance magic, or damage the exact rerun reports) */
    bool blind;         /* no magic found where it begins: it is decoded only once the part before is */
    unsigned start_bit; /* spec: the bit of input[0] where its magic begins */
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

/* Whether a decompress part may send its output while it decodes (stream_session.c sets progress_to). */
static bool shares_output(const gcd_request *r)
{
    const bz2_part *part = r->part_state;
    return r->op == GPUCOMP__OP__OP_DECOMPRESS && part && !part->spec && r->progress_to && r->out_fd < 0 &&
           part->ds.out_soft;
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
    uint8_t *buf = gcd_part_cache_alloc(r->uid, cap);
    if (!buf || !(r->shared = gcd_shared_output_wrap(buf, r->uid))) {
        gcd_part_cache_free(r->uid, buf);
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
static int run_cpu_part(gcd_request *r, unsigned threads);

/*
 * A part that begins at a magic found in its input may have begun at a
 * chance match: its failure is not the stream's (the stream runs it again
 * from where the part before it stopped, which says what is wrong).
 */
static int run_cpu(gcd_request *r, unsigned threads)
{
    bz2_part *part = r->part_state;
    if (part && r->op == GPUCOMP__OP__OP_DECOMPRESS && part->blind) {
        r->output_len = 0;
        return GC_OK;
    }
    int rc = run_cpu_part(r, threads);
    if (rc == GC_OK || !part || !part->spec || r->op != GPUCOMP__OP__OP_DECOMPRESS)
        return rc;
    gcd_request_drop_output(r);
    r->error = (gc_error){ 0 };
    part->failed = true;
    return GC_OK;
}

static int run_cpu_part(gcd_request *r, unsigned threads)
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
        /* on every thread: a fresh memfd's pages are made as they are first written */
        if (rc == GC_OK)
            gc_parallel_copy(r->output, out, out_len, threads);
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
    const bz2_part *part = r->part_state;
    if (part && r->op == GPUCOMP__OP__OP_DECOMPRESS && part->blind)
        return false; /* nothing to decode yet (run_cpu) */
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
    gc_mem_advise_huge(grown, cap);
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

/* Compress parts: bzip2.h's rules (bz2_stream_cut_compress). Decompress parts: at least
 * BZ2_STREAM_DECOMPRESS_PART (the GPU's fixed cost per job wants large parts,
 * docs/history/BENCHMARKS-2026-11-27.md "Streams"), cut at the first magic after it; at most
 * twice it (then cut blind: no magic means no block boundary, so damage or garbage). */
#define STREAM_COMPRESS_PART BZ2_STREAM_COMPRESS_PART
#define STREAM_DECOMPRESS_PART BZ2_STREAM_DECOMPRESS_PART
/* A file stream's first decompress part (no smaller than the GPU's break-even), how many parts
 * what is left is shared among near the end, and how far past a part's target its cut looks for
 * a magic at first (more than a block's compressed size: a magic always comes within it). */
#define STREAM_DECOMPRESS_FIRST ((size_t)8 << 20)
#define STREAM_DECOMPRESS_TAIL_PARTS 2
#define STREAM_DECOMPRESS_LOOK ((size_t)2 << 20)
/* A file decompress part should hold about this many blocks: the GPU decodes a part's blocks side
 * by side, so a part of few large blocks (data that hardly compresses) leaves it idle; parts grow
 * up to the most (docs/DECISIONS.md, "Decompress parts by blocks"). */
#define STREAM_DECOMPRESS_BLOCKS 200
#define STREAM_DECOMPRESS_MOST ((size_t)128 << 20)

typedef struct bz2_stream {
    int level;       /* compress */
    bz2_joiner join; /* compress: the parts' streams joined into one */
    /* decompress: the parts emitted so far decoded the input up to bit `end`, in state ds */
    bz2_dstate ds;
    uint64_t end;
    /* ... and the input from byte stash_at that their last part did not use (the next part
     * begins after it, at a chance magic or blind, and is run again with it in front) */
    uint8_t *stash;
    size_t stash_len;
    uint64_t stash_at;
    /* decompress: where the next part begins (bit of the stream's input; blind: unknown) */
    bool prepared_any;
    uint64_t next_start;
    bool next_blind;
    /* decompress: the last cut, in bits of the buffer it was given, and the magic search */
    uint64_t cut_bit;
    bool cut_blind, cut_end;
    size_t scanned;     /* the buffer before this offset has no magic past the part's minimum */
    size_t block_bytes; /* a file's compressed bytes per block, from magics seen (0: none yet) */
    bz2_rle1_walk walk; /* compress: how far the buffer's block walk has gone */
} bz2_stream;

static void *stream_open(const gcd_request *proto, gc_error *err)
{
    bz2_stream *st = calloc(1, sizeof *st);
    if (!st) {
        gc_fail(err, GC_E_NOMEM, "out of memory");
        return NULL;
    }
    st->level = proto->level ? (int)proto->level : 9;
    st->join.level = st->level;
    return st;
}

/*
 * A compress part (bz2_stream_cut_compress). The cut runs on the event loop,
 * so the walk goes on as input arrives (bz2_rle1_walk_to): a call walks what
 * the reads since the last one brought, never the part again.
 */
static void cut_compress(bz2_stream *st, const uint8_t *buf, size_t avail, bool final, bool flush, size_t *take)
{
    *take = bz2_stream_cut_compress(&st->walk, buf, avail, final, flush, st->level);
}

/* A flush: the part ends at the last magic of the buffer (everything before it decodes now). */
static bool last_magic(const uint8_t *buf, size_t avail, uint64_t *bit)
{
    uint64_t at, found = 0;
    for (size_t from = 1; bz2_find_part_start(buf, avail, from, &at) == GC_OK; from = (size_t)(at / 8) + 1)
        found = at;
    *bit = found;
    return found >= 8;
}

/*
 * A decompress part: at least STREAM_DECOMPRESS_PART bytes, up to the first
 * magic after them (where the next part begins), the last one to the end.
 * Its last byte also begins the next part when the magic is not byte aligned.
 */
static void cut_decompress(bz2_stream *st, const uint8_t *buf, size_t avail, bool final, bool flush, size_t *take)
{
    const size_t part = STREAM_DECOMPRESS_PART, most = 2 * part;
    uint64_t at;
    *take = 0;
    st->cut_end = false;
    if (final && avail <= most) {
        *take = avail;
        st->cut_end = true;
    } else if (avail < part) {
        if (flush && last_magic(buf, avail, &at)) {
            st->cut_bit = at;
            st->cut_blind = false;
            *take = (size_t)((at + 7) / 8);
        }
    } else if (bz2_find_part_start(buf, avail < most ? avail : most, st->scanned > part ? st->scanned : part,
                                   &at) == GC_OK) {
        st->cut_bit = at;
        st->cut_blind = false;
        *take = (size_t)((at + 7) / 8);
    } else if (avail >= most || final) {
        st->cut_bit = (uint64_t)most * 8;
        st->cut_blind = true;
        *take = most;
    } else {
        st->scanned = avail > 6 ? avail - 6 : 0;
    }
    if (*take)
        st->scanned = 0;
}

static int stream_cut(void *state, const gcd_request *proto, const uint8_t *buf, size_t avail, bool final,
                      bool flush, size_t *take, gc_error *err)
{
    (void)err;
    if (proto->op == GPUCOMP__OP__OP_COMPRESS)
        cut_compress(state, buf, avail, final, flush, take);
    else
        cut_decompress(state, buf, avail, final, flush, take);
    return GC_OK;
}

/* A file compress stream's cut sees its span this much more at a time, walking
 * only what each read added: the walk runs on the event loop. */
#define STREAM_COMPRESS_PEEK_STEP ((size_t)8 << 20)

/*
 * A file decompress part's size before the magic that ends it. The first
 * is small, so the engines start at once; near the end parts shrink with
 * what is left, so the lanes share the last of it and the output of the
 * part that finishes last, written after everything else, is short.
 */
static size_t decompress_target(const bz2_stream *st, size_t left)
{
    size_t most = STREAM_DECOMPRESS_PART, target = left / STREAM_DECOMPRESS_TAIL_PARTS;
    if (st->block_bytes > most / STREAM_DECOMPRESS_BLOCKS)
        most = st->block_bytes < STREAM_DECOMPRESS_MOST / STREAM_DECOMPRESS_BLOCKS
                   ? st->block_bytes * STREAM_DECOMPRESS_BLOCKS
                   : STREAM_DECOMPRESS_MOST;
    if (!st->prepared_any || target < STREAM_DECOMPRESS_FIRST)
        return STREAM_DECOMPRESS_FIRST;
    return target < most ? target : most;
}

/* The distance to the magic after the one at bit `at` of head, if head holds it: a block's size. */
static void learn_block_bytes(bz2_stream *st, const uint8_t *head, size_t head_len, uint64_t at)
{
    uint64_t next;
    if (bz2_find_part_start(head, head_len, (size_t)(at / 8) + 1, &next) != GC_OK)
        return;
    size_t seen = (size_t)((next - at) / 8);
    st->block_bytes = st->block_bytes ? (3 * st->block_bytes + seen) / 4 : seen;
}

/*
 * A file decompress stream's cut sees only a window from the part's
 * target size on, where a magic comes within a block's compressed size,
 * then up to the blind cut's limit; the part itself is read into its own
 * buffer.
 */
static void cut_file_decompress(bz2_stream *st, const uint8_t *head, size_t head_at, size_t head_len, size_t left,
                                size_t *take, size_t *see_from, size_t *see_to)
{
    size_t target = decompress_target(st, left), most = target + STREAM_DECOMPRESS_PART;
    size_t end = left < most ? left : most, seen = head_at + head_len;
    uint64_t at;
    st->cut_end = false;
    if (left < 2 * target) { /* the last part */
        *take = left;
        st->cut_end = true;
    } else if (head_len == 0 || head_at != target) {
        *see_from = target;
        *see_to = target + STREAM_DECOMPRESS_LOOK < end ? target + STREAM_DECOMPRESS_LOOK : end;
    } else if (bz2_find_part_start(head, head_len, 0, &at) == GC_OK) {
        learn_block_bytes(st, head, head_len, at);
        st->cut_bit = (uint64_t)target * 8 + at;
        st->cut_blind = false;
        *take = (size_t)((st->cut_bit + 7) / 8);
    } else if (seen < end) { /* no magic yet: look on to the limit (damage, or huge blocks) */
        *see_from = target;
        *see_to = end;
    } else if (end == left) {
        *take = left;
        st->cut_end = true;
    } else {
        st->cut_bit = (uint64_t)most * 8;
        st->cut_blind = true;
        *take = most;
    }
}

/*
 * A file stream's cut sees the span where it looks for a block start
 * (compress, up to twice a part, read by an I/O thread in steps, the walk
 * going on with each) or a magic (decompress, cut_file_decompress); the
 * part is then read again into its own buffer.
 */
static int stream_cut_file(void *state, const gcd_request *proto, const uint8_t *head, size_t head_at,
                           size_t head_len, size_t left, size_t *take, size_t *see_from, size_t *see_to,
                           gc_error *err)
{
    (void)err;
    bz2_stream *st = state;
    *take = *see_from = *see_to = 0;
    if (proto->op != GPUCOMP__OP__OP_COMPRESS) {
        cut_file_decompress(st, head, head_at, head_len, left, take, see_from, see_to);
        return GC_OK;
    }
    size_t see = left < 2 * STREAM_COMPRESS_PART ? left : 2 * STREAM_COMPRESS_PART;
    if (head_len >= see) {
        cut_compress(st, head, head_len, head_len == left, false, take);
    } else if ((*take = bz2_rle1_walk_to(head, head_len, false, &st->walk, STREAM_COMPRESS_PART,
                                         bz2_block_limit(st->level))) != 0) {
        memset(&st->walk, 0, sizeof st->walk);
    } else {
        *see_to = see - head_len < STREAM_COMPRESS_PEEK_STEP ? see : head_len + STREAM_COMPRESS_PEEK_STEP;
    }
    return GC_OK;
}

/* A file compress stream's parts read this much each, then end at their last block start. */
static size_t stream_span(const gcd_request *proto)
{
    return proto->op == GPUCOMP__OP__OP_COMPRESS ? STREAM_COMPRESS_PART : 0;
}

/*
 * The part keeps its bytes up to their last block start (section 3): it
 * begins at one, so its walk needs no state from before. A span longer than
 * one block's input has one past 0 unless the level's blocks can be longer
 * (-7 to -9 on long runs): then the part keeps nothing and all its bytes
 * begin the next, which reads a span more.
 */
static size_t stream_settle(const gcd_request *proto, const uint8_t *buf, size_t len, const void *scan,
                            size_t scan_at)
{
    int level = proto->level ? (int)proto->level : 9;
    return bz2_rle1_last_start(buf, len, bz2_block_limit(level), scan, scan_at);
}

/* A part's read, counted by tiles on the read's thread so that its settle, a chain, adds them up. */
static void *stream_scan(const gcd_request *proto, const uint8_t *buf, size_t len)
{
    (void)proto;
    return bz2_rle1_scan(buf, len);
}

static size_t stream_overlap(void *state)
{
    const bz2_stream *st = state;
    return !st->cut_end && !st->cut_blind && st->cut_bit % 8 ? 1 : 0;
}

/*
 * A decompress part's output: the CPU engine stops at a block boundary from
 * STREAM_PART_OUTPUT, or from the output its stream counts for it if less
 * (the part then runs again from there), so a stream of
 * zeros, which expands ~45000 times, still streams in bounded memory; the
 * device has no such stop and fails a part over STREAM_PART_OUTPUT_MAX,
 * which then reruns on the CPU engine (docs/DECISIONS.md, "Streams").
 */
#define STREAM_PART_OUTPUT ((size_t)256 << 20)
#define STREAM_PART_OUTPUT_MAX ((uint64_t)1 << 30)

/* Where a decompress part stops early: near the output its stream counts for it (stream_session.c). */
static size_t part_out_soft(const gcd_request *r)
{
    return r->part_out_guess && r->part_out_guess < STREAM_PART_OUTPUT ? (size_t)r->part_out_guess
                                                                       : STREAM_PART_OUTPUT;
}

/* Where a decompress part begins: the input's start exactly, else the magic its cut found. */
static void prepare_decompress(bz2_stream *st, gcd_request *r, bz2_part *part)
{
    if (!st->prepared_any)
        part->ds = st->ds;
    else if (st->next_blind)
        part->blind = true;
    else {
        part->spec = true;
        part->start_bit = (unsigned)(st->next_start - r->part_offset * 8);
        bz2_dstate_at_magic(&part->ds, part->start_bit);
    }
    part->ds.out_soft = part_out_soft(r);
    r->part_out_slack = BZ2_MAX_BLOCK_OUTPUT;
    st->prepared_any = true;
    st->next_start = r->part_offset * 8 + st->cut_bit;
    st->next_blind = st->cut_blind;
    if (r->max_output > STREAM_PART_OUTPUT_MAX)
        r->max_output = STREAM_PART_OUTPUT_MAX;
}

static int stream_prepare(void *state, gcd_request *r, gc_error *err)
{
    bz2_stream *st = state;
    bz2_part *part = calloc(1, sizeof *part);
    if (!part)
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    if (r->op == GPUCOMP__OP__OP_DECOMPRESS)
        prepare_decompress(st, r, part);
    r->part_state = part;
    return GC_OK;
}

/* On an I/O thread: the part's blocks, shifted in place to follow the part before it (bz2_join_place). */
static void place_compressed(gcd_request *r)
{
    const bz2_part *part = r->part_state;
    bz2_join_place(&part->joint, r->output);
}

/*
 * Append a part's blocks to the output (bz2_join_next): the loop only reads
 * where its body ends and its last bits, so the part after it knows where
 * it joins at once, and the shifting runs on the pool (place_compressed).
 * Only whole bytes are made; the last few bits go with the next part.
 */
static int emit_compressed(bz2_stream *st, gcd_stream *s, gcd_request *r, gc_error *err)
{
    bz2_part *part = r->part_state;
    int rc = bz2_join_next(&st->join, r->output, r->output_len, part->blocks, &part->joint, err);
    if (rc != GC_OK)
        return gc_fail(err, GC_E_INTERNAL, "bzip2 stream part: %s", err->msg);
    gcd_stream_put_placed(s, r, part->joint.bytes, place_compressed);
    return GC_OK;
}

/*
 * Bytes [from, from + n) of the stream's input in front of a part that
 * starts at byte `at`, from the stash. False if the stash lacks them (cannot
 * happen: a part's input ends where the next one's begins).
 */
static bool prepend_stash(bz2_stream *st, gcd_request *r, uint64_t from, gc_error *err)
{
    size_t n = (size_t)(r->part_offset - from);
    if (!st->stash || from < st->stash_at || r->part_offset > st->stash_at + st->stash_len) {
        gc_fail(err, GC_E_INTERNAL, "bzip2 stream: the input before a part is gone");
        return false;
    }
    if (gcd_request_charge(r, n, "input", err) != GC_OK)
        return false;
    uint8_t *in = realloc(r->input, (size_t)r->total_size + n);
    if (!in) {
        gcd_request_uncharge(r, n);
        gc_fail(err, GC_E_NOMEM, "out of memory for a stream part");
        return false;
    }
    memmove(in + n, in, (size_t)r->total_size);
    memcpy(in, st->stash + (from - st->stash_at), n);
    r->input = in;
    r->total_size += n;
    return true;
}

/* Make r's input begin at byte `from` of the stream's input (inside it or, from the stash, before it). */
static bool rebase_part(bz2_stream *st, gcd_request *r, uint64_t from, gc_error *err)
{
    if (from < r->part_offset && !prepend_stash(st, r, from, err))
        return false;
    if (from > r->part_offset) {
        uint64_t skip = from - r->part_offset;
        if (skip > r->total_size) {
            gc_fail(err, GC_E_INTERNAL, "bzip2 stream: a part ended past the next one");
            return false;
        }
        memmove(r->input, r->input + skip, (size_t)(r->total_size - skip));
        r->total_size -= skip;
    }
    r->part_offset = from;
    r->received = r->total_size;
    return true;
}

/* Run r again from where the stream's decode stands, with its exact state. */
static int rerun_exact(bz2_stream *st, gcd_stream *s, gcd_request *r, gc_error *err)
{
    bz2_part *part = r->part_state;
    if (!rebase_part(st, r, st->end / 8, err))
        return err->code;
    part->ds = st->ds;
    part->ds.bit = (unsigned)(st->end % 8);
    part->ds.out_soft = part_out_soft(r);
    part->spec = part->failed = part->blind = false;
    part->used = 0;
    gcd_stream_rerun(s, r);
    return GC_OK;
}

/* Whether a part that began at a magic continues the stream's decode; if so, st->ds is where it stopped. */
static bool confirms(bz2_stream *st, const gcd_request *r)
{
    const bz2_part *part = r->part_state;
    return !part->failed && r->part_offset * 8 + part->start_bit == st->end;
}

/* The input the part did not use: the next part begins after it and runs again with it. */
static int keep_tail(bz2_stream *st, const gcd_request *r, gc_error *err)
{
    uint64_t input_end = r->part_offset + r->total_size, from = st->end / 8;
    free(st->stash);
    st->stash = NULL;
    st->stash_len = 0;
    if (st->ds.garbage || from >= input_end)
        return GC_OK;
    st->stash_len = (size_t)(input_end - from);
    st->stash_at = from;
    if (!(st->stash = malloc(st->stash_len)))
        return gc_fail(err, GC_E_NOMEM, "out of memory");
    memcpy(st->stash, r->input + (from - r->part_offset), st->stash_len);
    return GC_OK;
}

/*
 * A decompress part in its turn. One that began at a magic counts only if
 * the decode in front stopped exactly there in a state it agrees with
 * (bz2_dstate_follow); otherwise its output is dropped and it runs again
 * from that exact state. One that stopped at out_soft runs on from there.
 */
static int emit_decompressed(bz2_stream *st, gcd_stream *s, gcd_request *r, gc_error *err)
{
    bz2_part *part = r->part_state;
    if (st->ds.garbage) /* everything after trailing garbage is dropped */
        return GC_OK;
    bz2_dstate next = st->ds;
    if (part->spec ? !confirms(st, r) || !bz2_dstate_follow(&next, &part->ds) : part->blind)
        return rerun_exact(st, s, r, err);
    if (!part->spec)
        next = part->ds;
    st->ds = next;
    st->end = (r->part_offset + part->used) * 8 + part->ds.bit;
    if (part->ds.garbage)
        gcd_stream_mark_garbage(s, r->part_offset + part->ds.garbage_at);
    gcd_stream_put_output(s, r);
    if (part->ds.soft_stopped && !part->ds.garbage)
        return rerun_exact(st, s, r, err);
    return keep_tail(st, r, err);
}

static int stream_emit(void *state, gcd_stream *s, gcd_request *r, gc_error *err)
{
    if (r->op == GPUCOMP__OP__OP_COMPRESS)
        return emit_compressed(state, s, r, err);
    return emit_decompressed(state, s, r, err);
}

static void stream_close(void *state)
{
    bz2_stream *st = state;
    free(st->stash);
    free(st);
}

/* Compress: the end-of-stream marker and combined CRC (a stream of no parts is just a header). */
static int stream_finish(void *state, gcd_stream *s, gc_error *err)
{
    (void)err;
    bz2_stream *st = state;
    uint8_t out[16];
    size_t n =
        bz2_join_finish(&st->join, out); /* compress: every stream has at least its (maybe empty) last part */
    if (n)
        gcd_stream_put(s, out, n);
    return GC_OK;
}

static const gcd_stream_ops stream_ops = {
    .open = stream_open,
    .cut = stream_cut,
    .cut_file = stream_cut_file,
    .span = stream_span,
    .settle = stream_settle,
    .scan = stream_scan,
    .overlap = stream_overlap,
    .prepare = stream_prepare,
    .emit = stream_emit,
    .finish = stream_finish,
    .close = stream_close,
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
