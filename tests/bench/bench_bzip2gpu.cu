/*
 * bench_bzip2gpu.cu - bzip2gpu (github.com/weissenberger/bzip2gpu, a GPU
 * bzip2 decompressor) on one .bz2 file: a GPU competitor row of the benchmark
 * harness. Its own demo program (bz2gpu IN OUT) times nothing, so
 * this wrapper calls its entry point, bz2gpu::decode_stream, the same way the
 * demo does. Built by scripts/build-competitors.sh, linked against bzip2gpu's
 * objects compiled from its own source (kept in an ignored folder).
 *
 *   bench_bzip2gpu FILE.bz2 ORIGINAL [--reps N]
 *
 * What is timed (wall time, steady clock, median of --reps runs after one
 * warm-up, default 3): one bz2gpu::decode_stream call until its stream is
 * synchronised. That is everything bzip2gpu does for a stream: the H2D copy of
 * the compressed bytes (pageable, as its demo has them; small), the host-side
 * parser and Huffman table build (OpenMP, all threads: bzip2gpu's parser is
 * on the CPU), the metadata copies, and the GPU stages (Huffman decode, RLE2,
 * inverse MTF, inverse BWT, RLE1) with their stream-ordered allocations. The
 * output stays in device memory (device-resident decode); reading the file
 * and copying the output back are outside the time. host_parse_ms is the
 * parser and table build alone, measured apart (included in the time above).
 *
 * Verification: after every run (warm-up included) the device output is
 * copied back and compared byte for byte with ORIGINAL (size too), then
 * overwritten on the device before it is freed, so a later run cannot pass on
 * a recycled buffer's old contents. Any difference: no rate.
 *
 * Output (stdout): a '#' header line, then one line:
 *   bzip2gpu decode_MBps=X bytes=N bz2_bytes=Z host_parse_ms=P reps=3 ok
 * MB/s = 10^6 decompressed bytes per second. On a wrong output:
 *   bzip2gpu FAIL stage=verify error=output_differs out_bytes=M bytes=N first_diff=K
 * and exit 2. bzip2gpu itself exits 1 and prints "CUDA error: ..." on a CUDA
 * error (its CUERR), which the harness reports as a failure. Exit 1 also on
 * usage or setup errors.
 */
#include <cuda_runtime.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bz2gpu.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("bzip2gpu FAIL stage=%s error=%s\n", #call, cudaGetErrorName(e_));              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static bool read_file(const char *path, std::vector<uint8_t> &buf)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return false;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf.resize((size_t)(n > 0 ? n : 0));
    bool ok = n >= 0 && fread(buf.data(), 1, buf.size(), f) == buf.size();
    fclose(f);
    if (!ok)
        fprintf(stderr, "%s: read error\n", path);
    return ok;
}

int main(int argc, char **argv)
{
    const char *zpath = NULL, *opath = NULL;
    int reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (argv[i][0] == '-' || (zpath && opath)) {
            zpath = NULL;
            break;
        } else if (!zpath)
            zpath = argv[i];
        else
            opath = argv[i];
    }
    if (!zpath || !opath || reps < 1) {
        fprintf(stderr, "usage: bench_bzip2gpu FILE.bz2 ORIGINAL [--reps N]\n");
        return 1;
    }
    std::vector<uint8_t> z, orig;
    if (!read_file(zpath, z) || !read_file(opath, orig))
        return 1;
    /* bzip2gpu reads the stream as 64-bit units (and one unit ahead): zero padding */
    size_t units = (z.size() + 7) / 8;
    std::vector<uint64_t> in(units + 2, 0);
    memcpy(in.data(), z.data(), z.size());

    int dev = 0;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    int threads = omp_get_max_threads();
    printf("# bench_bzip2gpu gpu=\"%s\" sm=%d%d file=%s bz2_bytes=%zu original=%s bytes=%zu threads=%d reps=%d\n",
           prop.name, prop.major, prop.minor, zpath, z.size(), opath, orig.size(), threads, reps);
    fflush(stdout);

    std::vector<uint8_t> back(orig.size());
    std::vector<double> t;
    for (int i = 0; i <= reps; i++) {
        uint8_t *d_out = NULL;
        size_t out_size = 0;
        CK(cudaStreamSynchronize(stream));
        double t0 = now_s();
        bz2gpu::decode_stream(in.data(), d_out, out_size, units, (size_t)threads, stream);
        CK(cudaStreamSynchronize(stream));
        double t1 = now_s();
        CK(cudaGetLastError());
        if (i > 0)
            t.push_back(t1 - t0);
        if (!d_out || out_size != orig.size()) {
            printf("bzip2gpu FAIL stage=verify error=output_size out_bytes=%zu bytes=%zu\n", out_size,
                   orig.size());
            return 2;
        }
        CK(cudaMemcpy(back.data(), d_out, out_size, cudaMemcpyDeviceToHost));
        if (memcmp(back.data(), orig.data(), orig.size()) != 0) {
            size_t k = 0;
            while (k < orig.size() && back[k] == orig[k])
                k++;
            printf("bzip2gpu FAIL stage=verify error=output_differs out_bytes=%zu bytes=%zu first_diff=%zu\n",
                   out_size, orig.size(), k);
            return 2;
        }
        CK(cudaMemsetAsync(d_out, 0xa5, out_size, stream));
        CK(cudaFreeAsync(d_out, stream));
        CK(cudaStreamSynchronize(stream));
    }

    /* the host-side parser alone (inside the timed call above) */
    std::vector<double> tp;
    for (int i = 0; i < reps; i++) {
        bz2stream s;
        double t0 = now_s();
        parser::parse(in.data(), s, units, (size_t)threads);
        parser::build_tables(s, (size_t)threads);
        tp.push_back(now_s() - t0);
    }
    CK(cudaStreamDestroy(stream));
    printf("bzip2gpu decode_MBps=%.1f bytes=%zu bz2_bytes=%zu host_parse_ms=%.2f reps=%d ok\n",
           orig.size() / median(t) / 1e6, orig.size(), z.size(), median(tp) * 1e3, reps);
    return 0;
}
