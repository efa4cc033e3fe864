/*
 * bench_gpu_rle.cu - benchmark of the CUDA rle codec.
 *
 *   bench_gpu_rle [--size MiB] [--reps N] [--pipeline GiB] [--no-pipeline] [--pipeline-only]
 *                 [--width 1|4] [--class 0|1|2]   (one data class only, for a profiler)
 *
 * 1. Kernels on device-resident data (default 1 GiB, generated on the device):
 *    random bytes, short runs (mean 8), long runs (mean 256); width 1 and 4.
 *    Encode (whole frame: both passes, scan, header CRC) and decode (all
 *    validation and CRC checks) in GB/s of original input, next to
 *    cub::DeviceRunLengthEncode::Encode on the same data and a device-to-device
 *    cudaMemcpy of the same size, all timed with CUDA events in the same run,
 *    median of --reps repetitions. Every decode is checked against the input.
 *    (--pipeline-only skips this part.)
 * 2. The batch pipeline (gc_gpu_run_batch) compressing --pipeline GiB
 *    (default 4) of mixed data as 256 MiB jobs from pageable and from pinned
 *    host memory, then decompressing it: wall time vs max(total H2D, kernels,
 *    D2H). Then the daemon's path: the whole size as one job whose input is a memfd mapped
 *    PROT_READ, MAP_SHARED|MAP_POPULATE and whose output is another mapped
 *    memfd, with the default host-copy settings and variants (copy threads,
 *    non-temporal stores), next to the same job from pinned memory; and what
 *    cudaHostRegister / cudaHostUnregister (OP_REGISTER's pinning) cost per GiB.
 *    Every frame is compared with the pinned run's, every output with the input.
 * 3. Ceilings on the codec's tile geometry, same run: the loads alone, and the
 *    loads with the codec's CRC32C (what any encode or decode must do).
 * Prints markdown tables last.
 */
#include <cub/device/device_run_length_encode.cuh>
#include <cuda_runtime.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

extern "C" {
#include "gc_clock.h"
#include "gpu.h"
#include "rle.h"
}
#include "crc32c_device.cuh"
#include "gpu_internal.cuh"
#include "rle_encode_policy.cuh"
#include "rle_cell.cuh"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static __device__ __forceinline__ uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Each thread writes one 4 KiB block: runs of 1..(2*mean-1) elements. */
__global__ void gen_kernel(uint8_t *p, size_t n, unsigned w, int kind, uint64_t seed)
{
    const size_t blk = 4096;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t start = t * blk;
    if (start >= n)
        return;
    size_t end = min(start + blk, n);
    uint64_t s = mix(seed ^ (t * 0x9E3779B97F4A7C15ull));
    if (kind == 0) {
        for (size_t i = start; i < end; i += 8) {
            s = mix(s + 1);
            *(uint64_t *)(p + i) = s;
        }
        return;
    }
    unsigned mean = kind == 1 ? 8 : 256;
    size_t i = start;
    while (i < end) {
        s = mix(s + 1);
        size_t run = 1 + (s >> 40) % (2 * mean - 1);
        uint64_t v = mix(s ^ 0x1234);
        for (size_t e = 0; e < run && i < end; e++)
            for (unsigned b = 0; b < w && i < end; b++, i++)
                p[i] = (uint8_t)(v >> (8 * b));
    }
}

__global__ void cmp_kernel(const uint8_t *a, const uint8_t *b, size_t n, unsigned long long *bad)
{
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 16; i < n;
         i += (size_t)gridDim.x * blockDim.x * 16) {
        if (i + 16 <= n) {
            uint4 x = *(const uint4 *)(a + i), y = *(const uint4 *)(b + i);
            if (x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w)
                atomicAdd(bad, 1ull);
        } else {
            for (size_t j = i; j < n; j++)
                if (a[j] != b[j])
                    atomicAdd(bad, 1ull);
        }
    }
}

/*
 * Ceilings for the encoder and decoder, on the same tile geometry (a block per
 * 16 KiB window, 64 contiguous bytes per thread, resident grid):
 *   read_only_kernel: the loads alone (an XOR of the words keeps them);
 *   read_crc_kernel: the loads and the window CRC32C exactly as the codec
 *   computes it (slicing-by-8 per cell, lane shift, warp XOR).
 * Every encode and decode reads (or writes) each byte once and checksums it,
 * so read_crc is the most either can reach without a cheaper CRC.
 */
__global__ void __launch_bounds__(gcgpu::kThreads, GC_ENC_MINB)
    read_only_kernel(const uint8_t *src, int64_t n, uint32_t *sink)
{
    const int64_t nwin = n / gcgpu::kWin;
    uint32_t x = 0;
    for (int64_t wi = blockIdx.x; wi < nwin; wi += gridDim.x) {
        const uint4 *p = reinterpret_cast<const uint4 *>(src + wi * gcgpu::kWin + gcgpu::kCell * threadIdx.x);
        uint4 a = __ldg(p), b = __ldg(p + 1), c = __ldg(p + 2), d = __ldg(p + 3);
        x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    if (x == 0x9e3779b9u) /* practically never: keeps the loads without a store per thread */
        sink[blockIdx.x] = x;
}

__global__ void __launch_bounds__(gcgpu::kThreads, GC_ENC_MINB)
    read_crc_kernel(const uint8_t *src, int64_t n, const gcgpu::CrcTables *tab, uint32_t *sink)
{
    const gcgpu::CrcSmem cs = gcgpu::load_crc_smem(gcgpu::dyn_smem, tab);
    __syncthreads();
    const int64_t nwin = n / gcgpu::kWin;
    for (int64_t wi = blockIdx.x; wi < nwin; wi += gridDim.x) {
        uint32_t w[16];
        gcgpu::load_cell(src, wi * gcgpu::kWin + gcgpu::kCell * threadIdx.x, n, w);
        uint32_t v = gcgpu::warp_crc(cs, w);
        v = __reduce_xor_sync(0xffffffffu, v); /* one redux, not five shuffles */
        if ((threadIdx.x & 31) == 0)
            sink[wi * (gcgpu::kThreads / 32) + (threadIdx.x >> 5)] = v;
    }
}

static double wall_ms_now()
{
    return (double)gc_now_ns() / 1e6;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

struct Timer {
    cudaEvent_t a, b;
    cudaStream_t st;
    explicit Timer(cudaStream_t s) : st(s)
    {
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
    }
    void start()
    {
        CK(cudaEventRecord(a, st));
    }
    double stop()
    {
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        return ms;
    }
};

struct Row {
    std::string data;
    unsigned w;
    double ratio, enc, dec, cub, copy;
    bool ok;
};

int main(int argc, char **argv)
{
    size_t mib = 1024;
    int reps = 7;
    double pipe_gib = 4;
    bool pipeline = true, kernels = true;
    unsigned only_width = 0; /* --width: 1 or 4 only (profiling) */
    int only_kind = -1;      /* --class: 0 random, 1 short runs, 2 long runs only */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc)
            mib = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pipeline") && i + 1 < argc)
            pipe_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-pipeline"))
            pipeline = false;
        else if (!strcmp(argv[i], "--pipeline-only"))
            kernels = false;
        else if (!strcmp(argv[i], "--width") && i + 1 < argc)
            only_width = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--class") && i + 1 < argc)
            only_kind = atoi(argv[++i]);
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (gc_gpu_device_count() == 0) {
        printf("no CUDA device\n");
        return 77;
    }
    gc_gpu_info info;
    gc_error err;
    if (gc_gpu_device_info(0, &info, &err) != GC_OK) {
        printf("device info: %s\n", err.msg);
        return 1;
    }
    printf("device: %s, %d SMs, %.1f GiB\n", info.name, info.sm_count, info.total_mem / 1073741824.0);
    gc_gpu_ctx *ctx;
    gc_gpu_config cfg = { 3, 64u << 20 };
    if (gc_gpu_open(0, &cfg, &ctx, &err) != GC_OK) {
        printf("open: %s\n", err.msg);
        return 1;
    }
    cudaStream_t st = (cudaStream_t)gc_gpu_stream(ctx, 0);
    gcgpu::CrcTables *h_tab = (gcgpu::CrcTables *)malloc(sizeof(gcgpu::CrcTables)), *d_tab;
    gcgpu::crc_tables_build(h_tab);
    CK(cudaMalloc(&d_tab, sizeof *d_tab));
    CK(cudaMemcpy(d_tab, h_tab, sizeof *d_tab, cudaMemcpyHostToDevice));

    const size_t n = mib << 20;
    rle_options opt = { 1, RLE_DEFAULT_CHUNK_SIZE, 1 };
    uint8_t *d_in;
    CK(cudaMalloc(&d_in, n));
    std::vector<Row> rows;
    double copy_ms = 0, ceil_read = 0, ceil_crc = 0;
    if (kernels) {
        size_t bound = rle_compress_bound(n, &opt) + 4096;
        size_t scr_len = std::max(gc_gpu_rle_scratch_size(n, &opt), (size_t)(64 << 20));
        uint8_t *d_frame, *d_out, *d_scr, *d_copy;
        unsigned long long *d_bad;
        CK(cudaMalloc(&d_frame, bound));
        CK(cudaMalloc(&d_out, n + 16));
        CK(cudaMalloc(&d_copy, n));
        CK(cudaMalloc(&d_scr, scr_len));
        CK(cudaMalloc(&d_bad, 8));
        /* CUB reference buffers (width 1 and 4) */
        void *d_cub_u = nullptr, *d_cub_tmp = nullptr;
        int *d_cub_cnt, *d_cub_nr;
        CK(cudaMalloc(&d_cub_u, n));
        CK(cudaMalloc(&d_cub_cnt,
                      (n / 1 + 1) * sizeof(int) > (8ull << 30) ? (8ull << 30) : (n + 1) * sizeof(int)));
        CK(cudaMalloc(&d_cub_nr, sizeof(int)));
        size_t cub_tmp_bytes = 0, t1 = 0, t4 = 0;
        CK(cub::DeviceRunLengthEncode::Encode(nullptr, t1, d_in, (uint8_t *)d_cub_u, d_cub_cnt, d_cub_nr,
                                              (int64_t)n));
        CK(cub::DeviceRunLengthEncode::Encode(nullptr, t4, (uint32_t *)d_in, (uint32_t *)d_cub_u, d_cub_cnt,
                                              d_cub_nr, (int64_t)(n / 4)));
        cub_tmp_bytes = std::max(t1, t4);
        CK(cudaMalloc(&d_cub_tmp, cub_tmp_bytes));

        Timer tm(st);
        /* device copy ceiling */
        std::vector<double> tc;
        for (int r = 0; r < reps + 1; r++) {
            tm.start();
            CK(cudaMemcpyAsync(d_copy, d_in, n, cudaMemcpyDeviceToDevice, st));
            double ms = tm.stop();
            if (r)
                tc.push_back(ms);
        }
        copy_ms = median(tc);
        printf("device copy: %.3f ms = %.0f GB/s of input, %.0f GB/s read+write\n", copy_ms, n / copy_ms / 1e6,
               2 * n / copy_ms / 1e6);

        /* ceilings (data-independent work: run on whatever d_in holds, after a fill) */
        gen_kernel<<<(unsigned)((n / 4096 + 255) / 256), 256, 0, st>>>(d_in, n, 1, 0, 4242);
        CK(cudaGetLastError());
        uint32_t *d_sink;
        CK(cudaMalloc(&d_sink, (n / gcgpu::kWin + 1) * 32));
        gc_error gerr;
        int g_ro = 0, g_crc = 0;
        if (gcgpu::resident_grid(read_only_kernel, 0, n / gcgpu::kWin, &g_ro, &gerr) != GC_OK ||
            gcgpu::resident_grid(read_crc_kernel, gcgpu::kCrcSmemBytes, n / gcgpu::kWin, &g_crc, &gerr) != GC_OK) {
            printf("occupancy: %s\n", gerr.msg);
            return 1;
        }
        std::vector<double> tro, tcrc;
        for (int r = 0; r < reps + 1; r++) {
            tm.start();
            read_only_kernel<<<g_ro, gcgpu::kThreads, 0, st>>>(d_in, (int64_t)n, d_sink);
            double ms = tm.stop();
            CK(cudaGetLastError());
            tm.start();
            read_crc_kernel<<<g_crc, gcgpu::kThreads, gcgpu::kCrcSmemBytes, st>>>(d_in, (int64_t)n, d_tab, d_sink);
            double ms2 = tm.stop();
            CK(cudaGetLastError());
            if (r) {
                tro.push_back(ms);
                tcrc.push_back(ms2);
            }
        }
        ceil_read = n / median(tro) / 1e6;
        ceil_crc = n / median(tcrc) / 1e6;
        printf("ceilings: read only %.0f GB/s, read + CRC32C %.0f GB/s\n", ceil_read, ceil_crc);
        cudaFree(d_sink);

        const char *names[] = { "random bytes", "short runs (mean 8)", "long runs (mean 256)" };
        for (unsigned w : { 1u, 4u }) {
            for (int kind = 0; kind < 3; kind++) {
                if ((only_width && w != only_width) || (only_kind >= 0 && kind != only_kind))
                    continue;
                gen_kernel<<<(unsigned)((n / 4096 + 255) / 256), 256, 0, st>>>(d_in, n, w, kind,
                                                                               1000 + kind * 7 + w);
                CK(cudaGetLastError());
                CK(cudaStreamSynchronize(st));
                opt.width = w;
                uint64_t cc = (n + opt.chunk_size - 1) / opt.chunk_size;
                uint64_t hdr = 32 + 4 * cc + 4;
                /* encode: the two passes, the scan, the header and its CRC */
                std::vector<double> te, td, tcub;
                unsigned long long *d_total = nullptr;
                size_t flen = 0;
                for (int r = 0; r < reps + 1; r++) {
                    gcgpu::EncParams p;
                    p.src = d_in;
                    p.body_len = n - n % w;
                    p.width = w;
                    p.chunk_size = opt.chunk_size;
                    p.chunk_count = cc;
                    p.out_base = d_frame;
                    p.records = d_frame + hdr;
                    p.records_cap = bound - hdr;
                    p.index = (uint32_t *)(d_frame + 32);
                    tm.start();
                    int rc = gcgpu::enc_launch(p, d_tab, d_scr, scr_len, st, &d_total, &err);
                    if (rc == GC_OK)
                        rc = gcgpu::enc_frame_header(d_frame, d_in, n, w, opt.chunk_size, cc, d_tab, d_scr,
                                                     scr_len, st, &err);
                    double ms = tm.stop();
                    if (rc != GC_OK) {
                        printf("encode: %s\n", err.msg);
                        return 1;
                    }
                    if (r)
                        te.push_back(ms);
                }
                unsigned long long rec_total;
                CK(cudaMemcpy(&rec_total, d_total, 8, cudaMemcpyDeviceToHost));
                flen = hdr + rec_total;
                /* the API call gives the same frame */
                size_t flen2 = 0;
                if (gc_gpu_rle_encode_device(ctx, d_in, n, &opt, d_frame, bound, &flen2, d_scr, scr_len, &err) !=
                        GC_OK ||
                    flen2 != flen) {
                    printf("encode_device: %s (%zu vs %zu)\n", err.msg, flen2, flen);
                    return 1;
                }
                /* decode */
                std::vector<uint8_t> hbuf(hdr);
                CK(cudaMemcpy(hbuf.data(), d_frame, hdr, cudaMemcpyDeviceToHost));
                rle_frame_info fi;
                if (rle_frame_parse(hbuf.data(), flen, &fi, &err) != GC_OK) {
                    printf("parse: %s\n", err.msg);
                    return 1;
                }
                bool ok = true;
                for (int r = 0; r < reps + 1; r++) {
                    CK(cudaMemsetAsync(d_out, 0, n, st));
                    gcgpu::DecParams p;
                    p.records = d_frame + hdr;
                    p.records_len = flen - hdr;
                    p.index = (const uint32_t *)(d_frame + 32);
                    p.width = w;
                    p.chunk_size = opt.chunk_size;
                    p.chunk_count = cc;
                    p.body_len = n - n % w;
                    p.out = d_out;
                    uint32_t *d_status;
                    tm.start();
                    int rc = gcgpu::dec_launch(p, d_tab, d_scr, scr_len, st, &d_status, &err);
                    double ms = tm.stop();
                    if (rc != GC_OK) {
                        printf("decode: %s\n", err.msg);
                        return 1;
                    }
                    std::vector<uint32_t> stv(cc);
                    CK(cudaMemcpy(stv.data(), d_status, 4 * cc, cudaMemcpyDeviceToHost));
                    for (uint32_t s : stv)
                        ok = ok && s == 0;
                    CK(cudaMemset(d_bad, 0, 8));
                    cmp_kernel<<<1024, 256, 0, st>>>(d_in, d_out, n, d_bad);
                    unsigned long long bad;
                    CK(cudaMemcpyAsync(&bad, d_bad, 8, cudaMemcpyDeviceToHost, st));
                    CK(cudaStreamSynchronize(st));
                    ok = ok && bad == 0;
                    if (r)
                        td.push_back(ms);
                }
                size_t olen = 0;
                if (gc_gpu_rle_decode_device(ctx, d_frame, flen, d_out, n, &olen, d_scr, scr_len, &err) != GC_OK) {
                    printf("decode_device: %s\n", err.msg);
                    ok = false;
                }
                /* CUB run-length encode on the same data */
                for (int r = 0; r < reps + 1; r++) {
                    size_t tb = cub_tmp_bytes;
                    tm.start();
                    if (w == 1)
                        CK(cub::DeviceRunLengthEncode::Encode(d_cub_tmp, tb, d_in, (uint8_t *)d_cub_u, d_cub_cnt,
                                                              d_cub_nr, (int64_t)n, st));
                    else
                        CK(cub::DeviceRunLengthEncode::Encode(d_cub_tmp, tb, (uint32_t *)d_in, (uint32_t *)d_cub_u,
                                                              d_cub_cnt, d_cub_nr, (int64_t)(n / 4), st));
                    double ms = tm.stop();
                    if (r)
                        tcub.push_back(ms);
                }
                Row row;
                row.data = names[kind];
                row.w = w;
                row.ratio = (double)flen / n;
                row.enc = n / median(te) / 1e6;
                row.dec = n / median(td) / 1e6;
                row.cub = n / median(tcub) / 1e6;
                row.copy = n / copy_ms / 1e6;
                row.ok = ok;
                printf("%-22s w=%u ratio %.3f  encode %.3f ms (%.0f GB/s)  decode %.3f ms (%.0f GB/s)  cub %.3f "
                       "ms (%.0f GB/s) %s\n",
                       row.data.c_str(), w, row.ratio, median(te), row.enc, median(td), row.dec, median(tcub),
                       row.cub, ok ? "verified" : "DECODE MISMATCH");
                rows.push_back(row);
            }
        }
        cudaFree(d_cub_u);
        cudaFree(d_cub_cnt);
        cudaFree(d_cub_tmp);
        cudaFree(d_copy);
    }

    /* ---- pipeline ---- */
    struct PRow {
        std::string what;
        gc_gpu_batch_stats s;
        bool ok;
        double first_host_ms; /* memfd rows: the first of the two runs */
    };
    struct RRow {
        std::string what;
        double gib, reg_ms, unreg_ms;
        bool ok;
    };
    std::vector<PRow> prow;
    std::vector<RRow> rrow;
    if (pipeline) {
        size_t total = (size_t)(pipe_gib * (1ull << 30));
        size_t njobs = std::max<size_t>(1, total / (256u << 20));
        size_t per = total / njobs;
        total = per * njobs;
        opt.width = 1;
        size_t fb = rle_compress_bound(per, &opt);
        /* mixed data: the three classes in turn, made on the device */
        uint8_t *pg_src = (uint8_t *)malloc(total), *pg_dst = (uint8_t *)malloc(fb * njobs);
        uint8_t *pn_src, *pn_dst, *pn_out;
        CK(cudaMallocHost(&pn_src, total));
        CK(cudaMallocHost(&pn_dst, fb * njobs));
        CK(cudaMallocHost(&pn_out, total));
        if (!pg_src || !pg_dst) {
            printf("host allocation failed\n");
            return 1;
        }
        size_t piece = std::min(n, per);
        for (size_t off = 0, i = 0; off < total; off += piece, i++) {
            size_t len = std::min(piece, total - off);
            gen_kernel<<<(unsigned)((len / 4096 + 256) / 256), 256, 0, st>>>(d_in, len, 1, (int)(i % 3), 77 + i);
            CK(cudaMemcpyAsync(pn_src + off, d_in, len, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
        }
        /* pageable = resident pageable memory: fill with non-zero bytes, since
         * GCC turns malloc + memset(0) into calloc and leaves the pages untouched
         * (the runs would then time first-touch page faults) */
        memcpy(pg_src, pn_src, total);
        memset(pg_dst, 0x5A, fb * njobs);
        uint8_t *pg_out = (uint8_t *)malloc(total);
        if (!pg_out) {
            printf("host allocation failed\n");
            return 1;
        }
        memset(pg_out, 0x5A, total);
        std::vector<gc_gpu_job> jobs(njobs);
        std::vector<size_t> flens(njobs);
        bool pinned_ref = false; /* pn_dst holds the pinned run's frames */
        /* 0 compress pageable, 1 compress pinned, 2 decompress pageable, 3 decompress pinned */
        auto run_jobs = [&](gc_gpu_ctx *c, int mode, const std::string &label) {
            bool pinned = mode == 1 || mode == 3, dec = mode >= 2;
            uint8_t *src = pinned ? pn_src : pg_src, *dst = pinned ? pn_dst : pg_dst,
                    *out = pinned ? pn_out : pg_out;
            for (size_t i = 0; i < njobs; i++) {
                gc_gpu_job &j = jobs[i];
                memset(&j, 0, sizeof j);
                if (dec) {
                    j.codec = GC_GPU_CODEC_RLE;
                    j.op = GC_GPU_DECODE;
                    j.src = dst + i * fb;
                    j.src_len = flens[i];
                    j.dst = out + i * per;
                    j.dst_cap = per;
                } else {
                    j.codec = GC_GPU_CODEC_RLE;
                    j.op = GC_GPU_ENCODE;
                    j.src = src + i * per;
                    j.src_len = per;
                    j.opt.rle = opt;
                    j.dst = dst + i * fb;
                    j.dst_cap = fb;
                }
            }
            PRow r;
            r.what = std::string(dec ? "decompress" : "compress") + (pinned ? ", pinned" : ", pageable") + label;
            int rc = gc_gpu_run_batch(c, jobs.data(), njobs, &r.s, &err);
            r.ok = rc == GC_OK;
            r.first_host_ms = r.s.host_ms;
            if (!r.ok)
                printf("batch: %s\n", err.msg);
            for (size_t i = 0; r.ok && i < njobs; i++) {
                if (jobs[i].status != GC_OK) {
                    printf("job %zu: %s\n", i, jobs[i].err.msg);
                    r.ok = false;
                }
                if (!dec) {
                    if (mode == 1 &&
                        (jobs[i].dst_len != flens[i] || memcmp(pn_dst + i * fb, pg_dst + i * fb, flens[i])))
                        r.ok = false; /* pinned and pageable frames must agree */
                    if (mode == 0 && pinned_ref &&
                        (jobs[i].dst_len != flens[i] || memcmp(pn_dst + i * fb, pg_dst + i * fb, flens[i])))
                        r.ok = false;
                    flens[i] = jobs[i].dst_len;
                }
            }
            if (mode == 1)
                pinned_ref = r.ok;
            if (dec && r.ok)
                r.ok = memcmp(out, pn_src, total) == 0;
            printf(
                "%-34s %s: host %.1f ms, events %.1f ms, H2D %.1f ms, kernels %.1f ms, D2H %.1f ms, %u pieces\n",
                r.what.c_str(), r.ok ? "ok" : "FAILED", r.s.host_ms, r.s.wall_ms, r.s.h2d_ms, r.s.kernel_ms,
                r.s.d2h_ms, r.s.pieces);
            prow.push_back(r);
        };
        for (int mode = 0; mode < 4; mode++)
            run_jobs(ctx, mode, "");

        /* contexts with other host-copy settings (read by gc_gpu_open) */
        auto open_env = [&](const char *threads, const char *nt) -> gc_gpu_ctx * {
            auto set = [](const char *k, const char *v) {
                if (v)
                    setenv(k, v, 1);
                else
                    unsetenv(k);
            };
            set("GC_GPU_COPY_THREADS", threads);
            set("GC_GPU_COPY_NT", nt);
            gc_gpu_ctx *c = nullptr;
            if (gc_gpu_open(0, &cfg, &c, &err) != GC_OK) {
                printf("open: %s\n", err.msg);
                return nullptr;
            }
            return c;
        };

        /* ---- what cudaHostRegister costs ---- */
        auto reg_cost = [&](const std::string &what, const void *p, size_t len, unsigned flags) {
            const uintptr_t pg = 4096;
            uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + len) & ~(pg - 1);
            RRow r{ what, (e - a) / 1073741824.0, 0, 0, false };
            double t0 = wall_ms_now();
            cudaError_t rc = cudaHostRegister((void *)a, e - a, flags);
            r.reg_ms = wall_ms_now() - t0;
            if (rc == cudaSuccess) {
                t0 = wall_ms_now();
                rc = cudaHostUnregister((void *)a);
                r.unreg_ms = wall_ms_now() - t0;
                r.ok = rc == cudaSuccess;
            }
            if (rc != cudaSuccess) {
                printf("%s: %s\n", what.c_str(), cudaGetErrorString(rc));
                (void)cudaGetLastError();
            }
            printf("register %-46s %.2f GiB: %.1f ms, unregister %.1f ms%s\n", what.c_str(), r.gib, r.reg_ms,
                   r.unreg_ms, r.ok ? "" : " (FAILED)");
            rrow.push_back(r);
        };
        reg_cost("malloc'ed, touched (default)", pg_src, total, cudaHostRegisterDefault);
        {
            /* the same buffer in 16 pieces from 8 threads at once: does the driver scale? */
            struct RegArg {
                uint8_t *p;
                size_t len;
                bool unreg, ok;
            };
            const int nth = 8, npieces = 16;
            size_t pl = (total / npieces) & ~(size_t)4095;
            uint8_t *base = (uint8_t *)(((uintptr_t)pg_src + 4095) & ~(uintptr_t)4095);
            std::vector<RegArg> args(npieces);
            for (int i = 0; i < npieces; i++)
                args[i] = { base + i * pl, pl, false, false };
            auto work = [](void *v) -> void * {
                std::vector<RegArg> *a = (std::vector<RegArg> *)((void **)v)[0];
                int t = (int)(intptr_t)((void **)v)[1];
                for (size_t i = t; i < a->size(); i += 8) {
                    RegArg &r = (*a)[i];
                    cudaError_t rc =
                        r.unreg ? cudaHostUnregister(r.p) : cudaHostRegister(r.p, r.len, cudaHostRegisterDefault);
                    r.ok = rc == cudaSuccess;
                }
                return nullptr;
            };
            double ms[2] = { 0, 0 };
            bool ok = true;
            for (int phase = 0; phase < 2 && ok; phase++) {
                for (RegArg &r : args)
                    r.unreg = phase == 1;
                pthread_t th[nth];
                void *targ[nth][2];
                double t0 = wall_ms_now();
                for (int t = 0; t < nth; t++) {
                    targ[t][0] = &args;
                    targ[t][1] = (void *)(intptr_t)t;
                    pthread_create(&th[t], nullptr, work, targ[t]);
                }
                for (int t = 0; t < nth; t++)
                    pthread_join(th[t], nullptr);
                ms[phase] = wall_ms_now() - t0;
                for (RegArg &r : args)
                    ok = ok && r.ok;
            }
            (void)cudaGetLastError();
            RRow r{ "malloc'ed, 16 pieces from 8 threads", npieces * pl / 1073741824.0, ms[0], ms[1], ok };
            printf("register %-46s %.2f GiB: %.1f ms, unregister %.1f ms%s\n", r.what.c_str(), r.gib, r.reg_ms,
                   r.unreg_ms, r.ok ? "" : " (FAILED)");
            rrow.push_back(r);
        }

        /* ---- the daemon's path: one 4 GiB request in a memfd, output in another ---- */
        size_t fb1 = rle_compress_bound(total, &opt);
        uint8_t *mf_src = nullptr, *mf_dst = nullptr, *mf_out = nullptr;
        int fds[3] = { -1, -1, -1 };
        bool mf_ok = fb1 <= fb * njobs;
        if (mf_ok) {
            fds[0] = memfd_create("bench-in", MFD_CLOEXEC);
            fds[1] = memfd_create("bench-frame", MFD_CLOEXEC);
            fds[2] = memfd_create("bench-out", MFD_CLOEXEC);
            mf_ok = fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && ftruncate(fds[0], (off_t)total) == 0 &&
                    ftruncate(fds[1], (off_t)fb1) == 0 && ftruncate(fds[2], (off_t)total) == 0;
        }
        if (mf_ok) {
            /* the client writes the input, the daemon maps it read-only */
            void *w = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
            mf_ok = w != MAP_FAILED;
            if (mf_ok) {
                memcpy(w, pn_src, total);
                munmap(w, total);
            }
            double t0 = wall_ms_now();
            void *a = mmap(nullptr, total, PROT_READ, MAP_SHARED | MAP_POPULATE, fds[0], 0);
            double t1 = wall_ms_now();
            void *b = mmap(nullptr, fb1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[1], 0);
            double t2 = wall_ms_now();
            void *c = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[2], 0);
            printf(
                "memfd mmap MAP_SHARED|MAP_POPULATE: input (written) %.1f ms, frame (new) %.1f ms, output (new) "
                "%.1f ms, %.2f GiB each\n",
                t1 - t0, t2 - t1, wall_ms_now() - t2, total / 1073741824.0);
            mf_ok = mf_ok && a != MAP_FAILED && b != MAP_FAILED && c != MAP_FAILED;
            mf_src = a == MAP_FAILED ? nullptr : (uint8_t *)a;
            mf_dst = b == MAP_FAILED ? nullptr : (uint8_t *)b;
            mf_out = c == MAP_FAILED ? nullptr : (uint8_t *)c;
        }
        if (!mf_ok)
            printf("memfd setup failed: %s\n", strerror(errno));
        if (mf_ok) {
            reg_cost("memfd input, PROT_READ (default)", mf_src, total, cudaHostRegisterDefault);
            reg_cost("memfd input, PROT_READ (read-only)", mf_src, total, cudaHostRegisterReadOnly);
            reg_cost("memfd output, PROT_READ|PROT_WRITE (default)", mf_dst, fb1, cudaHostRegisterDefault);
        }
        /* one job of the whole size, pinned: the reference frame and the PCIe-bound figure */
        size_t flen1 = 0;
        auto one_job = [&](gc_gpu_ctx *c, bool dec, const uint8_t *src, uint8_t *dst, const char *what,
                           PRow *r) -> bool {
            gc_gpu_job j;
            memset(&j, 0, sizeof j);
            j.codec = GC_GPU_CODEC_RLE;
            j.op = dec ? GC_GPU_DECODE : GC_GPU_ENCODE;
            j.src = src;
            j.src_len = dec ? flen1 : total;
            j.opt.rle = opt;
            j.dst = dst;
            j.dst_cap = dec ? total : fb1;
            r->what = what;
            int rc = gc_gpu_run_batch(c, &j, 1, &r->s, &err);
            bool ok = rc == GC_OK && j.status == GC_OK;
            if (!ok)
                printf("%s: %s\n", what, rc != GC_OK ? err.msg : j.err.msg);
            if (ok && !dec) {
                if (flen1 == 0)
                    flen1 = j.dst_len;
                else
                    ok = j.dst_len == flen1 && memcmp(dst, pn_dst, flen1) == 0;
            }
            if (ok && dec)
                ok = j.dst_len == total && memcmp(dst, pn_src, total) == 0;
            return ok;
        };
        auto print_row = [](const PRow &r) {
            printf("%-34s %s: host %.1f ms (first run %.1f), events %.1f ms, H2D %.1f ms, kernels %.1f ms, D2H "
                   "%.1f ms, "
                   "%u pieces\n",
                   r.what.c_str(), r.ok ? "ok" : "FAILED", r.s.host_ms, r.first_host_ms, r.s.wall_ms, r.s.h2d_ms,
                   r.s.kernel_ms, r.s.d2h_ms, r.s.pieces);
        };
        if (mf_ok) {
            PRow r;
            r.ok = one_job(ctx, false, pn_src, pn_dst, "compress, pinned, 1 job", &r);
            r.first_host_ms = r.s.host_ms;
            print_row(r);
            prow.push_back(r);
            mf_ok = r.ok;
            memset(pn_out, 0, total);
            r.ok = one_job(ctx, true, pn_dst, pn_out, "decompress, pinned, 1 job", &r);
            r.first_host_ms = r.s.host_ms;
            print_row(r);
            prow.push_back(r);
        }
        struct Var {
            const char *label, *threads, *nt;
        } vars[] = {
            { "memfd, stage (default settings)", nullptr, nullptr },
            { "memfd, stage, 0 copy threads", "0", nullptr },
            { "memfd, stage, 4 copy threads", "4", nullptr },
            { "memfd, stage, 16 copy threads", "16", nullptr },
            { "memfd, stage, no NT stores", nullptr, "0" },
        };
        for (const Var &v : vars) {
            if (!mf_ok)
                break;
            gc_gpu_ctx *c = open_env(v.threads, v.nt);
            if (!c)
                break;
            for (int dec = 0; dec < 2; dec++) {
                PRow r;
                bool ok = true;
                double first = 0;
                for (int rep = 0; rep < 2; rep++) {
                    if (dec)
                        memset(mf_out, 0, total);
                    else
                        memset(mf_dst, 0, flen1);
                    std::string what = std::string(dec ? "decompress, " : "compress, ") + v.label;
                    ok = one_job(c, dec, dec ? mf_dst : mf_src, dec ? mf_out : mf_dst, what.c_str(), &r) && ok;
                    if (rep == 0)
                        first = r.s.host_ms;
                }
                r.ok = ok;
                r.first_host_ms = first;
                print_row(r);
                prow.push_back(r);
            }
            gc_gpu_close(c);
        }
        unsetenv("GC_GPU_COPY_THREADS");
        unsetenv("GC_GPU_COPY_NT");
        if (mf_src)
            munmap(mf_src, total);
        if (mf_dst)
            munmap(mf_dst, fb1);
        if (mf_out)
            munmap(mf_out, total);
        for (int fd : fds)
            if (fd >= 0)
                close(fd);
        free(pg_out);
        free(pg_src);
        free(pg_dst);
        cudaFreeHost(pn_src);
        cudaFreeHost(pn_dst);
        cudaFreeHost(pn_out);
    }

    if (!rows.empty()) {
        printf("\n### Kernels on device-resident data (%zu MiB, chunk 1 MiB, median of %d, %s)\n\n", mib, reps,
               info.name);
        printf("| data | width | frame/input | encode GB/s | decode GB/s | CUB RLE encode GB/s | encode / CUB | "
               "D2D copy GB/s (input) | decode verified |\n");
        printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for (const Row &r : rows)
            printf("| %s | %u | %.3f | %.0f | %.0f | %.0f | %.2fx | %.0f | %s |\n", r.data.c_str(), r.w, r.ratio,
                   r.enc, r.dec, r.cub, r.enc / r.cub, r.copy, r.ok ? "yes" : "NO");
        printf("\nD2D copy: %.0f GB/s read+write. Ceilings on the codec's tile geometry (GB/s of input): "
               "read only %.0f, read + CRC32C %.0f.\n",
               2 * n / copy_ms / 1e6, ceil_read, ceil_crc);
    }
    if (!prow.empty()) {
        printf("\n### Batch pipeline (gc_gpu_run_batch, %.1f GiB of mixed data, 3 slots, 64 MiB pieces, %s)\n\n",
               pipe_gib, info.name);
        printf("Rows without \"1 job\" or \"memfd\": %.1f GiB as 256 MiB jobs. memfd rows: one job of the whole "
               "size from a "
               "PROT_READ MAP_SHARED|MAP_POPULATE memfd mapping into another (the daemon's path), second of two "
               "runs. "
               "H2D / kernels / D2H: sums over the pieces (CUDA events).\n\n",
               pipe_gib);
        printf("| run | GB (original) | wall ms (host) | first run ms (host) | wall ms (events) | H2D ms | "
               "kernels ms | D2H ms | max(H2D,kern,D2H) / wall | GB/s (host wall) | ok |\n");
        printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for (const PRow &r : prow) {
            double mx = std::max(r.s.h2d_ms, std::max(r.s.kernel_ms, r.s.d2h_ms));
            double orig = (double)(r.what.compare(0, 10, "decompress") == 0 ? r.s.bytes_out : r.s.bytes_in);
            printf("| %s | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %s |\n", r.what.c_str(),
                   orig / 1e9, r.s.host_ms, r.first_host_ms, r.s.wall_ms, r.s.h2d_ms, r.s.kernel_ms, r.s.d2h_ms,
                   r.s.wall_ms > 0 ? mx / r.s.wall_ms : 0, r.s.host_ms > 0 ? orig / r.s.host_ms / 1e6 : 0,
                   r.ok ? "yes" : "NO");
        }
    }
    if (!rrow.empty()) {
        printf("\n### cudaHostRegister cost (%s)\n\n", info.name);
        printf("| buffer | GiB | cudaHostRegister ms | GB/s | cudaHostUnregister ms | ok |\n");
        printf("| --- | --- | --- | --- | --- | --- |\n");
        for (const RRow &r : rrow)
            printf("| %s | %.2f | %.1f | %.1f | %.1f | %s |\n", r.what.c_str(), r.gib, r.reg_ms,
                   r.reg_ms > 0 ? r.gib * 1.073741824 / (r.reg_ms / 1e3) : 0, r.unreg_ms, r.ok ? "yes" : "failed");
    }
    bool all_ok = true;
    for (const Row &r : rows)
        all_ok = all_ok && r.ok;
    for (const PRow &r : prow)
        all_ok = all_ok && r.ok;
    gc_gpu_close(ctx);
    return all_ok ? 0 : 1;
}
