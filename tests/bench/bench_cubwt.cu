/*
 * bench_cubwt.cu - libcubwt (github.com/IlyaGrebnov/libcubwt, a CUDA BWT
 * library) on one file: a GPU competitor row of the benchmark harness.
 * Built by scripts/build-competitors.sh against libcubwt compiled
 * from its own source (kept in an ignored folder, never in this repository).
 *
 *   bench_cubwt FILE [--max BYTES] [--block BYTES] [--reps N] [--no-check]
 *
 *   --max    cap for the whole-input run (default: the whole file, cut to the
 *            largest length libcubwt accepts and the device can hold, about
 *            20.5 bytes of GPU memory per input byte; halved until it fits)
 *   --block  block size of the blocked run (default 900000: bzip2 -9's)
 *   --reps   timed runs after one warm-up (default 3); the median is printed
 *   --no-check  skip the CPU verification (below)
 *
 * What is timed: libcubwt_bwt(storage, T, L, n), its public API, which takes
 * host pointers: it copies T to the device, builds the suffix-array BWT there
 * and copies L back, synchronising. T and L are pinned host buffers, so the
 * two PCIe copies (2n bytes at ~50 GB/s) are inside the time; xfer_ms says
 * what a pinned H2D + D2H of the same bytes costs alone (measured apart), so
 * the kernel-only rate can be judged. Device storage is allocated once
 * (outside the time). (a) whole: one call on the first min(file, cap) bytes;
 * (b) blocks: one call per BLOCK-byte block of the same bytes, in order (a
 * tail under 16 bytes, libcubwt's minimum, is left out of both the bytes and
 * the time). MB/s = 10^6 input bytes per second of wall time (steady clock).
 *
 * Verification (outside the time, after the last timed run): libcubwt's BWT is
 * the suffix-sorted one with an implicit smallest sentinel (like libsais): L
 * is B[0..n] without B[idx], where B is the BWT of T$ and idx the primary
 * index. The whole output and every block are inverted on the CPU (LF
 * mapping) and compared byte for byte with the input; a mismatch prints FAIL
 * and no rate. This checks the primary index too.
 *
 * Output (stdout): a '#' header line, then one line:
 *   cubwt whole_MBps=X blocks900k_MBps=Y whole_bytes=N block=900000 blocks=K
 *         blocks_bytes=M xfer_ms=T reps=3 ok
 * or, on a failure, "cubwt FAIL stage=S error=E" (exit 2). Exit 1: usage or
 * setup error (no file, no device). Every CUDA and libcubwt call is checked.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "libcubwt.cuh"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("cubwt FAIL stage=%s error=%s\n", #call, cudaGetErrorName(e_));                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static const char *cubwt_err(int64_t r)
{
    switch (r) {
    case LIBCUBWT_BAD_PARAMETER: return "LIBCUBWT_BAD_PARAMETER";
    case LIBCUBWT_NOT_ENOUGH_MEMORY: return "LIBCUBWT_NOT_ENOUGH_MEMORY";
    case LIBCUBWT_GPU_ERROR: return "LIBCUBWT_GPU_ERROR";
    case LIBCUBWT_GPU_NOT_SUPPORTED: return "LIBCUBWT_GPU_NOT_SUPPORTED";
    case LIBCUBWT_GPU_NOT_ENOUGH_MEMORY: return "LIBCUBWT_GPU_NOT_ENOUGH_MEMORY";
    default: return "unknown";
    }
}

static void fail(const char *stage, const char *error)
{
    printf("cubwt FAIL stage=%s error=%s\n", stage, error);
    exit(2);
}

static double now_s(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Inverts libcubwt's (L, idx) of length n on the CPU into out (LF mapping over
 * B = L with the sentinel put back at idx). lf: scratch of n + 1 entries.
 * Returns false when idx is out of range. */
static bool cpu_unbwt(const uint8_t *L, int64_t n, int64_t idx, uint8_t *out, std::vector<uint32_t> &lf)
{
    if (idx < 1 || idx > n)
        return false;
    lf.resize((size_t)n + 1);
    uint64_t count[256] = { 0 };
    for (int64_t i = 0; i < n; i++)
        count[L[i]]++;
    uint64_t start[256];
    uint64_t acc = 1; /* row 0 of the sorted rotations begins with the sentinel */
    for (int c = 0; c < 256; c++) {
        start[c] = acc;
        acc += count[c];
    }
    /* B[j] = L[j] for j < idx, sentinel at idx, L[j - 1] after it; LF(idx) = 0 */
    for (int64_t j = 0; j <= n; j++) {
        if (j == idx) {
            lf[(size_t)j] = 0;
            continue;
        }
        uint8_t c = L[j < idx ? j : j - 1];
        lf[(size_t)j] = (uint32_t)start[c]++;
    }
    /* row 0 is "$T": its last symbol B[0] is T[n-1]; walk backwards */
    int64_t row = 0;
    for (int64_t k = n - 1; k >= 0; k--) {
        if (row == idx)
            return false; /* met the sentinel too early: not a valid BWT */
        out[k] = L[row < idx ? row : row - 1];
        row = lf[(size_t)row];
    }
    return row == idx;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_cubwt FILE [--max BYTES] [--block BYTES] [--reps N] [--no-check]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int64_t cap = INT64_MAX, block = 900000;
    int reps = 3;
    bool check = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max") && i + 1 < argc)
            cap = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--block") && i + 1 < argc)
            block = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-check"))
            check = false;
        else if (argv[i][0] == '-' || path)
            usage();
        else
            path = argv[i];
    }
    if (!path || cap < 16 || block < 16 || reps < 1)
        usage();

    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    int64_t fsz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (fsz < 16) {
        fprintf(stderr, "%s: under 16 bytes\n", path);
        return 1;
    }
    /* libcubwt's own limit: its expanded length must stay under INT32_MAX */
    int64_t n = std::min(fsz, std::min(cap, (int64_t)INT32_MAX / 3 * 2 - 4096));

    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));

    uint8_t *T = NULL, *L = NULL;
    CK(cudaHostAlloc((void **)&T, (size_t)n, cudaHostAllocDefault));
    CK(cudaHostAlloc((void **)&L, (size_t)n, cudaHostAllocDefault));
    if (fread(T, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: short read\n", path);
        return 1;
    }
    fclose(f);

    /* whole-input storage: halve the length until libcubwt can allocate it */
    void *storage = NULL;
    int64_t r;
    while ((r = libcubwt_allocate_device_storage(&storage, n)) != LIBCUBWT_NO_ERROR) {
        if ((r != LIBCUBWT_GPU_NOT_ENOUGH_MEMORY && r != LIBCUBWT_NOT_ENOUGH_MEMORY &&
             r != LIBCUBWT_BAD_PARAMETER) ||
            n / 2 < 16)
            fail("libcubwt_allocate_device_storage", cubwt_err(r));
        (void)cudaGetLastError(); /* clear a failed allocation's sticky-free error */
        n /= 2;
    }
    printf("# bench_cubwt gpu=\"%s\" sm=%d%d libcubwt=%s file=%s file_bytes=%lld whole_bytes=%lld block=%lld "
           "reps=%d\n",
           prop.name, prop.major, prop.minor, LIBCUBWT_VERSION_STRING, path, (long long)fsz, (long long)n,
           (long long)block, reps);
    fflush(stdout);

    /* (a) whole input */
    std::vector<double> tw;
    int64_t idx_whole = 0;
    for (int i = 0; i <= reps; i++) {
        double t0 = now_s();
        r = libcubwt_bwt(storage, T, L, n);
        double t1 = now_s();
        if (r < 0)
            fail("libcubwt_bwt whole", cubwt_err(r));
        idx_whole = r;
        if (i > 0)
            tw.push_back(t1 - t0);
    }
    std::vector<uint32_t> lf;
    std::vector<uint8_t> back;
    if (check) {
        back.resize((size_t)n);
        if (!cpu_unbwt(L, n, idx_whole, back.data(), lf) || memcmp(back.data(), T, (size_t)n) != 0)
            fail("verify whole", "cpu_inverse_differs");
    }
    r = libcubwt_free_device_storage(storage);
    if (r != LIBCUBWT_NO_ERROR)
        fail("libcubwt_free_device_storage", cubwt_err(r));

    /* pinned H2D + D2H of n bytes alone (what the whole run's time includes) */
    uint8_t *d = NULL;
    CK(cudaMalloc((void **)&d, (size_t)n));
    std::vector<double> tx;
    for (int i = 0; i <= reps; i++) {
        double t0 = now_s();
        CK(cudaMemcpy(d, T, (size_t)n, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(L, d, (size_t)n, cudaMemcpyDeviceToHost));
        double t1 = now_s();
        if (i > 0)
            tx.push_back(t1 - t0);
    }
    CK(cudaFree(d));

    /* (b) blocks of the same bytes */
    int64_t bsz = std::min(block, n);
    r = libcubwt_allocate_device_storage(&storage, bsz);
    if (r != LIBCUBWT_NO_ERROR)
        fail("libcubwt_allocate_device_storage block", cubwt_err(r));
    int64_t nblocks = 0, bbytes = 0;
    std::vector<int64_t> idx((size_t)(n / bsz + 1));
    std::vector<double> tb;
    for (int i = 0; i <= reps; i++) {
        nblocks = 0;
        bbytes = 0;
        double t0 = now_s();
        for (int64_t off = 0; off < n; off += bsz) {
            int64_t len = std::min(bsz, n - off);
            if (len < 16)
                break;
            r = libcubwt_bwt(storage, T + off, L + off, len);
            if (r < 0)
                fail("libcubwt_bwt block", cubwt_err(r));
            idx[(size_t)nblocks++] = r;
            bbytes += len;
        }
        double t1 = now_s();
        if (i > 0)
            tb.push_back(t1 - t0);
    }
    r = libcubwt_free_device_storage(storage);
    if (r != LIBCUBWT_NO_ERROR)
        fail("libcubwt_free_device_storage block", cubwt_err(r));
    if (check) {
        std::vector<uint8_t> bb((size_t)bsz);
        for (int64_t b = 0; b < nblocks; b++) {
            int64_t off = b * bsz, len = std::min(bsz, n - off);
            if (!cpu_unbwt(L + off, len, idx[(size_t)b], bb.data(), lf) ||
                memcmp(bb.data(), T + off, (size_t)len) != 0) {
                char e[64];
                snprintf(e, sizeof e, "cpu_inverse_differs_block_%lld", (long long)b);
                fail("verify blocks", e);
            }
        }
    }
    CK(cudaFreeHost(T));
    CK(cudaFreeHost(L));

    printf("cubwt whole_MBps=%.1f blocks900k_MBps=%.1f whole_bytes=%lld block=%lld blocks=%lld blocks_bytes=%lld "
           "xfer_ms=%.2f reps=%d %s\n",
           n / median(tw) / 1e6, bbytes / median(tb) / 1e6, (long long)n, (long long)bsz, (long long)nblocks,
           (long long)bbytes, median(tx) * 1e3, reps, check ? "ok" : "unchecked");
    return 0;
}
