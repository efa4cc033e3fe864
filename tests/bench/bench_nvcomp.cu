/*
 * bench_nvcomp.cu - NVIDIA nvCOMP 6.0 (batched C API) on one file: the GPU
 * competitor rows of the benchmark harness.
 *
 *   bench_nvcomp FILE [--chunk BYTES] [--algos a,b,...] [--type u8|i32|f32] [--iters N]
 *
 *   --chunk  chunk size in bytes (default 1048576); a multiple of the type's size
 *   --algos  any of cascaded,ans,bitcomp,lz4,zstd,deflate,gdeflate (default: all)
 *   --type   data type given to Cascaded and Bitcomp (default u8); the other
 *            algorithms always get their byte-oriented defaults. With i32/f32 the
 *            input is cut to a multiple of 4 bytes (bytes= says what was used).
 *            Cascaded takes integers only: f32 is passed to it as UINT (its bits).
 *   --iters  timed runs per direction, after one warm-up (default 5); the median
 *
 * The file is read into host memory and copied to the device once, one chunk
 * per 256-byte-aligned slot (so every algorithm's alignment holds). For each
 * algorithm: compress all chunks with one batched call, decompress them with
 * one batched call, each timed with CUDA events around the call alone, median
 * of --iters runs. Every run's per-chunk statuses are checked, every
 * decompression is compared byte for byte with the input on the device (the
 * output is cleared before each run) and its sizes with the chunk sizes.
 *
 * Output (stdout), a header line and one line per algorithm:
 *   # bench_nvcomp gpu="NVIDIA H100 80GB HBM3" sm=90 nvcomp=6.0.0 ... file=F bytes=N chunks=K
 *   nvcomp ALGO type=u8 nvtype=UCHAR chunk=1048576 bytes=N comp_GBps=X decomp_GBps=Y ratio=Z ok
 *   nvcomp ALGO type=f32 nvtype=FLOAT32 chunk=1048576 bytes=N FAIL stage=S error=E
 * GB = 10^9 bytes; both directions count the uncompressed size; ratio =
 * bytes / sum of compressed chunk sizes. Exit status 0 when every row is ok,
 * 2 when some algorithm failed, 1 on a usage or setup error.
 * One batch must fill the GPU: with 1 MiB chunks use about 1 GiB of input (64 MiB,
 * 64 chunks, measures several times slower). The device needs about 3x the input
 * plus nvCOMP's temporary space.
 */
#include <cuda_runtime.h>
#include <nvcomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

/* Setup errors (before any algorithm runs): fatal. */
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Inside an algorithm's run: a failure ends that algorithm's row, not the program. */
struct Fail {
    std::string stage, error;
};

#define TRY_CUDA(stage, call)                          \
    do {                                               \
        cudaError_t e_ = (call);                       \
        if (e_ != cudaSuccess)                         \
            throw Fail{ stage, cudaGetErrorName(e_) }; \
    } while (0)

#define TRY_NV(stage, call)                          \
    do {                                             \
        nvcompStatus_t s_ = (call);                  \
        if (s_ != nvcompSuccess)                     \
            throw Fail{ stage, nv_status_name(s_) }; \
    } while (0)

static std::string nv_status_name(nvcompStatus_t s)
{
    switch (s) {
    case nvcompSuccess: return "nvcompSuccess";
    case nvcompErrorInvalidValue: return "nvcompErrorInvalidValue";
    case nvcompErrorNotSupported: return "nvcompErrorNotSupported";
    case nvcompErrorCannotDecompress: return "nvcompErrorCannotDecompress";
    case nvcompErrorBadChecksum: return "nvcompErrorBadChecksum";
    case nvcompErrorCannotVerifyChecksums: return "nvcompErrorCannotVerifyChecksums";
    case nvcompErrorOutputBufferTooSmall: return "nvcompErrorOutputBufferTooSmall";
    case nvcompErrorWrongHeaderLength: return "nvcompErrorWrongHeaderLength";
    case nvcompErrorAlignment: return "nvcompErrorAlignment";
    case nvcompErrorChunkSizeTooLarge: return "nvcompErrorChunkSizeTooLarge";
    case nvcompErrorCannotCompress: return "nvcompErrorCannotCompress";
    case nvcompErrorWrongInputLength: return "nvcompErrorWrongInputLength";
    case nvcompErrorBatchSizeTooLarge: return "nvcompErrorBatchSizeTooLarge";
    case nvcompErrorSubChunkCountTooLarge: return "nvcompErrorSubChunkCountTooLarge";
    case nvcompErrorSubChunkCountTooSmall: return "nvcompErrorSubChunkCountTooSmall";
    case nvcompErrorOutputBufferAlignmentTooSmall: return "nvcompErrorOutputBufferAlignmentTooSmall";
    case nvcompErrorCudaError: return "nvcompErrorCudaError";
    case nvcompErrorInternal: return "nvcompErrorInternal";
    }
    return "nvcompStatus" + std::to_string((int)s);
}

static const char *nv_type_name(nvcompType_t t)
{
    switch (t) {
    case NVCOMP_TYPE_CHAR: return "CHAR";
    case NVCOMP_TYPE_UCHAR: return "UCHAR";
    case NVCOMP_TYPE_INT: return "INT";
    case NVCOMP_TYPE_UINT: return "UINT";
    case NVCOMP_TYPE_FLOAT32: return "FLOAT32";
    default: return "OTHER";
    }
}

/* A device allocation freed when its scope ends (also when a Fail is thrown). */
struct DevBuf {
    void *p = nullptr;
    DevBuf() = default;
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    ~DevBuf()
    {
        if (p)
            cudaFree(p);
    }
    void alloc(const char *stage, size_t n)
    {
        TRY_CUDA(stage, cudaMalloc(&p, n ? n : 1));
    }
    template <class T>
    T *as() const
    {
        return static_cast<T *>(p);
    }
};

struct Events {
    cudaEvent_t a = nullptr, b = nullptr;
    Events()
    {
        TRY_CUDA("event", cudaEventCreate(&a));
        TRY_CUDA("event", cudaEventCreate(&b));
    }
    ~Events()
    {
        if (a)
            cudaEventDestroy(a);
        if (b)
            cudaEventDestroy(b);
    }
};

/* Counts the differing bytes of chunk y: a (slot stride sa) vs b (slot stride sb). */
__global__ void cmp_chunks_kernel(const uint8_t *a, size_t sa, const uint8_t *b, size_t sb, const size_t *sizes,
                                  unsigned long long *bad)
{
    const size_t c = blockIdx.y;
    const size_t n = sizes[c];
    const uint8_t *x = a + c * sa, *y = b + c * sb;
    unsigned long long local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        local += x[i] != y[i];
    if (local)
        atomicAdd(bad, local);
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

/* What every run shares: the input on the device, laid out one chunk per slot. */
struct Ctx {
    size_t bytes = 0, chunk = 0, nchunks = 0, in_stride = 0;
    int iters = 5;
    cudaStream_t st = nullptr;
    uint8_t *d_in = nullptr; /* nchunks slots of in_stride bytes */
    const void **d_in_ptrs = nullptr;
    size_t *d_in_sizes = nullptr;
    std::vector<size_t> h_sizes;
};

/* The batched API of one algorithm: every 6.0 algorithm has the same shape. */
template <class C, class D>
struct Api {
    nvcompStatus_t (*align_c)(C, nvcompAlignmentRequirements_t *);
    nvcompStatus_t (*align_d)(D, nvcompAlignmentRequirements_t *);
    nvcompStatus_t (*temp_c)(size_t, size_t, C, size_t *, size_t, cudaStream_t);
    nvcompStatus_t (*max_out)(size_t, C, size_t *);
    nvcompStatus_t (*comp)(const void *const *, const size_t *, size_t, size_t, void *, size_t, void *const *,
                           size_t *, C, nvcompStatus_t *, cudaStream_t);
    nvcompStatus_t (*temp_d)(size_t, size_t, D, size_t *, size_t, cudaStream_t);
    nvcompStatus_t (*decomp)(const void *const *, const size_t *, const size_t *, size_t *, size_t, void *, size_t,
                             void *const *, D, nvcompStatus_t *, cudaStream_t);
};

#define NV_API(X)                                                                                           \
    Api<nvcompBatched##X##CompressOpts_t, nvcompBatched##X##DecompressOpts_t>                               \
    {                                                                                                       \
        nvcompBatched##X##CompressGetRequiredAlignments, nvcompBatched##X##DecompressGetRequiredAlignments, \
            nvcompBatched##X##CompressGetTempSize, nvcompBatched##X##CompressGetMaxOutputChunkSize,         \
            nvcompBatched##X##CompressAsync, nvcompBatched##X##DecompressGetTempSize,                       \
            nvcompBatched##X##DecompressAsync                                                               \
    }

struct Result {
    double comp_ms = 0, decomp_ms = 0;
    size_t comp_bytes = 0;
};

static void check_statuses(const char *stage, const nvcompStatus_t *d_st, size_t n, cudaStream_t st)
{
    std::vector<nvcompStatus_t> h(n);
    TRY_CUDA(stage, cudaMemcpyAsync(h.data(), d_st, n * sizeof(nvcompStatus_t), cudaMemcpyDeviceToHost, st));
    TRY_CUDA(stage, cudaStreamSynchronize(st));
    for (size_t i = 0; i < n; i++)
        if (h[i] != nvcompSuccess)
            throw Fail{ stage, nv_status_name(h[i]) + "@chunk" + std::to_string(i) };
}

template <class C, class D>
static Result run_algo(const Api<C, D> &api, const C &copts, const D &dopts, Ctx &x)
{
    const size_t n = x.nchunks;
    cudaStream_t st = x.st;

    nvcompAlignmentRequirements_t ac{}, ad{};
    TRY_NV("align", api.align_c(copts, &ac));
    TRY_NV("align", api.align_d(dopts, &ad));
    const size_t amax = std::max({ ac.input, ac.output, ac.temp, ad.input, ad.output, ad.temp, (size_t)1 });
    if (amax > 256 || x.in_stride % amax)
        throw Fail{ "align", "alignment" + std::to_string(amax) + "_unsupported" };

    size_t max_out = 0, temp_c = 0, temp_d = 0;
    TRY_NV("max_out", api.max_out(x.chunk, copts, &max_out));
    TRY_NV("temp_compress", api.temp_c(n, x.chunk, copts, &temp_c, x.bytes, st));
    TRY_NV("temp_decompress", api.temp_d(n, x.chunk, dopts, &temp_d, x.bytes, st));
    const size_t out_stride = round_up(std::max(max_out, (size_t)1), 256);

    DevBuf comp, comp_ptrs, comp_sizes, out, out_ptrs, out_sizes, tc, td, stats, bad;
    comp.alloc("alloc", n * out_stride);
    comp_ptrs.alloc("alloc", n * sizeof(void *));
    comp_sizes.alloc("alloc", n * sizeof(size_t));
    out.alloc("alloc", n * x.in_stride);
    out_ptrs.alloc("alloc", n * sizeof(void *));
    out_sizes.alloc("alloc", n * sizeof(size_t));
    tc.alloc("alloc", temp_c);
    td.alloc("alloc", temp_d);
    stats.alloc("alloc", n * sizeof(nvcompStatus_t));
    bad.alloc("alloc", sizeof(unsigned long long));

    std::vector<void *> h_ptrs(n);
    for (size_t i = 0; i < n; i++)
        h_ptrs[i] = comp.as<uint8_t>() + i * out_stride;
    TRY_CUDA("setup", cudaMemcpy(comp_ptrs.p, h_ptrs.data(), n * sizeof(void *), cudaMemcpyHostToDevice));
    for (size_t i = 0; i < n; i++)
        h_ptrs[i] = out.as<uint8_t>() + i * x.in_stride;
    TRY_CUDA("setup", cudaMemcpy(out_ptrs.p, h_ptrs.data(), n * sizeof(void *), cudaMemcpyHostToDevice));

    Events ev;
    Result r;
    std::vector<double> tcomp, tdecomp;
    std::vector<size_t> h_csizes(n), h_dsizes(n);
    const dim3 cmp_grid((unsigned)std::min<size_t>((x.chunk + 4095) / 4096, 256), (unsigned)n);

    for (int it = 0; it <= x.iters; it++) { /* run 0 is the warm-up */
        /* compress */
        TRY_CUDA("compress", cudaMemsetAsync(stats.p, 0xff, n * sizeof(nvcompStatus_t), st));
        TRY_CUDA("compress", cudaEventRecord(ev.a, st));
        TRY_NV("compress", api.comp((const void *const *)x.d_in_ptrs, x.d_in_sizes, x.chunk, n, tc.p, temp_c,
                                    comp_ptrs.as<void *const>(), comp_sizes.as<size_t>(), copts,
                                    stats.as<nvcompStatus_t>(), st));
        TRY_CUDA("compress", cudaEventRecord(ev.b, st));
        TRY_CUDA("compress", cudaEventSynchronize(ev.b));
        TRY_CUDA("compress", cudaGetLastError());
        float ms = 0;
        TRY_CUDA("compress", cudaEventElapsedTime(&ms, ev.a, ev.b));
        check_statuses("compress", stats.as<nvcompStatus_t>(), n, st);
        TRY_CUDA("compress",
                 cudaMemcpy(h_csizes.data(), comp_sizes.p, n * sizeof(size_t), cudaMemcpyDeviceToHost));
        size_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            if (h_csizes[i] == 0 || h_csizes[i] > max_out)
                throw Fail{ "compress", "bad_size" + std::to_string(h_csizes[i]) + "@chunk" + std::to_string(i) };
            sum += h_csizes[i];
        }
        r.comp_bytes = sum;
        if (it > 0)
            tcomp.push_back(ms);

        /* decompress into a cleared output */
        TRY_CUDA("decompress", cudaMemsetAsync(out.p, 0xa5, n * x.in_stride, st));
        TRY_CUDA("decompress", cudaMemsetAsync(out_sizes.p, 0, n * sizeof(size_t), st));
        TRY_CUDA("decompress", cudaMemsetAsync(stats.p, 0xff, n * sizeof(nvcompStatus_t), st));
        TRY_CUDA("decompress", cudaEventRecord(ev.a, st));
        TRY_NV("decompress", api.decomp(comp_ptrs.as<const void *const>(), comp_sizes.as<size_t>(), x.d_in_sizes,
                                        out_sizes.as<size_t>(), n, td.p, temp_d, out_ptrs.as<void *const>(), dopts,
                                        stats.as<nvcompStatus_t>(), st));
        TRY_CUDA("decompress", cudaEventRecord(ev.b, st));
        TRY_CUDA("decompress", cudaEventSynchronize(ev.b));
        TRY_CUDA("decompress", cudaGetLastError());
        TRY_CUDA("decompress", cudaEventElapsedTime(&ms, ev.a, ev.b));
        check_statuses("decompress", stats.as<nvcompStatus_t>(), n, st);
        TRY_CUDA("verify", cudaMemcpy(h_dsizes.data(), out_sizes.p, n * sizeof(size_t), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
            if (h_dsizes[i] != x.h_sizes[i])
                throw Fail{ "verify", "size" + std::to_string(h_dsizes[i]) + "!=" + std::to_string(x.h_sizes[i]) +
                                          "@chunk" + std::to_string(i) };
        TRY_CUDA("verify", cudaMemsetAsync(bad.p, 0, sizeof(unsigned long long), st));
        cmp_chunks_kernel<<<cmp_grid, 256, 0, st>>>(x.d_in, x.in_stride, out.as<uint8_t>(), x.in_stride,
                                                    x.d_in_sizes, bad.as<unsigned long long>());
        TRY_CUDA("verify", cudaGetLastError());
        unsigned long long h_bad = 0;
        TRY_CUDA("verify", cudaMemcpyAsync(&h_bad, bad.p, sizeof h_bad, cudaMemcpyDeviceToHost, st));
        TRY_CUDA("verify", cudaStreamSynchronize(st));
        if (h_bad)
            throw Fail{ "verify", std::to_string(h_bad) + "_bytes_differ" };
        if (it > 0)
            tdecomp.push_back(ms);
    }
    r.comp_ms = median(tcomp);
    r.decomp_ms = median(tdecomp);
    return r;
}

static const char *const kAllAlgos[] = { "cascaded", "ans", "bitcomp", "lz4", "zstd", "deflate", "gdeflate" };

static void usage()
{
    fprintf(stderr,
            "usage: bench_nvcomp FILE [--chunk BYTES] [--algos cascaded,ans,bitcomp,lz4,zstd,deflate,gdeflate]\n"
            "                    [--type u8|i32|f32] [--iters N]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    const char *path = nullptr;
    size_t chunk = 1 << 20;
    std::string algos_arg = "cascaded,ans,bitcomp,lz4,zstd,deflate,gdeflate";
    std::string type = "u8";
    int iters = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            chunk = strtoull(argv[++i], nullptr, 0);
        else if (!strcmp(argv[i], "--algos") && i + 1 < argc)
            algos_arg = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            type = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (argv[i][0] == '-' || path)
            usage();
        else
            path = argv[i];
    }
    if (!path || iters < 1)
        usage();

    nvcompType_t nvtype, cascaded_type;
    size_t elem;
    if (type == "u8") {
        nvtype = cascaded_type = NVCOMP_TYPE_UCHAR;
        elem = 1;
    } else if (type == "i32") {
        nvtype = cascaded_type = NVCOMP_TYPE_INT;
        elem = 4;
    } else if (type == "f32") {
        nvtype = NVCOMP_TYPE_FLOAT32;
        cascaded_type = NVCOMP_TYPE_UINT; /* Cascaded takes integer types only: the float's bits */
        elem = 4;
    } else {
        fprintf(stderr, "bench_nvcomp: --type must be u8, i32 or f32\n");
        return 1;
    }
    if (chunk == 0 || chunk % elem) {
        fprintf(stderr, "bench_nvcomp: --chunk must be a positive multiple of %zu\n", elem);
        return 1;
    }
    std::vector<std::string> algos;
    for (size_t p = 0; p <= algos_arg.size();) {
        size_t q = algos_arg.find(',', p);
        if (q == std::string::npos)
            q = algos_arg.size();
        std::string a = algos_arg.substr(p, q - p);
        if (!a.empty()) {
            bool known = false;
            for (const char *k : kAllAlgos)
                known |= a == k;
            if (!known) {
                fprintf(stderr, "bench_nvcomp: unknown algorithm '%s'\n", a.c_str());
                return 1;
            }
            algos.push_back(a);
        }
        p = q + 1;
    }

    /* the file */
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    std::vector<uint8_t> host;
    {
        uint8_t buf[1 << 16];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0)
            host.insert(host.end(), buf, buf + got);
        if (ferror(f)) {
            perror(path);
            return 1;
        }
        fclose(f);
    }
    const size_t bytes = host.size() / elem * elem;
    if (bytes == 0) {
        fprintf(stderr, "bench_nvcomp: %s: empty (or shorter than one element)\n", path);
        return 1;
    }

    /* the device */
    int dev = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    nvcompProperties_t np{};
    std::string nvver = std::to_string(NVCOMP_VER_MAJOR) + "." + std::to_string(NVCOMP_VER_MINOR) + "." +
                        std::to_string(NVCOMP_VER_PATCH) + "(headers)";
    if (nvcompGetProperties(&np) == nvcompSuccess)
        nvver = std::to_string(NVCOMP_MAJOR_FROM_SEMVER(np.version)) + "." +
                std::to_string(NVCOMP_MINOR_FROM_SEMVER(np.version)) + "." +
                std::to_string(NVCOMP_PATCH_FROM_SEMVER(np.version));

    Ctx x;
    x.bytes = bytes;
    x.chunk = chunk;
    x.nchunks = (bytes + chunk - 1) / chunk;
    x.in_stride = round_up(chunk, 256);
    x.iters = iters;
    printf(
        "# bench_nvcomp gpu=\"%s\" sm=%d%d nvcomp=%s cudart=%d driver=%d file=%s bytes=%zu chunk=%zu chunks=%zu "
        "iters=%d\n",
        prop.name, prop.major, prop.minor, nvver.c_str(), rt, drv, path, bytes, chunk, x.nchunks, iters);
    fflush(stdout);

    CK(cudaStreamCreateWithFlags(&x.st, cudaStreamNonBlocking));
    CK(cudaMalloc(&x.d_in, x.nchunks * x.in_stride));
    CK(cudaMemset(x.d_in, 0, x.nchunks * x.in_stride));
    const size_t full = bytes / chunk, tail = bytes - full * chunk;
    if (full)
        CK(cudaMemcpy2D(x.d_in, x.in_stride, host.data(), chunk, chunk, full, cudaMemcpyHostToDevice));
    if (tail)
        CK(cudaMemcpy(x.d_in + full * x.in_stride, host.data() + full * chunk, tail, cudaMemcpyHostToDevice));
    std::vector<const void *> h_ptrs(x.nchunks);
    x.h_sizes.resize(x.nchunks);
    for (size_t i = 0; i < x.nchunks; i++) {
        h_ptrs[i] = x.d_in + i * x.in_stride;
        x.h_sizes[i] = i < full ? chunk : tail;
    }
    CK(cudaMalloc(&x.d_in_ptrs, x.nchunks * sizeof(void *)));
    CK(cudaMalloc(&x.d_in_sizes, x.nchunks * sizeof(size_t)));
    CK(cudaMemcpy(x.d_in_ptrs, h_ptrs.data(), x.nchunks * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x.d_in_sizes, x.h_sizes.data(), x.nchunks * sizeof(size_t), cudaMemcpyHostToDevice));
    std::vector<uint8_t>().swap(host);

    int failures = 0;
    for (const std::string &a : algos) {
        nvcompType_t used = NVCOMP_TYPE_CHAR;
        try {
            Result r;
            if (a == "cascaded") {
                nvcompBatchedCascadedCompressOpts_t c = nvcompBatchedCascadedCompressDefaultOpts;
                c.common_opts.data_type = cascaded_type;
                nvcompBatchedCascadedDecompressOpts_t d = nvcompBatchedCascadedDecompressDefaultOpts;
                d.common_opts = c.common_opts; /* narrows decompression to what compression used */
                used = cascaded_type;
                r = run_algo(NV_API(Cascaded), c, d, x);
            } else if (a == "ans") {
                used = nvcompBatchedANSCompressDefaultOpts.data_type;
                r = run_algo(NV_API(ANS), nvcompBatchedANSCompressDefaultOpts,
                             nvcompBatchedANSDecompressDefaultOpts, x);
            } else if (a == "bitcomp") {
                nvcompBatchedBitcompCompressOpts_t c = nvcompBatchedBitcompCompressDefaultOpts;
                c.data_type = nvtype;
                used = nvtype;
                r = run_algo(NV_API(Bitcomp), c, nvcompBatchedBitcompDecompressDefaultOpts, x);
            } else if (a == "lz4") {
                used = nvcompBatchedLZ4CompressDefaultOpts.data_type;
                r = run_algo(NV_API(LZ4), nvcompBatchedLZ4CompressDefaultOpts,
                             nvcompBatchedLZ4DecompressDefaultOpts, x);
            } else if (a == "zstd") {
                used = NVCOMP_TYPE_CHAR;
                r = run_algo(NV_API(Zstd), nvcompBatchedZstdCompressDefaultOpts,
                             nvcompBatchedZstdDecompressDefaultOpts, x);
            } else if (a == "deflate") {
                used = NVCOMP_TYPE_CHAR;
                r = run_algo(NV_API(Deflate), nvcompBatchedDeflateCompressDefaultOpts,
                             nvcompBatchedDeflateDecompressDefaultOpts, x);
            } else if (a == "gdeflate") {
                used = NVCOMP_TYPE_CHAR;
                r = run_algo(NV_API(Gdeflate), nvcompBatchedGdeflateCompressDefaultOpts,
                             nvcompBatchedGdeflateDecompressDefaultOpts, x);
            }
            const double cg = r.comp_ms > 0 ? bytes / (r.comp_ms * 1e6) : 0;
            const double dg = r.decomp_ms > 0 ? bytes / (r.decomp_ms * 1e6) : 0;
            const double ratio = r.comp_bytes ? (double)bytes / r.comp_bytes : 0;
            printf("nvcomp %s type=%s nvtype=%s chunk=%zu bytes=%zu comp_GBps=%.2f decomp_GBps=%.2f ratio=%.4f "
                   "comp_bytes=%zu ok\n",
                   a.c_str(), type.c_str(), nv_type_name(used), chunk, bytes, cg, dg, ratio, r.comp_bytes);
        } catch (const Fail &e) {
            failures++;
            cudaError_t sticky = cudaDeviceSynchronize(); /* an error a later row would also hit */
            printf("nvcomp %s type=%s nvtype=%s chunk=%zu bytes=%zu FAIL stage=%s error=%s%s%s\n", a.c_str(),
                   type.c_str(), nv_type_name(used), chunk, bytes, e.stage.c_str(), e.error.c_str(),
                   sticky != cudaSuccess ? " device=" : "", sticky != cudaSuccess ? cudaGetErrorName(sticky) : "");
            cudaGetLastError(); /* clear a non-sticky error */
        }
        fflush(stdout);
    }
    cudaFree(x.d_in);
    cudaFree(x.d_in_ptrs);
    cudaFree(x.d_in_sizes);
    cudaStreamDestroy(x.st);
    return failures ? 2 : 0;
}
