/*
 * bench_gpu_rle.cu - benchmark of the CUDA rle codec.
 *
 *   bench_gpu_rle [--size MiB] [--reps N] [--pipeline GiB] [--no-pipeline]
 *
 * 1. Kernels on device-resident data (default 1 GiB, generated on the device):
 *    random bytes, short runs (mean 8), long runs (mean 256); width 1 and 4.
 *    Encode (whole frame: both passes, scan, header CRC) and decode (all
 *    validation and CRC checks) in GB/s of original input, next to
 *    cub::DeviceRunLengthEncode::Encode on the same data and a device-to-device
 *    cudaMemcpy of the same size, all timed with CUDA events in the same run,
 *    median of --reps repetitions. Every decode is checked against the input.
 * 2. The batch pipeline (gc_gpu_rle_run_batch) compressing --pipeline GiB
 *    (default 4) of mixed data from pageable and from pinned host memory, then
 *    decompressing it (pinned): wall time vs max(total H2D, kernels, D2H).
 * Prints markdown tables last.
 */
#include <cub/device/device_run_length_encode.cuh>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

extern "C" {
#include "gpu.h"
#include "rle.h"
}
#include "gpu_internal.cuh"

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

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

struct Timer {
    cudaEvent_t a, b;
    cudaStream_t st;
    explicit Timer(cudaStream_t s) : st(s) { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
    void start() { CK(cudaEventRecord(a, st)); }
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
    bool pipeline = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc)
            mib = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pipeline") && i + 1 < argc)
            pipe_gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-pipeline"))
            pipeline = false;
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
    gc_gpu_config cfg = {3, 64u << 20};
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
    rle_options opt = {1, RLE_DEFAULT_CHUNK_SIZE, 1};
    size_t bound = rle_compress_bound(n, &opt) + 4096;
    size_t scr_len = std::max(gc_gpu_rle_scratch_size(n, &opt), (size_t)(64 << 20));
    uint8_t *d_in, *d_frame, *d_out, *d_scr, *d_copy;
    unsigned long long *d_bad;
    CK(cudaMalloc(&d_in, n));
    CK(cudaMalloc(&d_frame, bound));
    CK(cudaMalloc(&d_out, n + 16));
    CK(cudaMalloc(&d_copy, n));
    CK(cudaMalloc(&d_scr, scr_len));
    CK(cudaMalloc(&d_bad, 8));
    /* CUB reference buffers (width 1 and 4) */
    void *d_cub_u = nullptr, *d_cub_tmp = nullptr;
    int *d_cub_cnt, *d_cub_nr;
    CK(cudaMalloc(&d_cub_u, n));
    CK(cudaMalloc(&d_cub_cnt, (n / 1 + 1) * sizeof(int) > (8ull << 30) ? (8ull << 30) : (n + 1) * sizeof(int)));
    CK(cudaMalloc(&d_cub_nr, sizeof(int)));
    size_t cub_tmp_bytes = 0, t1 = 0, t4 = 0;
    CK(cub::DeviceRunLengthEncode::Encode(nullptr, t1, d_in, (uint8_t *)d_cub_u, d_cub_cnt, d_cub_nr, (int64_t)n));
    CK(cub::DeviceRunLengthEncode::Encode(nullptr, t4, (uint32_t *)d_in, (uint32_t *)d_cub_u, d_cub_cnt, d_cub_nr,
                                          (int64_t)(n / 4)));
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
    double copy_ms = median(tc);
    printf("device copy: %.3f ms = %.0f GB/s of input, %.0f GB/s read+write\n", copy_ms, n / copy_ms / 1e6,
           2 * n / copy_ms / 1e6);

    std::vector<Row> rows;
    const char *names[] = {"random bytes", "short runs (mean 8)", "long runs (mean 256)"};
    for (unsigned w : {1u, 4u}) {
        for (int kind = 0; kind < 3; kind++) {
            gen_kernel<<<(unsigned)((n / 4096 + 255) / 256), 256, 0, st>>>(d_in, n, w, kind, 1000 + kind * 7 + w);
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
                p.index = (uint32_t *)(d_frame + 32);
                tm.start();
                int rc = gcgpu::enc_launch(p, d_tab, d_scr, scr_len, st, &d_total, &err);
                if (rc == GC_OK)
                    rc = gcgpu::enc_frame_header(d_frame, d_in, n, w, opt.chunk_size, cc, d_tab, d_scr, scr_len, st,
                                                 &err);
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
            if (gc_gpu_rle_encode_device(ctx, d_in, n, &opt, d_frame, bound, &flen2, d_scr, scr_len, &err) != GC_OK ||
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
                    CK(cub::DeviceRunLengthEncode::Encode(d_cub_tmp, tb, d_in, (uint8_t *)d_cub_u, d_cub_cnt, d_cub_nr,
                                                          (int64_t)n, st));
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
            printf("%-22s w=%u ratio %.3f  encode %.3f ms (%.0f GB/s)  decode %.3f ms (%.0f GB/s)  cub %.3f ms (%.0f GB/s) %s\n",
                   row.data.c_str(), w, row.ratio, median(te), row.enc, median(td), row.dec, median(tcub), row.cub,
                   ok ? "verified" : "DECODE MISMATCH");
            rows.push_back(row);
        }
    }
    cudaFree(d_cub_u);
    cudaFree(d_cub_cnt);
    cudaFree(d_cub_tmp);
    cudaFree(d_copy);

    /* ---- pipeline ---- */
    struct PRow {
        std::string what;
        gc_gpu_batch_stats s;
        bool ok;
    };
    std::vector<PRow> prow;
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
        memcpy(pg_src, pn_src, total);
        memset(pg_dst, 0, fb * njobs);
        uint8_t *pg_out = (uint8_t *)malloc(total);
        if (!pg_out) {
            printf("host allocation failed\n");
            return 1;
        }
        memset(pg_out, 0, total);
        std::vector<gc_gpu_job> jobs(njobs);
        std::vector<size_t> flens(njobs);
        for (int mode = 0; mode < 4; mode++) {
            bool pinned = mode == 1 || mode == 3, dec = mode >= 2;
            uint8_t *src = pinned ? pn_src : pg_src, *dst = pinned ? pn_dst : pg_dst, *out = pinned ? pn_out : pg_out;
            for (size_t i = 0; i < njobs; i++) {
                gc_gpu_job &j = jobs[i];
                memset(&j, 0, sizeof j);
                if (dec) {
                    j.op = GC_GPU_DECODE;
                    j.src = dst + i * fb;
                    j.src_len = flens[i];
                    j.dst = out + i * per;
                    j.dst_cap = per;
                } else {
                    j.op = GC_GPU_ENCODE;
                    j.src = src + i * per;
                    j.src_len = per;
                    j.opt = opt;
                    j.dst = dst + i * fb;
                    j.dst_cap = fb;
                }
            }
            PRow r;
            r.what = std::string(dec ? "decompress" : "compress") + (pinned ? ", pinned" : ", pageable");
            int rc = gc_gpu_rle_run_batch(ctx, jobs.data(), njobs, &r.s, &err);
            r.ok = rc == GC_OK;
            if (!r.ok)
                printf("batch: %s\n", err.msg);
            for (size_t i = 0; r.ok && i < njobs; i++) {
                if (jobs[i].status != GC_OK) {
                    printf("job %zu: %s\n", i, jobs[i].err.msg);
                    r.ok = false;
                }
                if (!dec) {
                    if (mode == 1 && (jobs[i].dst_len != flens[i] || memcmp(pn_dst + i * fb, pg_dst + i * fb, flens[i])))
                        r.ok = false; /* pinned and pageable frames must agree */
                    flens[i] = jobs[i].dst_len;
                }
            }
            if (dec && r.ok)
                r.ok = memcmp(out, pn_src, total) == 0;
            printf("%-22s %s: host %.1f ms, events %.1f ms, H2D %.1f ms, kernels %.1f ms, D2H %.1f ms, %u slices\n",
                   r.what.c_str(), r.ok ? "ok" : "FAILED", r.s.host_ms, r.s.wall_ms, r.s.h2d_ms, r.s.kernel_ms,
                   r.s.d2h_ms, r.s.slices);
            prow.push_back(r);
        }
        free(pg_out);
        free(pg_src);
        free(pg_dst);
        cudaFreeHost(pn_src);
        cudaFreeHost(pn_dst);
        cudaFreeHost(pn_out);
    }

    printf("\n### Kernels on device-resident data (%zu MiB, chunk 1 MiB, median of %d, %s)\n\n", mib, reps, info.name);
    printf("| data | width | frame/input | encode GB/s | decode GB/s | CUB RLE encode GB/s | encode / CUB | D2D copy GB/s (input) | decode verified |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const Row &r : rows)
        printf("| %s | %u | %.3f | %.0f | %.0f | %.0f | %.2fx | %.0f | %s |\n", r.data.c_str(), r.w, r.ratio, r.enc,
               r.dec, r.cub, r.enc / r.cub, r.copy, r.ok ? "yes" : "NO");
    printf("\nD2D copy: %.0f GB/s read+write.\n", 2 * n / copy_ms / 1e6);
    if (!prow.empty()) {
        printf("\n### Batch pipeline (gc_gpu_rle_run_batch, %.1f GiB of mixed data, 3 streams, 64 MiB slices)\n\n", pipe_gib);
        printf("| run | GB (original) | wall ms (host) | wall ms (events) | H2D ms | kernels ms | D2H ms | max(H2D,kern,D2H) / wall | GB/s (host wall) | ok |\n");
        printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for (const PRow &r : prow) {
            double mx = std::max(r.s.h2d_ms, std::max(r.s.kernel_ms, r.s.d2h_ms));
            double orig = (double)(r.what.compare(0, 10, "decompress") == 0 ? r.s.bytes_out : r.s.bytes_in);
            printf("| %s | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f | %s |\n", r.what.c_str(),
                   orig / 1e9, r.s.host_ms, r.s.wall_ms, r.s.h2d_ms, r.s.kernel_ms, r.s.d2h_ms,
                   r.s.wall_ms > 0 ? mx / r.s.wall_ms : 0, orig / r.s.host_ms / 1e6, r.ok ? "yes" : "NO");
        }
    }
    bool all_ok = true;
    for (const Row &r : rows)
        all_ok = all_ok && r.ok;
    for (const PRow &r : prow)
        all_ok = all_ok && r.ok;
    gc_gpu_close(ctx);
    return all_ok ? 0 : 1;
}
