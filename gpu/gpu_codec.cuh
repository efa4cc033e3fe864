/*
 * gpu_codec.cuh - what a codec gives the batch pipeline (gpu_pipeline.cu).
 *
 * The pipeline owns the context, the slots, staging, the H2D / kernels / D2H
 * overlap and the timing; a codec owns its format. A job is cut into pieces
 * of whole units (rle: chunks) that fit one slot; per piece the pipeline
 *
 *   1. asks the job how many units from u0 fit a slot (piece_units),
 *   2. lets it say where the piece's input is, and, when it knows it, where
 *      its output goes, and stage metadata in the slot's pinned h_meta
 *      (piece_begin),
 *   3. copies the input (and meta_in bytes of h_meta) to the device, and has
 *      the job queue its kernels and the D2H of its small per-piece results
 *      (piece_kernels, piece_meta_d2h),
 *   4. when the output's size comes from the device (out_sized_on_device,
 *      rle encode), waits for those results and lets the job place the output
 *      (piece_place, in unit order per job), then copies the output back,
 *   5. lets the job check the piece's results (piece_check) before the
 *      output is staged out; and when every unit is done, finish() writes
 *      what the job still owes (rle: the frame header) and sets dst_len.
 *
 * One GpuJob per gc_gpu_job of the batch, made by its codec's prepare.
 */
#ifndef GC_GPU_CODEC_CUH
#define GC_GPU_CODEC_CUH

#include <stddef.h>
#include <stdint.h>

#include "gpu_internal.cuh"

struct gc_gpu_ctx;

namespace gcgpu {

/* A slot's buffers, as a codec sees them (sizes from the context). */
struct SlotBuffers {
    uint8_t *d_in, *d_out, *d_meta, *d_scr; /* device: input, output, metadata, scratch */
    uint8_t *h_meta;                        /* pinned: metadata both ways */
    size_t in_cap, out_cap, meta_cap, scr_cap;
    const CrcTables *d_tab;
    const Crc32Tables *d_tab32; /* CRC-32 (bzip2's CRC, see gpu_internal.cuh) */
    /* lazily made scratch of a codec that needs far more than slot_scratch
     * (bzip2): the codec allocates it on first use and the context frees it.
     * The slot's own (d_lazy) lives with the piece; the context's (d_work)
     * serves every slot, for what piece_kernels is done with when it returns
     * (pieces' kernels run one at a time on a context's pipeline thread). */
    uint8_t **d_lazy;
    size_t *lazy_cap;
    uint8_t **d_work;
    size_t *work_cap;
    /* the context's, made on first use like d_work but kept from one piece
     * of a job to the next (bzip2: a piece's input after its last whole
     * block, which starts the next piece) */
    uint8_t **d_join;
    size_t *join_cap;
};

/* Input (and output) bytes of a slot buffer sized for slot_bytes of input:
 * room for a little expansion. A context sizes its slots so for the larger
 * of its slot_bytes and its codecs' min_slot_in. */
inline size_t slot_buffer_bytes(size_t slot_bytes)
{
    return slot_bytes + slot_bytes / 64 + (64 << 10);
}

/* The capacities piece_units fits a piece to. */
struct SlotCaps {
    size_t in_cap, out_cap, meta_cap, scr_cap;
    size_t slot_bytes; /* gc_gpu_config.piece_bytes as the context took it */
};

/* One piece of a job: units [u0, u0 + n), and where its bytes are. */
struct Piece {
    uint64_t u0 = 0, n = 0;
    /* input: in_host[0..in_len), copied to the slot's d_in */
    const uint8_t *in_host = nullptr;
    uint64_t in_len = 0;
    /* output: d_out[0..out_len) to out_host; set by piece_begin, or by
     * piece_place when the output is sized on the device */
    uint8_t *out_host = nullptr;
    uint64_t out_len = 0;
    uint64_t out_dev_off = 0; /* the output starts at d_out + out_dev_off */
    /* h_meta[meta_in_off .. + meta_in_len) goes to d_meta before the kernels */
    uint64_t meta_in_off = 0, meta_in_len = 0;
    /* the codec's: where piece_kernels left the results piece_meta_d2h copies */
    void *d_results = nullptr;
};

class GpuJob {
  public:
    virtual ~GpuJob()
    {
    }

    uint64_t units = 0;               /* the job's units; 0: nothing for the device, finish() at once */
    size_t out_len = 0;               /* bytes of job.dst the job may write (for the DMA fast path) */
    bool out_sized_on_device = false; /* two-phase output (see piece_place) */
    bool kernels_wait = false;        /* piece_kernels waits for the device (bzip2): queue the next
                                       * piece's H2D before it */

    /* How many units from u0 fit one slot (>= 1), or the job's error
     * (GC_E_LIMIT: not even one unit fits) in err. */
    virtual int piece_units(uint64_t u0, const SlotCaps &caps, uint64_t *n, gc_error *err) const = 0;
    /* Host side of starting a piece (pieces of a job begin in unit order):
     * fill p's input (and output when known), stage metadata in h_meta. */
    virtual void piece_begin(Piece &p, uint8_t *h_meta) = 0;
    /* Queue the piece's kernels on st; its input is in b.d_in, its
     * metadata in b.d_meta. Asynchronous; GC_E_DEVICE on a CUDA failure. */
    virtual int piece_kernels(Piece &p, const SlotBuffers &b, cudaStream_t st, gc_error *err) = 0;
    /* Queue the D2H of the piece's small results into b.h_meta after its
     * kernels (before the output's D2H); *bytes: how many (for the stats). */
    virtual int piece_meta_d2h(const Piece &p, const SlotBuffers &b, cudaStream_t st, uint64_t *bytes,
                               gc_error *err) = 0;
    /* Two-phase output only, the piece's results in h_meta and the pieces
     * before it placed: set p.out_host / p.out_len. */
    virtual int piece_place(Piece &p, const uint8_t *h_meta, gc_error *err)
    {
        (void)p;
        (void)h_meta;
        return gc_fail(err, GC_E_INTERNAL, "gpu: piece_place of a codec that sizes its output on the host");
    }
    /* Two-phase output only, after piece_place: queue what needs the
     * placement (bzip2: its bits at the piece's bit offset) on st, before
     * the output's D2H. */
    virtual int piece_place_kernels(Piece &p, const SlotBuffers &b, cudaStream_t st, gc_error *err)
    {
        (void)p;
        (void)b;
        (void)st;
        (void)err;
        return GC_OK;
    }
    /* The piece's results are on the host (h_meta): GC_OK, or the job's
     * error (the job fails, its other pieces are dropped). */
    virtual int piece_check(const Piece &p, const uint8_t *h_meta, gc_error *err)
    {
        (void)p;
        (void)h_meta;
        (void)err;
        return GC_OK;
    }
    /* Every unit done and checked: complete the output, return dst_len. */
    virtual size_t finish() = 0;
};

/* A codec of the GPU backend: its slot needs, and its jobs. */
struct GpuCodec {
    gc_gpu_codec id;
    const char *name;
    /* device scratch and metadata bytes per slot of slot_bytes input */
    size_t (*slot_scratch)(size_t slot_bytes);
    size_t (*slot_meta)(size_t slot_bytes);
    /* input bytes a slot must hold at least (its pieces' smallest unit:
     * bzip2's segment), whatever slot_bytes the context was opened with */
    size_t min_slot_in;
    /* Validate job j (buffers are present) and make its GpuJob; else the
     * job's status with its message in job.err. */
    int (*prepare)(gc_gpu_job &job, size_t j, GpuJob **out);
    /* Decode jobs of a codec whose output size is only known once decoded
     * (bzip2) are not cut into pieces: the pipeline hands the batch's such
     * jobs here, whole, before the other jobs (null: every job goes through
     * prepare). A job's problems are its status; GC_E_DEVICE (err) fails
     * the batch. Its copy and kernel times are added to st. */
    int (*run_whole_decode)(gc_gpu_ctx *ctx, gc_gpu_job **jobs, size_t n, gc_gpu_batch_stats *st, gc_error *err);
};

/* The codecs, in rle_gpu.cu and bz2_gpu.cu. */
extern const GpuCodec kRleCodec;
extern const GpuCodec kBzip2Codec;

} // namespace gcgpu

#endif
