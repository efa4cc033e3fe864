/*
 * gpu.h - the CUDA backend of the codecs, as a plain C API: one batch call for
 * jobs of any codec it has kernels for (rle both ways, bzip2 both ways),
 * plus device-resident entry points for tests and benchmarks.
 *
 * Built from the .cu files of gpu/ and of each codec's cuda/ folder into gpu/libgccuda.a when configure
 * finds CUDA; otherwise gpu/gpu_stub.c provides the same functions
 * (no devices, every other call GC_E_UNSUPPORTED). Frames are byte-identical
 * to the CPU backend (codecs/rle/cpu, docs/FORMAT.md).
 *
 * Error policy: no function here aborts or exits. A CUDA failure returns
 * GC_E_DEVICE with cudaGetErrorString() in err->msg; after GC_E_DEVICE the
 * caller should rerun the work on the CPU and close the context (the device
 * may be in a sticky error state).
 *
 * Threads: a gc_gpu_ctx may be shared between threads: gc_gpu_run_batch
 * and the *_device calls serialise on a mutex inside the context. One context
 * per worker thread gives more overlap.
 */
#ifndef GC_GPU_H
#define GC_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "bzip2.h" /* bz2_dstate: where a stream part's decode resumes */
#include "gc_status.h"
#include "rle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device discovery ---------------------------------------------------- */

typedef struct gc_gpu_info {
    char name[256];
    uint64_t total_mem; /* bytes of device memory */
    uint64_t free_mem;  /* bytes free when asked */
    int sm_count;
    int cc_major, cc_minor; /* compute capability */
    int pci_bus_id;
    char pci_address[32]; /* "0000:3B:00.0": domain:bus:device.function */
} gc_gpu_info;

/* Number of usable CUDA devices: 0 without a driver or device (never aborts;
 * respects CUDA_VISIBLE_DEVICES). */
int gc_gpu_device_count(void);

/* Describe device dev (0 .. count-1). */
int gc_gpu_device_info(int dev, gc_gpu_info *info, gc_error *err);

/* ---- per-device context ----------------------------------------------------- */

typedef struct gc_gpu_config {
    unsigned slots;     /* pipeline slots, each a CUDA stream with its buffers (0 = 3) */
    size_t piece_bytes; /* bytes of input per piece, the most one slot holds (0 = 64 MiB). A
                            * job whose chunk_size exceeds it fails with GC_E_LIMIT (run it on
                            * the CPU): use >= 64 MiB (RLE_MAX_CHUNK_SIZE) to take every job. */
} gc_gpu_config;

typedef struct gc_gpu_ctx gc_gpu_ctx;

/*
 * Open device dev: allocates once, for the lifetime of the context, cfg->slots
 * slots, each a CUDA stream with a pinned host staging pair and device input /
 * output / scratch buffers of about S = max(piece_bytes, 128 MiB) each (bzip2
 * pieces are four 32 MiB segments; rle pieces still hold at most piece_bytes),
 * so about slots * (2 * S + 1.2 * piece_bytes) of device memory and
 * 2.1 * S * slots of pinned host memory. A bzip2 job also makes, on first
 * use, its scratch: about 65 bytes per input byte of the largest piece once
 * per context (8.3 GB for 128 MiB) and 3 per slot that ran one. cfg may be
 * NULL.
 */
int gc_gpu_open(int dev, const gc_gpu_config *cfg, gc_gpu_ctx **out, gc_error *err);
void gc_gpu_close(gc_gpu_ctx *ctx);

/* ---- batch API (the scheduler's entry point) ------------------------------- */

/* The codecs the GPU backend has kernels for. 0 is no codec: a job must name one. */
typedef enum gc_gpu_codec { GC_GPU_CODEC_RLE = 1, GC_GPU_CODEC_BZIP2 = 2 } gc_gpu_codec;

typedef enum gc_gpu_op { GC_GPU_ENCODE = 0, GC_GPU_DECODE = 1 } gc_gpu_op;

/* bzip2 encode options (bz2_options without the CPU engine's threads and job). */
typedef struct gc_gpu_bzip2_options {
    int level; /* 1..9: block size level*100k (0 = 9) */
} gc_gpu_bzip2_options;

/* A codec's options, read by encode jobs; the member is the job's codec. */
typedef union gc_gpu_codec_options {
    rle_options rle;            /* GC_GPU_CODEC_RLE: width / chunk_size (threads ignored) */
    gc_gpu_bzip2_options bzip2; /* GC_GPU_CODEC_BZIP2: level */
} gc_gpu_codec_options;

typedef struct gc_gpu_job {
    gc_gpu_codec codec;
    gc_gpu_op op;
    /* rle encode: src = original data, opt.rle = width / chunk_size,
     *             dst capacity >= rle_compress_bound(src_len, &opt.rle).
     * rle decode: src = a whole rle frame, dst capacity >= its original size
     *             (rle_frame_parse tells it); opt is ignored.
     * bzip2 encode: src = original data, opt.bzip2.level; the stream is the
     *             CPU engine's byte for byte (docs/BZIP2.md). dst_cap of
     *             gc_gpu_bzip2_encode_cap(src_len) holds every stream but
     *             crafted ones; a stream that does not fit dst_cap fails the
     *             job with GC_E_LIMIT (rerun it on the CPU engine), and so
     *             does a job whose input changed while it was read (a block
     *             outgrew its plan).
     * bzip2 decode: src = one or more concatenated bzip2 streams (any
     *             encoder's); the output is their concatenation, after every
     *             check the CPU engine makes (block and stream CRCs
     *             included). Its size is only known once decoded: dst may be
     *             NULL, and when the output outgrows dst_cap the backend
     *             calls grow (NULL: the job fails with GC_E_LIMIT). A stream
     *             problem fails the job with GC_E_CORRUPT, GC_E_CRC or
     *             GC_E_TRUNCATED and a message naming stream and block (the
     *             CPU engine's words may be more precise: rerun it there for
     *             its exact verdict); GC_E_LIMIT also when the job needs
     *             more device memory than there is (rerun on the CPU). No
     *             output is kept from a failed job. */
    const uint8_t *src;
    size_t src_len;
    gc_gpu_codec_options opt;
    uint8_t *dst;
    size_t dst_cap;
    /* results */
    size_t dst_len; /* frame length (encode) or original size (decode) */
    int status;     /* GC_OK or the job's error code */
    gc_error err;   /* the job's error message */
    void *user;     /* untouched: for the caller */
    /* bzip2 decode only: make dst hold at least len bytes, keeping its first
     * bytes (realloc-like; may be called more than once, with growing len).
     * Return GC_OK with dst / dst_cap updated, or an error status that fails
     * the job (err: its message). NULL: dst_cap is a hard limit. */
    int (*grow)(struct gc_gpu_job *job, size_t len, gc_error *err);
    /* bzip2 encode, result: blocks in the stream (a stream's parts are
     * spliced with their block counts: docs/BZIP2.md, "Streaming"). */
    uint32_t blocks;
    /* bzip2 decode of a stream's part: partial set, part_more (more input
     * follows), part (in: where to resume; out, on success: where it
     * stopped; the decode follows bz2_decompress_part's rules, a part
     * from bz2_dstate_at_magic included, but the device has no early
     * stop: part.out_soft is ignored and kept) and
     * part_used (out: input bytes wholly consumed). */
    int partial, part_more;
    bz2_dstate part;
    size_t part_used;
} gc_gpu_job;

typedef struct gc_gpu_batch_stats {
    uint64_t bytes_in;  /* sum of src_len over successful jobs */
    uint64_t bytes_out; /* sum of dst_len over successful jobs */
    uint64_t h2d_bytes, d2h_bytes;
    double h2d_ms;    /* sum of host-to-device copy times (CUDA events) */
    double kernel_ms; /* sum of kernel times (CUDA events) */
    double d2h_ms;    /* sum of device-to-host copy times (CUDA events) */
    double wall_ms;   /* first to last event of the batch (CUDA events), plus the host-clocked
                            * time of jobs that run whole (bzip2 decode); their copy and kernel
                            * times are host-clocked too */
    double host_ms;   /* wall clock of the whole call, host staging included */
    unsigned pieces;  /* pipeline pieces run */
} gc_gpu_batch_stats;

/*
 * Run every job of the batch on the device, pipelined over the context's
 * slots (H2D of piece k+1, kernels of piece k, D2H of piece k-1 overlap);
 * jobs of different codecs may share a batch. Each job gets its own status: an
 * unknown codec or operation fails only its job (GC_E_INVALID), and so does a
 * corrupt frame (GC_E_CORRUPT / GC_E_CRC / GC_E_TRUNCATED / GC_E_LIMIT with a
 * message naming the chunk and check). Returns GC_OK when the batch ran (look
 * at each job's status), GC_E_DEVICE (err) when the device failed: then no
 * job's output can be trusted; rerun them all on the CPU. stats may be NULL.
 */
int gc_gpu_run_batch(gc_gpu_ctx *ctx, gc_gpu_job *jobs, size_t n_jobs, gc_gpu_batch_stats *stats, gc_error *err);

/* dst_cap for a bzip2 encode job that fits any stream the data can give but
 * crafted worst cases (bzip2 output exceeds its input by < 1% on random bytes). */
static inline size_t gc_gpu_bzip2_encode_cap(size_t src_len)
{
    return src_len + src_len / 32 + (64u << 10);
}

/* ---- bzip2's device-resident encoder (tests, benchmarks) ------------------- */

/* Time per stage of gc_gpu_bzip2_encode_device (CUDA events, summed over pieces). */
typedef struct gc_gpu_bzip2_stages {
    double plan_ms;   /* runs, block planning, RLE1, block CRCs */
    double bwt_ms;    /* the rotation sort and the last column */
    double mtf_ms;    /* symbol map, MTF/RLE2, symbol frequencies */
    double tables_ms; /* table choice, refinement, code lengths, block bit lengths */
    double pack_ms;   /* the blocks' bits into the stream */
    uint64_t blocks;  /* bzip2 blocks written */
    uint64_t pieces;  /* device passes (each up to the scratch's piece size) */
} gc_gpu_bzip2_stages;

/* Device scratch for pieces of up to piece_bytes input (a multiple of the
 * 32 MiB segment, docs/BZIP2.md section 3; 0 = one segment). */
size_t gc_gpu_bzip2_scratch_size(size_t piece_bytes);

/*
 * Compress d_src[0..src_len) (device memory) into one bzip2 stream at d_dst
 * (device memory, dst_cap bytes), identical to bz2_compress at this level.
 * Works in pieces of as many 32 MiB segments as the scratch holds, on the
 * context's stream 0, and waits for it. stages may be NULL.
 */
int gc_gpu_bzip2_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, int level, void *d_dst,
                               size_t dst_cap, size_t *dst_len, void *d_scratch, size_t scratch_len,
                               gc_gpu_bzip2_stages *stages, gc_error *err);

/* ---- bzip2's device-resident decoder (tests, benchmarks) ------------------- */

/* Time per stage of gc_gpu_bzip2_decode_device (host clock around the
 * device work of each stage, summed over waves). */
typedef struct gc_gpu_bzip2_dec_stages {
    double scan_ms;      /* block magics at every bit offset, sorted, back to the host */
    double huffman_ms;   /* headers, tables, Huffman, RLE2 and inverse MTF of every candidate */
    double walk_ms;      /* the framing walk on the host (which candidates are blocks) */
    double ibwt_ms;      /* the stable sort for T and the splitter walks */
    double rle1_ms;      /* RLE1 sizes, the expansion and the block CRCs */
    double output_ms;    /* output rounds leaving the device (0 here) */
    uint64_t candidates; /* block magics found (blocks and false positives) */
    uint64_t blocks;     /* blocks decoded */
    uint64_t streams;
    uint64_t waves; /* passes of up to 2048 candidates */
} gc_gpu_bzip2_dec_stages;

/*
 * Decode d_src[0..src_len) (device memory, 4-byte aligned: one or more
 * bzip2 streams) into d_dst (device memory, dst_cap bytes): the same bytes
 * as bz2_decompress, or the failure a gc_gpu_job would get (GC_E_LIMIT when
 * the output exceeds dst_cap). Scratch (about 2 GB per 2048 blocks of
 * candidates plus 2 GB for the inverse BWT) is the context's, made on first
 * use. Runs on the context's stream 0 and waits for it. stages may be NULL.
 */
int gc_gpu_bzip2_decode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, void *d_dst, size_t dst_cap,
                               size_t *dst_len, gc_gpu_bzip2_dec_stages *stages, gc_error *err);

/* ---- rle's device-resident entry points (tests, benchmarks) ---------------- */

/* Bytes of device scratch the *_device calls need for src_len bytes of input
 * with these options (decode: src_len = the original size): about
 * src_len / (8 * width) for the encoder's run-head masks plus a few bytes per
 * 2 KiB and per chunk. */
size_t gc_gpu_rle_scratch_size(size_t src_len, const rle_options *opt);

/*
 * Encode d_src[0..src_len) (device memory, 16-byte aligned) into d_dst
 * (device memory, 16-byte aligned, capacity >= rle_compress_bound) as a whole
 * frame; d_scratch (device, >= gc_gpu_rle_scratch_size) is caller-owned.
 * Runs on the context's stream 0 (after work already queued on the legacy
 * default stream; work on the caller's own non-blocking streams must be
 * synchronised by the caller) and waits for it: *dst_len is the frame size.
 * The whole capacity is working space: bytes of d_dst past *dst_len (up to
 * rle_compress_bound) may be overwritten (incompressible data is written
 * speculatively where an all-stored frame would put it).
 */
int gc_gpu_rle_encode_device(gc_gpu_ctx *ctx, const void *d_src, size_t src_len, const rle_options *opt,
                             void *d_dst, size_t dst_cap, size_t *dst_len, void *d_scratch, size_t scratch_len,
                             gc_error *err);

/*
 * Decode the frame at d_frame (device, 16-byte aligned, frame_len bytes) into
 * d_dst (device, capacity dst_cap >= original size). The header and index are
 * read back to the host and validated there; records, run lengths and CRCs are
 * validated on the device. *dst_len is the original size.
 */
int gc_gpu_rle_decode_device(gc_gpu_ctx *ctx, const void *d_frame, size_t frame_len, void *d_dst, size_t dst_cap,
                             size_t *dst_len, void *d_scratch, size_t scratch_len, gc_error *err);

/* The context's stream i (a cudaStream_t) for callers that time with events. */
void *gc_gpu_stream(gc_gpu_ctx *ctx, unsigned i);

/* ---- long-lived host registration ------------------------------------------ */

/*
 * Page-lock host memory [p, p + len) for DMA until gc_gpu_host_unregister(p)
 * (cudaHostRegister, portable across devices; read_only for PROT_READ
 * mappings). gc_gpu_run_batch moves registered buffers straight over DMA
 * instead of through its staging buffers, so a caller that reuses buffers
 * (the daemon's cached memfd mappings) pays the registration once. Failure
 * (e.g. RLIMIT_MEMLOCK) leaves nothing registered and no sticky error.
 */
int gc_gpu_host_register(void *p, size_t len, int read_only, gc_error *err);
void gc_gpu_host_unregister(void *p);

#ifdef __cplusplus
}
#endif

#endif
