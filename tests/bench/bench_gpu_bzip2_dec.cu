/*
 * bench_gpu_bzip2_dec.cu - benchmark of the CUDA bzip2 decoder on .bz2 files
 * (scripts/gpu-bzip2-dec-bench.sh makes the corpora, encodes them with bzip2
 * and lbzip2 and adds the CPU decoders and the daemon).
 *
 *   bench_gpu_bzip2_dec [--reps N] [--blocks1 | --only-blocks1] FILE.bz2...
 *
 * For each file (MB = 10^6 bytes of decompressed OUTPUT):
 *  1. the CPU engine (bz2_decompress, all threads), one run: the reference
 *     output, timed;
 *  2. device-resident: the .bz2 copied to device memory once, then
 *     gc_gpu_bzip2_decode_device one untimed warm-up run (it makes the
 *     context's decoder scratch) and N timed runs (--reps, default 3): best
 *     and median, the per-stage times of the best run (gc_gpu_bzip2_dec_stages:
 *     scan, huffman, walk, ibwt, rle1 in ms) and the counts of candidates,
 *     blocks, streams and waves. Every run's output is copied back (untimed)
 *     and compared with the reference;
 *  3. the batch API: gc_gpu_run_batch with one GC_GPU_DECODE job whose input
 *     is in pageable host memory, dst NULL and grown by a realloc `grow`
 *     callback (host to host, output allocation and first touch included),
 *     one warm-up and N timed runs, each compared with the reference.
 * --blocks1 also measures single-block latency: the first bytes of the
 * reference output that fill exactly one bzip2 -9 block (900000 bytes cut to
 * the block limit of 899981 RLE1 bytes, docs/BZIP2.md) are compressed with
 * bz2_compress at level 9 in-process, then decoded N times (after a warm-up)
 * by the CPU engine (all threads) and by the GPU device-resident decoder;
 * best and median latency in ms. --only-blocks1 measures only that.
 * A mismatch or a failed decode makes the exit status 1 (77: no CUDA device).
 * Prints "RESULT<TAB>file<TAB>output bytes<TAB>tool<TAB>MB/s<TAB>note" lines
 * for scripts, then Markdown tables last.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bzip2.h" /* the CPU engine (the reference) */
#include "gpu.h"   /* the CUDA backend's C API; brings rle.h */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- helpers -------------------------------------------------------------------- */

static bool read_file(const char *path, std::vector<uint8_t> &out)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    out.resize((size_t)st.st_size);
    size_t got = 0;
    while (got < out.size()) {
        ssize_t r = read(fd, out.data() + got, out.size() - got);
        if (r <= 0) {
            fprintf(stderr, "%s: read: %s\n", path, r < 0 ? strerror(errno) : "short file");
            close(fd);
            return false;
        }
        got += (size_t)r;
    }
    close(fd);
    return true;
}

static size_t first_diff(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    size_t m = std::min(an, bn), i = 0;
    while (i < m && a[i] == b[i])
        i++;
    return i;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static double mbs(size_t n, double s)
{
    return s > 0 ? n / s / 1e6 : 0;
}

static double median_of(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t k = v.size();
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* Bytes of bzip2's RLE1 output for p[0..n) (runs of 4..255 equal bytes: 4 bytes + a count). */
static size_t rle1_len(const uint8_t *p, size_t n)
{
    size_t i = 0, out = 0;
    while (i < n) {
        size_t r = 1;
        while (i + r < n && r < 255 && p[i + r] == p[i])
            r++;
        out += r >= 4 ? 5 : r;
        i += r;
    }
    return out;
}

/* The longest prefix (up to want bytes) whose RLE1 output fits one level-9 block. */
static size_t one_block_prefix(const uint8_t *p, size_t n, size_t want)
{
    const size_t limit = 9 * 100000 - 19; /* bz2_block_limit(9) */
    size_t k = std::min(n, want);
    for (;;) {
        size_t l = rle1_len(p, k);
        if (l <= limit)
            return k;
        k -= std::min(k, l - limit);
    }
}

/* grow for a decode job: realloc, keeping the bytes already there. */
static int grow_realloc(gc_gpu_job *job, size_t len, gc_error *err)
{
    void *p = realloc(job->dst, len ? len : 1);
    if (!p)
        return gc_fail(err, GC_E_NOMEM, "bench: realloc of %zu bytes failed", len);
    job->dst = static_cast<uint8_t *>(p);
    job->dst_cap = len;
    return GC_OK;
}

static unsigned long long grow_calls; /* how often grow ran (the last batch run) */

static int grow_counted(gc_gpu_job *job, size_t len, gc_error *err)
{
    grow_calls++;
    return grow_realloc(job, len, err);
}

struct Row {
    std::string file;
    size_t in_bytes = 0, out_bytes = 0;
    double cpu_mbs = 0, dev_best_mbs = 0, dev_med_mbs = 0, dev_first_mbs = 0, batch_best_mbs = 0,
           batch_med_mbs = 0;
    const char *dev_ok = "-", *batch_ok = "-";
    gc_gpu_bzip2_dec_stages st;
    bool full = false;
    /* --blocks1 */
    bool b1 = false;
    size_t b1_bytes = 0, b1_stream = 0;
    double b1_cpu_best = 0, b1_cpu_med = 0, b1_dev_best = 0, b1_dev_med = 0;
    const char *b1_ok = "-";
    gc_gpu_bzip2_dec_stages b1_st;
};

/* Device-resident decode of d_src: one warm-up, reps timed runs (seconds in times), each
 * run verified against ref. Returns false on a failed decode or a mismatch (printed). */
static bool run_device(gc_gpu_ctx *ctx, const char *what, const void *d_src, size_t n, void *d_dst, size_t cap,
                       const uint8_t *ref, size_t ref_len, int reps, std::vector<double> &times,
                       gc_gpu_bzip2_dec_stages &best_st, double *first_s, int *status)
{
    std::vector<uint8_t> chk(ref_len ? ref_len : 1);
    double best = 1e30;
    gc_error e;
    for (int r = 0; r <= reps; r++) {
        gc_gpu_bzip2_dec_stages st;
        memset(&st, 0, sizeof st);
        size_t len = 0;
        double t0 = now_s();
        int rc = gc_gpu_bzip2_decode_device(ctx, d_src, n, d_dst, cap, &len, &st, &e);
        double dt = now_s() - t0;
        if (rc != GC_OK) {
            fprintf(stderr, "%s: gc_gpu_bzip2_decode_device: rc %d: %s\n", what, rc, e.msg);
            *status = 1;
            if (rc == GC_E_DEVICE)
                exit(1);
            return false;
        }
        if (r == 0) {
            if (first_s)
                *first_s = dt;
        } else {
            times.push_back(dt);
            if (dt < best) {
                best = dt;
                best_st = st;
            }
        }
        if (len != ref_len) {
            printf("MISMATCH %s device-resident (run %d): %zu bytes, CPU engine %zu\n", what, r, len, ref_len);
            *status = 1;
            return false;
        }
        if (len)
            CK(cudaMemcpy(chk.data(), d_dst, len, cudaMemcpyDeviceToHost));
        if (memcmp(chk.data(), ref, len) != 0) {
            printf("MISMATCH %s device-resident (run %d): first difference at byte %zu\n", what, r,
                   first_diff(chk.data(), len, ref, ref_len));
            *status = 1;
            return false;
        }
    }
    return true;
}

/* ---- main ----------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int reps = 3;
    bool blocks1 = false, full = true;
    std::vector<const char *> files;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = std::max(1, atoi(argv[++i]));
        } else if (!strcmp(argv[i], "--blocks1")) {
            blocks1 = true;
        } else if (!strcmp(argv[i], "--only-blocks1")) {
            blocks1 = true;
            full = false;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--reps N] [--blocks1 | --only-blocks1] FILE.bz2...\n", argv[0]);
            return 2;
        } else {
            files.push_back(argv[i]);
        }
    }
    if (files.empty()) {
        fprintf(stderr, "usage: %s [--reps N] [--blocks1 | --only-blocks1] FILE.bz2...\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (gc_gpu_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    gc_gpu_info info;
    gc_error e;
    if (gc_gpu_device_info(0, &info, &e) == GC_OK)
        printf("device 0: %s, %d SMs, cc %d.%d, %.1f GiB\n", info.name, info.sm_count, info.cc_major,
               info.cc_minor, info.total_mem / 1073741824.0);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("MB = 10^6 bytes of decompressed output; GPU: best and median of %d runs after a warm-up; "
           "CPU engine: %ld threads, 1 run (the reference)\n",
           reps, ncpu);
    gc_gpu_ctx *ctx = nullptr;
    if (gc_gpu_open(0, nullptr, &ctx, &e) != GC_OK) {
        fprintf(stderr, "gc_gpu_open: %s\n", e.msg);
        return 1;
    }
    int status = 0;
    std::vector<Row> rows;
    for (const char *path : files) {
        std::vector<uint8_t> src;
        if (!read_file(path, src)) {
            status = 1;
            continue;
        }
        Row row;
        row.file = base_name(path);
        const size_t n = src.size();
        row.in_bytes = n;
        printf("== %s: %zu bytes (%.1f MiB)\n", path, n, n / 1048576.0);

        /* 1. the CPU engine, all threads, one run: the reference output */
        uint8_t *ref = nullptr;
        size_t ref_len = 0;
        double t0 = now_s();
        if (bz2_decompress(src.data(), n, 0, 0, &ref, &ref_len, &e) != GC_OK) {
            fprintf(stderr, "%s: bz2_decompress: %s\n", path, e.msg);
            status = 1;
            continue;
        }
        double cpu_s = now_s() - t0;
        row.out_bytes = ref_len;
        row.cpu_mbs = mbs(ref_len, cpu_s);
        printf("cpu engine: %.1f MB/s (%.3f s), %zu bytes out, ratio %.3f\n", row.cpu_mbs, cpu_s, ref_len,
               n ? (double)ref_len / n : 0.0);

        if (full) {
            row.full = true;
            /* 2. device-resident: input copied once */
            size_t cap = ((ref_len >> 20) + 2) << 20;
            void *d_src = nullptr, *d_dst = nullptr;
            CK(cudaMalloc(&d_src, n ? n : 16));
            CK(cudaMalloc(&d_dst, cap));
            CK(cudaMemcpy(d_src, src.data(), n, cudaMemcpyHostToDevice));
            std::vector<double> times;
            double first = 0;
            memset(&row.st, 0, sizeof row.st);
            if (run_device(ctx, path, d_src, n, d_dst, cap, ref, ref_len, reps, times, row.st, &first, &status)) {
                row.dev_ok = "yes";
                row.dev_best_mbs = mbs(ref_len, *std::min_element(times.begin(), times.end()));
                row.dev_med_mbs = mbs(ref_len, median_of(times));
                row.dev_first_mbs = mbs(ref_len, first);
                const gc_gpu_bzip2_dec_stages &s = row.st;
                printf("gpu device-resident: best %.1f MB/s (%.3f s), median %.1f MB/s, warm-up %.1f MB/s; "
                       "%llu candidates, %llu blocks, %llu streams, %llu waves; best run: scan %.2f ms, huffman "
                       "%.2f, walk %.2f, ibwt %.2f, rle1 %.2f, output %.2f; identical: yes\n",
                       row.dev_best_mbs, *std::min_element(times.begin(), times.end()), row.dev_med_mbs,
                       row.dev_first_mbs, (unsigned long long)s.candidates, (unsigned long long)s.blocks,
                       (unsigned long long)s.streams, (unsigned long long)s.waves, s.scan_ms, s.huffman_ms,
                       s.walk_ms, s.ibwt_ms, s.rle1_ms, s.output_ms);
            } else {
                row.dev_ok = "NO";
            }
            cudaFree(d_dst);
            cudaFree(d_src);

            /* 3. batch API: one decode job, pageable input, dst grown by realloc */
            std::vector<double> bt;
            bool ok = true;
            for (int r = 0; r <= reps && ok; r++) {
                gc_gpu_job job;
                memset(&job, 0, sizeof job);
                job.codec = GC_GPU_CODEC_BZIP2;
                job.op = GC_GPU_DECODE;
                job.src = src.data();
                job.src_len = n;
                job.dst = nullptr;
                job.dst_cap = 0;
                job.grow = grow_counted;
                grow_calls = 0;
                gc_gpu_batch_stats bs;
                memset(&bs, 0, sizeof bs);
                t0 = now_s();
                int rc = gc_gpu_run_batch(ctx, &job, 1, &bs, &e);
                double dt = now_s() - t0;
                if (rc != GC_OK || job.status != GC_OK) {
                    fprintf(stderr, "%s: batch decode: rc %d (%s) status %d (%s)\n", path, rc,
                            rc != GC_OK ? e.msg : "", job.status, job.err.msg);
                    status = 1;
                    ok = false;
                    row.batch_ok = "error";
                    free(job.dst);
                    if (rc == GC_E_DEVICE)
                        return 1;
                    break;
                }
                if (r > 0)
                    bt.push_back(dt);
                if (job.dst_len != ref_len || (ref_len && memcmp(job.dst, ref, ref_len) != 0)) {
                    printf("MISMATCH %s batch (run %d): %zu bytes vs CPU %zu, first difference at byte %zu\n",
                           path, r, job.dst_len, ref_len, first_diff(job.dst, job.dst_len, ref, ref_len));
                    status = 1;
                    ok = false;
                    row.batch_ok = "NO";
                }
                if (r == reps && ok)
                    printf("gpu batch (last run): %.3f s host wall, grow called %llu times, H2D %.2f ms, kernels "
                           "%.2f "
                           "ms, D2H %.2f ms, %u pieces\n",
                           dt, grow_calls, bs.h2d_ms, bs.kernel_ms, bs.d2h_ms, bs.pieces);
                free(job.dst);
            }
            if (ok && !bt.empty()) {
                row.batch_ok = "yes";
                row.batch_best_mbs = mbs(ref_len, *std::min_element(bt.begin(), bt.end()));
                row.batch_med_mbs = mbs(ref_len, median_of(bt));
                printf(
                    "gpu batch, 1 job (pageable in, dst NULL + realloc grow): best %.1f MB/s, median %.1f MB/s; "
                    "identical: yes\n",
                    row.batch_best_mbs, row.batch_med_mbs);
            }
            printf("RESULT\t%s\t%zu\tCPU engine (in-process, %ld threads)\t%.1f\t1 run\n", row.file.c_str(),
                   ref_len, ncpu, row.cpu_mbs);
            printf("RESULT\t%s\t%zu\tGPU device-resident (bench)\t%.1f\tbest of %d, median %.1f; identical: %s\n",
                   row.file.c_str(), ref_len, row.dev_best_mbs, reps, row.dev_med_mbs, row.dev_ok);
            printf("RESULT\t%s\t%zu\tGPU batch API, pageable host to host (bench)\t%.1f\tbest of %d, median %.1f; "
                   "identical: %s\n",
                   row.file.c_str(), ref_len, row.batch_best_mbs, reps, row.batch_med_mbs, row.batch_ok);
        }

        if (blocks1) {
            /* single-block latency: the first block's worth of output as one level-9 block */
            row.b1 = true;
            size_t k = one_block_prefix(ref, ref_len, 900000);
            uint8_t *one = nullptr;
            size_t one_len = 0;
            bz2_options o;
            memset(&o, 0, sizeof o);
            o.level = 9;
            if (k == 0 || bz2_compress(ref, k, &o, &one, &one_len, &e) != GC_OK) {
                fprintf(stderr, "%s: --blocks1: %s\n", path, k ? e.msg : "empty output");
                status = 1;
                row.b1_ok = "error";
            } else {
                row.b1_bytes = k;
                row.b1_stream = one_len;
                std::vector<double> ct;
                bool cok = true;
                for (int r = 0; r <= reps; r++) {
                    uint8_t *back = nullptr;
                    size_t back_len = 0;
                    t0 = now_s();
                    int rc = bz2_decompress(one, one_len, 0, 0, &back, &back_len, &e);
                    double dt = now_s() - t0;
                    if (rc != GC_OK || back_len != k || memcmp(back, ref, k) != 0) {
                        fprintf(stderr, "%s: --blocks1: the CPU engine does not give the block back: %s\n", path,
                                rc != GC_OK ? e.msg : "different bytes");
                        cok = false;
                    }
                    free(back);
                    if (!cok)
                        break;
                    if (r > 0)
                        ct.push_back(dt);
                }
                void *d_src = nullptr, *d_dst = nullptr;
                size_t cap = ((k >> 20) + 2) << 20;
                CK(cudaMalloc(&d_src, one_len));
                CK(cudaMalloc(&d_dst, cap));
                CK(cudaMemcpy(d_src, one, one_len, cudaMemcpyHostToDevice));
                std::vector<double> dtm;
                memset(&row.b1_st, 0, sizeof row.b1_st);
                std::string what = std::string(path) + " --blocks1";
                bool dok = run_device(ctx, what.c_str(), d_src, one_len, d_dst, cap, ref, k, reps, dtm, row.b1_st,
                                      nullptr, &status);
                cudaFree(d_dst);
                cudaFree(d_src);
                if (cok && !ct.empty()) {
                    row.b1_cpu_best = *std::min_element(ct.begin(), ct.end()) * 1e3;
                    row.b1_cpu_med = median_of(ct) * 1e3;
                } else {
                    status = 1;
                }
                if (dok && !dtm.empty()) {
                    row.b1_dev_best = *std::min_element(dtm.begin(), dtm.end()) * 1e3;
                    row.b1_dev_med = median_of(dtm) * 1e3;
                }
                row.b1_ok = cok && dok ? "yes" : "NO";
                printf(
                    "one block (%zu bytes of output, %zu-byte stream, %llu block(s) by the GPU): CPU engine best "
                    "%.3f ms, median %.3f; GPU device-resident best %.3f ms, median %.3f (scan %.3f, huffman "
                    "%.3f, walk %.3f, ibwt %.3f, rle1 %.3f); identical: %s\n",
                    k, one_len, (unsigned long long)row.b1_st.blocks, row.b1_cpu_best, row.b1_cpu_med,
                    row.b1_dev_best, row.b1_dev_med, row.b1_st.scan_ms, row.b1_st.huffman_ms, row.b1_st.walk_ms,
                    row.b1_st.ibwt_ms, row.b1_st.rle1_ms, row.b1_ok);
                printf("RESULT1\t%s\t%zu\t%.3f\t%.3f\t%.3f\t%.3f\t%s\n", row.file.c_str(), k, row.b1_cpu_best,
                       row.b1_cpu_med, row.b1_dev_best, row.b1_dev_med, row.b1_ok);
                free(one);
            }
        }
        free(ref);
        rows.push_back(row);
    }
    gc_gpu_close(ctx);

    bool any_full = false, any_b1 = false;
    for (const Row &r : rows) {
        any_full |= r.full;
        any_b1 |= r.b1;
    }
    if (any_b1) {
        printf(
            "\n### bzip2 decode, one block (single-block stream, bz2_compress -9): latency in ms, best / median "
            "of %d after a warm-up\n\n",
            reps);
        printf("| file | block output bytes | stream bytes | CPU engine ms | GPU resident ms | GPU stage ms "
               "(scan/huff/walk/ibwt/rle1) | identical |\n");
        printf("|---|---|---|---|---|---|---|\n");
        for (const Row &r : rows)
            if (r.b1)
                printf("| %s | %zu | %zu | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f / %.3f / %.3f / %.3f | %s |\n",
                       r.file.c_str(), r.b1_bytes, r.b1_stream, r.b1_cpu_best, r.b1_cpu_med, r.b1_dev_best,
                       r.b1_dev_med, r.b1_st.scan_ms, r.b1_st.huffman_ms, r.b1_st.walk_ms, r.b1_st.ibwt_ms,
                       r.b1_st.rle1_ms, r.b1_ok);
    }
    if (any_full) {
        printf("\n### bzip2 decode: MB/s of output (10^6 bytes/s); GPU best of %d after a warm-up; CPU engine %ld "
               "threads, 1 run; stages of the best device-resident run\n\n",
               reps, ncpu);
        printf("| file | output MB | CPU engine MB/s | GPU resident MB/s (best) | GPU batch MB/s | stage ms "
               "(scan/huff/walk/ibwt/rle1) | blocks | identical (resident / batch) |\n");
        printf("|---|---|---|---|---|---|---|---|\n");
        for (const Row &r : rows) {
            if (!r.full)
                continue;
            const gc_gpu_bzip2_dec_stages &s = r.st;
            printf(
                "| %s | %.1f | %.1f | %.1f | %.1f | %.1f / %.1f / %.1f / %.1f / %.1f | %llu (%llu candidates) | "
                "%s / %s |\n",
                r.file.c_str(), r.out_bytes / 1e6, r.cpu_mbs, r.dev_best_mbs, r.batch_best_mbs, s.scan_ms,
                s.huffman_ms, s.walk_ms, s.ibwt_ms, s.rle1_ms, (unsigned long long)s.blocks,
                (unsigned long long)s.candidates, r.dev_ok, r.batch_ok);
        }
    }
    return status;
}
