/*
 * bench_gpu_bzip2.cu - benchmark of the CUDA bzip2 encoder on corpus files
 * (scripts/gpu-bzip2-bench.sh makes the corpora and adds the CPU tools).
 *
 *   bench_gpu_bzip2 [--level N] [--reps N] [--piece MiB] [--job MiB] [--no-jobs-check] FILE...
 *   bench_gpu_bzip2 --gen zeros|period2|period7|record1k|fibonacci|random MiB OUT
 *
 * For each file (MB = 10^6 bytes of uncompressed input, best of --reps after
 * one warm-up run):
 *  1. device-resident: gc_gpu_bzip2_encode_device on input already in device
 *     memory (scratch for pieces of --piece MiB, default as much of the file as
 *     fits in device memory, in whole 32 MiB segments), with the encoder's
 *     per-stage times (ms, and GB/s of input per stage) from the best run;
 *  2. the batch API from pageable host memory: the file as one job, and the
 *     file cut into --job MiB (default 16) jobs in one batch;
 *  3. the CPU engine (bz2_compress, all threads), one run, for reference;
 *  4. ratio (input / stream) and byte identity: the device and one-job
 *     streams must be the CPU engine's, and each --job MiB job's stream the
 *     CPU engine's stream of that slice (computed after the timing;
 *     --no-jobs-check skips it). A failed check makes the exit status 1.
 * Prints "RESULT<TAB>file<TAB>bytes<TAB>tool<TAB>MB/s<TAB>stream bytes<TAB>identical"
 * lines for scripts, then Markdown tables (stages, then throughput) last.
 * --gen writes a deterministic adversarial corpus file of MiB MiB.
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

static const size_t SEG = (size_t)32 << 20; /* docs/BZIP2.md section 3 */

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

/* ---- --gen: deterministic adversarial corpora ----------------------------------- */

static int gen_corpus(const char *kind, size_t mib, const char *path)
{
    size_t n = mib << 20;
    std::vector<uint8_t> buf(n);
    uint8_t *p = buf.data();
    uint64_t s = 0x9E3779B97F4A7C15ull;
    auto rnd = [&s]() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    };
    if (!strcmp(kind, "zeros")) {
        memset(p, 0, n);
    } else if (!strcmp(kind, "period2") || !strcmp(kind, "period7")) {
        const char *u = kind[6] == '2' ? "ab" : "abcaefg"; /* no runs, last != first */
        size_t per = strlen(u);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)u[i % per];
    } else if (!strcmp(kind, "record1k")) {
        uint8_t rec[1024];
        for (size_t i = 0; i < sizeof rec; i++)
            rec[i] = (uint8_t)rnd();
        for (size_t i = 0; i < n; i++)
            p[i] = rec[i & 1023];
    } else if (!strcmp(kind, "fibonacci")) {
        std::vector<uint8_t> a(1, 'a'), b = { 'a', 'b' };
        while (b.size() < n) {
            std::vector<uint8_t> c;
            c.reserve(b.size() + a.size());
            c = b;
            c.insert(c.end(), a.begin(), a.end());
            a.swap(b);
            b.swap(c);
        }
        memcpy(p, b.data(), n);
    } else if (!strcmp(kind, "random")) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t v = rnd();
            memcpy(p + i, &v, 8);
        }
        for (; i < n; i++)
            p[i] = (uint8_t)rnd();
    } else {
        fprintf(stderr, "--gen: unknown kind %s (zeros|period2|period7|record1k|fibonacci|random)\n", kind);
        return 2;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "--gen: %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

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

struct Row {
    std::string file;
    size_t bytes = 0;
    double dev_mbs = 0, batch1_mbs = 0, batchj_mbs = 0, cpu_mbs = 0;
    size_t stream = 0, cpu_stream = 0;
    const char *dev_id = "-", *batch1_id = "-", *jobs_id = "-";
    gc_gpu_bzip2_stages st;
    size_t piece = 0;
};

static double mbs(size_t n, double s)
{
    return s > 0 ? n / s / 1e6 : 0;
}

static std::string stage_cell(double ms, size_t n)
{
    char b[64];
    snprintf(b, sizeof b, "%.2f (%.2f)", ms, ms > 0 ? n / ms / 1e6 : 0.0);
    return b;
}

/* ---- main ----------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int level = 9, reps = 3;
    size_t piece_mib = 0, job_mib = 16;
    bool jobs_check = true;
    std::vector<const char *> files;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gen") && i + 3 < argc) {
            return gen_corpus(argv[i + 1], (size_t)atol(argv[i + 2]), argv[i + 3]);
        } else if (!strcmp(argv[i], "--level") && i + 1 < argc) {
            level = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = std::max(1, atoi(argv[++i]));
        } else if (!strcmp(argv[i], "--piece") && i + 1 < argc) {
            piece_mib = (size_t)atol(argv[++i]);
        } else if (!strcmp(argv[i], "--job") && i + 1 < argc) {
            job_mib = std::max((size_t)1, (size_t)atol(argv[++i]));
        } else if (!strcmp(argv[i], "--no-jobs-check")) {
            jobs_check = false;
        } else if (argv[i][0] == '-') {
            fprintf(stderr,
                    "usage: %s [--level N] [--reps N] [--piece MiB] [--job MiB] [--no-jobs-check] FILE...\n"
                    "       %s --gen zeros|period2|period7|record1k|fibonacci|random MiB OUT\n",
                    argv[0], argv[0]);
            return 2;
        } else {
            files.push_back(argv[i]);
        }
    }
    if (level < 0 || level > 9 || files.empty()) {
        fprintf(stderr, "need FILE arguments and --level 1..9\n");
        return 2;
    }
    if (level == 0)
        level = 9;
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
    printf("level %d, best of %d runs after a warm-up, MB = 10^6 bytes of input; CPU engine: %ld threads, 1 run\n",
           level, reps, ncpu);
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
        row.bytes = n;
        printf("== %s: %zu bytes (%.1f MiB)\n", path, n, n / 1048576.0);

        /* CPU engine, all threads, one run: the reference stream */
        bz2_options o;
        memset(&o, 0, sizeof o);
        o.level = level;
        uint8_t *ref = nullptr;
        size_t ref_len = 0;
        double t0 = now_s();
        if (bz2_compress(src.data(), n, &o, &ref, &ref_len, &e) != GC_OK) {
            fprintf(stderr, "%s: bz2_compress: %s\n", path, e.msg);
            status = 1;
            continue;
        }
        double cpu_s = now_s() - t0;
        row.cpu_mbs = mbs(n, cpu_s);
        row.cpu_stream = ref_len;
        printf("cpu engine: %.1f MB/s (%.3f s), %zu bytes, ratio %.3f\n", row.cpu_mbs, cpu_s, ref_len,
               ref_len ? (double)n / ref_len : 0.0);

        /* 1. device-resident */
        size_t cap = gc_gpu_bzip2_encode_cap(n);
        void *d_src = nullptr, *d_dst = nullptr, *d_scr = nullptr;
        CK(cudaMalloc(&d_src, n ? n : 16));
        CK(cudaMalloc(&d_dst, cap));
        CK(cudaMemcpy(d_src, src.data(), n, cudaMemcpyHostToDevice));
        size_t free_b = 0, total_b = 0;
        CK(cudaMemGetInfo(&free_b, &total_b));
        size_t segs = std::max((size_t)1, (n + SEG - 1) / SEG);
        if (piece_mib)
            segs = std::max((size_t)1, (piece_mib << 20) / SEG);
        while (segs > 1 && gc_gpu_bzip2_scratch_size(segs * SEG) > free_b / 10 * 8)
            segs--;
        row.piece = segs * SEG;
        size_t scr = gc_gpu_bzip2_scratch_size(row.piece);
        if (cudaMalloc(&d_scr, scr) != cudaSuccess) {
            fprintf(stderr, "%s: cudaMalloc of %zu bytes of scratch failed (--piece smaller?)\n", path, scr);
            return 1;
        }
        double best = 1e30;
        size_t len = 0;
        int rc = GC_OK;
        for (int r = 0; r <= reps && rc == GC_OK; r++) {
            gc_gpu_bzip2_stages st;
            memset(&st, 0, sizeof st);
            t0 = now_s();
            rc = gc_gpu_bzip2_encode_device(ctx, d_src, n, level, d_dst, cap, &len, d_scr, scr, &st, &e);
            double dt = now_s() - t0;
            if (r > 0 && dt < best) { /* run 0 is the warm-up */
                best = dt;
                row.st = st;
            }
        }
        if (rc != GC_OK) {
            fprintf(stderr, "%s: gc_gpu_bzip2_encode_device: rc %d: %s\n", path, rc, e.msg);
            status = 1;
            row.dev_id = "error";
            if (rc == GC_E_DEVICE)
                return 1;
        } else {
            std::vector<uint8_t> out(len);
            CK(cudaMemcpy(out.data(), d_dst, len, cudaMemcpyDeviceToHost));
            bool same = len == ref_len && memcmp(out.data(), ref, len) == 0;
            row.dev_mbs = mbs(n, best);
            row.stream = len;
            row.dev_id = same ? "yes" : "NO";
            if (!same) {
                status = 1;
                printf("MISMATCH device: %zu bytes vs CPU %zu, first difference at byte %zu\n", len, ref_len,
                       first_diff(out.data(), len, ref, ref_len));
            }
            printf(
                "gpu device: %.1f MB/s (%.3f s), pieces of %zu MiB (scratch %.1f MiB), %llu blocks, %llu pieces; "
                "plan %.2f ms, bwt %.2f, mtf %.2f, tables %.2f, pack %.2f; identical: %s\n",
                row.dev_mbs, best, row.piece >> 20, scr / 1048576.0, (unsigned long long)row.st.blocks,
                (unsigned long long)row.st.pieces, row.st.plan_ms, row.st.bwt_ms, row.st.mtf_ms, row.st.tables_ms,
                row.st.pack_ms, row.dev_id);
        }
        cudaFree(d_scr);
        cudaFree(d_dst);
        cudaFree(d_src);

        /* 2a. batch API, one job from pageable host memory */
        std::vector<uint8_t> dst(cap);
        best = 1e30;
        gc_gpu_job job;
        for (int r = 0; r <= reps; r++) {
            memset(&job, 0, sizeof job);
            job.codec = GC_GPU_CODEC_BZIP2;
            job.op = GC_GPU_ENCODE;
            job.src = src.data();
            job.src_len = n;
            job.opt.bzip2.level = level;
            job.dst = dst.data();
            job.dst_cap = cap;
            t0 = now_s();
            rc = gc_gpu_run_batch(ctx, &job, 1, nullptr, &e);
            double dt = now_s() - t0;
            if (rc != GC_OK || job.status != GC_OK)
                break;
            if (r > 0 && dt < best)
                best = dt;
        }
        if (rc != GC_OK || job.status != GC_OK) {
            fprintf(stderr, "%s: batch (1 job): rc %d status %d: %s%s\n", path, rc, job.status, e.msg,
                    job.err.msg);
            status = 1;
            row.batch1_id = "error";
            if (rc == GC_E_DEVICE)
                return 1;
        } else {
            bool same = job.dst_len == ref_len && memcmp(dst.data(), ref, ref_len) == 0;
            row.batch1_mbs = mbs(n, best);
            row.batch1_id = same ? "yes" : "NO";
            if (!same) {
                status = 1;
                printf("MISMATCH batch 1 job: %zu bytes vs CPU %zu, first difference at byte %zu\n", job.dst_len,
                       ref_len, first_diff(dst.data(), job.dst_len, ref, ref_len));
            }
            printf("gpu batch, 1 job: %.1f MB/s (%.3f s); identical: %s\n", row.batch1_mbs, best, row.batch1_id);
        }
        free(ref);
        std::vector<uint8_t>().swap(dst);

        /* 2b. batch API, the file cut into job_mib jobs in one batch */
        size_t js = job_mib << 20, nj = std::max((size_t)1, (n + js - 1) / js), total_cap = 0;
        std::vector<size_t> off(nj + 1);
        for (size_t k = 0; k < nj; k++) {
            off[k] = total_cap;
            total_cap += gc_gpu_bzip2_encode_cap(std::min(js, n - std::min(n, k * js)));
        }
        std::vector<uint8_t> jdst(total_cap);
        std::vector<gc_gpu_job> jobs(nj);
        best = 1e30;
        bool jobs_ok = true;
        for (int r = 0; r <= reps && jobs_ok; r++) {
            for (size_t k = 0; k < nj; k++) {
                gc_gpu_job &j = jobs[k];
                memset(&j, 0, sizeof j);
                j.codec = GC_GPU_CODEC_BZIP2;
                j.op = GC_GPU_ENCODE;
                j.src = src.data() + std::min(n, k * js);
                j.src_len = std::min(js, n - std::min(n, k * js));
                j.opt.bzip2.level = level;
                j.dst = jdst.data() + off[k];
                j.dst_cap = gc_gpu_bzip2_encode_cap(j.src_len);
            }
            t0 = now_s();
            rc = gc_gpu_run_batch(ctx, jobs.data(), nj, nullptr, &e);
            double dt = now_s() - t0;
            jobs_ok = rc == GC_OK;
            for (size_t k = 0; k < nj && jobs_ok; k++)
                if (jobs[k].status != GC_OK) {
                    fprintf(stderr, "%s: batch job %zu: status %d: %s\n", path, k, jobs[k].status,
                            jobs[k].err.msg);
                    jobs_ok = false;
                }
            if (r > 0 && dt < best)
                best = dt;
        }
        if (!jobs_ok) {
            if (rc != GC_OK)
                fprintf(stderr, "%s: batch (%zu jobs): rc %d: %s\n", path, nj, rc, e.msg);
            status = 1;
            row.jobs_id = "error";
            if (rc == GC_E_DEVICE)
                return 1;
        } else {
            row.batchj_mbs = mbs(n, best);
            row.jobs_id = "not checked";
            if (jobs_check) {
                bool all = true;
                for (size_t k = 0; k < nj; k++) {
                    uint8_t *r2 = nullptr;
                    size_t l2 = 0;
                    if (bz2_compress(jobs[k].src, jobs[k].src_len, &o, &r2, &l2, &e) != GC_OK) {
                        fprintf(stderr, "%s: bz2_compress of job %zu: %s\n", path, k, e.msg);
                        all = false;
                        break;
                    }
                    if (l2 != jobs[k].dst_len || memcmp(r2, jobs[k].dst, l2) != 0) {
                        printf("MISMATCH batch job %zu: %zu bytes vs CPU %zu, first difference at byte %zu\n", k,
                               jobs[k].dst_len, l2, first_diff(jobs[k].dst, jobs[k].dst_len, r2, l2));
                        all = false;
                    }
                    free(r2);
                }
                row.jobs_id = all ? "yes" : "NO";
                if (!all)
                    status = 1;
            }
            printf("gpu batch, %zu jobs of %zu MiB: %.1f MB/s (%.3f s); identical: %s\n", nj, job_mib,
                   row.batchj_mbs, best, row.jobs_id);
        }
        printf("RESULT\t%s\t%zu\tgpu device\t%.1f\t%zu\t%s\n", row.file.c_str(), n, row.dev_mbs, row.stream,
               row.dev_id);
        printf("RESULT\t%s\t%zu\tgpu batch 1 job\t%.1f\t%zu\t%s\n", row.file.c_str(), n, row.batch1_mbs,
               row.cpu_stream, row.batch1_id);
        printf("RESULT\t%s\t%zu\tgpu batch %zu MiB jobs\t%.1f\t-\t%s\n", row.file.c_str(), n, job_mib,
               row.batchj_mbs, row.jobs_id);
        printf("RESULT\t%s\t%zu\tcpu engine %ld threads\t%.1f\t%zu\t-\n", row.file.c_str(), n, ncpu, row.cpu_mbs,
               row.cpu_stream);
        rows.push_back(row);
    }
    gc_gpu_close(ctx);

    printf("\n### bzip2 GPU encoder stages (level %d, device-resident, best run): ms (GB/s of input)\n\n", level);
    printf("| file | MiB | piece MiB | blocks | pieces | plan | bwt | mtf | tables | pack | total |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Row &r : rows) {
        const gc_gpu_bzip2_stages &s = r.st;
        double tot = s.plan_ms + s.bwt_ms + s.mtf_ms + s.tables_ms + s.pack_ms;
        printf("| %s | %.1f | %zu | %llu | %llu | %s | %s | %s | %s | %s | %s |\n", r.file.c_str(),
               r.bytes / 1048576.0, r.piece >> 20, (unsigned long long)s.blocks, (unsigned long long)s.pieces,
               stage_cell(s.plan_ms, r.bytes).c_str(), stage_cell(s.bwt_ms, r.bytes).c_str(),
               stage_cell(s.mtf_ms, r.bytes).c_str(), stage_cell(s.tables_ms, r.bytes).c_str(),
               stage_cell(s.pack_ms, r.bytes).c_str(), stage_cell(tot, r.bytes).c_str());
    }
    printf("\n### bzip2 compression, level %d: MB/s (10^6 input bytes per second); identical = byte-identical to "
           "the CPU engine\n\n",
           level);
    printf("| file | MiB | GPU device-resident | GPU batch, 1 job | GPU batch, %zu MiB jobs | CPU engine (%ld "
           "threads) "
           "| ratio | identical (device / 1 job / jobs) |\n",
           job_mib, ncpu);
    printf("|---|---|---|---|---|---|---|---|\n");
    for (const Row &r : rows)
        printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %s / %s / %s |\n", r.file.c_str(),
               r.bytes / 1048576.0, r.dev_mbs, r.batch1_mbs, r.batchj_mbs, r.cpu_mbs,
               r.cpu_stream ? (double)r.bytes / r.cpu_stream : 0.0, r.dev_id, r.batch1_id, r.jobs_id);
    return status;
}
