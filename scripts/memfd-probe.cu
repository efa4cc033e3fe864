/*
 * memfd-probe.cu - how fast a host fills a client's fresh memfd: the
 * physical reference for a whole decompress request, whose output the daemon
 * copies into the client's new output memfd (docs/BENCHMARKS.md, "One H200,
 * where a request's time goes").
 *
 *   nvcc -O2 -o memfd-probe scripts/memfd-probe.cu
 *   memfd-probe [MIB]            (default 1024)
 *
 * For 1, 4, 8 and 16 threads, each its own contiguous share: memcpy and
 * non-temporal copies into a fresh shared mapping of a new memfd (every page
 * allocated by a fault), the same copy again (pages present),
 * MADV_POPULATE_WRITE then a copy, and pwrite into a new memfd. Then, with a
 * GPU: device-to-host into pinned memory, and cudaHostRegister of a fresh
 * memfd mapping (with and without populating it first) and a DMA into it.
 * MB/s = 10^6 bytes per second of wall time. Without a GPU the CUDA rows are
 * skipped.
 */
#include <cuda_runtime.h>
#include <emmintrin.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum Way { COPY, COPY_NT, POPULATE, PWRITE };

struct Share {
    unsigned char *dst;
    const unsigned char *src;
    size_t len;
    Way way;
    int fd;
    size_t off;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void copy_nt(unsigned char *d, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i + 64 <= n; i += 64)
        for (int k = 0; k < 64; k += 16)
            _mm_stream_si128((__m128i *)(d + i + k), _mm_loadu_si128((const __m128i *)(s + i + k)));
    _mm_sfence();
}

static void *fill_share(void *arg)
{
    Share *a = (Share *)arg;
    switch (a->way) {
    case COPY: memcpy(a->dst, a->src, a->len); break;
    case COPY_NT: copy_nt(a->dst, a->src, a->len); break;
    case POPULATE:
        if (madvise(a->dst, a->len, MADV_POPULATE_WRITE) != 0)
            perror("madvise(MADV_POPULATE_WRITE)");
        break;
    case PWRITE:
        for (size_t o = 0; o < a->len;) {
            ssize_t w = pwrite(a->fd, a->src + o, a->len - o, (off_t)(a->off + o));
            if (w <= 0) {
                perror("pwrite");
                break;
            }
            o += (size_t)w;
        }
        break;
    }
    return NULL;
}

/* Seconds for `threads` threads to fill [0, len) of dst (or fd) their way. */
static double fill(unsigned char *dst, int fd, const unsigned char *src, size_t len, int threads, Way way)
{
    pthread_t th[16];
    Share sh[16];
    size_t per = len / (size_t)threads;
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        sh[i] = Share{ dst ? dst + i * per : NULL, src + i * per, per, way, fd, i * per };
        pthread_create(&th[i], NULL, fill_share, &sh[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    return now() - t0;
}

static unsigned char *fresh_map(size_t len, int *fd)
{
    *fd = memfd_create("memfd-probe", MFD_CLOEXEC);
    if (*fd < 0 || ftruncate(*fd, (off_t)len) != 0) {
        perror("memfd");
        exit(1);
    }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return (unsigned char *)m;
}

static void drop_map(unsigned char *m, size_t len, int fd)
{
    munmap(m, len);
    close(fd);
}

static double mbs(size_t len, double s)
{
    return (double)len / s / 1e6;
}

static void host_rows(const unsigned char *src, size_t len)
{
    const int counts[] = { 1, 4, 8, 16 };
    for (int t : counts) {
        int fd;
        unsigned char *m = fresh_map(len, &fd);
        double first = fill(m, fd, src, len, t, COPY), again = fill(m, fd, src, len, t, COPY);
        drop_map(m, len, fd);
        m = fresh_map(len, &fd);
        double nt = fill(m, fd, src, len, t, COPY_NT);
        drop_map(m, len, fd);
        m = fresh_map(len, &fd);
        double pop = fill(m, fd, src, len, t, POPULATE), after = fill(m, fd, src, len, t, COPY_NT);
        drop_map(m, len, fd);
        fd = memfd_create("memfd-probe", MFD_CLOEXEC);
        double pw = fill(NULL, fd, src, len, t, PWRITE);
        close(fd);
        printf("| %2d | %6.0f | %6.0f | %6.0f | %6.0f + %6.0f = %6.0f | %6.0f |\n", t, mbs(len, first),
               mbs(len, nt), mbs(len, again), mbs(len, pop), mbs(len, after), mbs(len, pop + after), mbs(len, pw));
    }
}

#define CUDA_OK(call)                                          \
    do {                                                       \
        cudaError_t e_ = (call);                               \
        if (e_ != cudaSuccess) {                               \
            printf("%s: %s\n", #call, cudaGetErrorString(e_)); \
            return;                                            \
        }                                                      \
    } while (0)

/* cudaHostRegister of a fresh memfd mapping (populated first or not), a DMA into it, unregister. */
static void register_row(void *dev, size_t len, bool populate)
{
    int fd;
    unsigned char *m = fresh_map(len, &fd);
    double t0 = now();
    if (populate)
        fill(m, fd, NULL, len, 16, POPULATE);
    double t1 = now();
    CUDA_OK(cudaHostRegister(m, len, cudaHostRegisterDefault));
    double t2 = now();
    CUDA_OK(cudaMemcpy(m, dev, len, cudaMemcpyDeviceToHost));
    double t3 = now();
    CUDA_OK(cudaHostUnregister(m));
    double t4 = now();
    drop_map(m, len, fd);
    printf(
        "register a fresh memfd mapping%s: populate %.0f ms, register %.0f ms, D2H %.0f ms, unregister %.0f ms: "
        "%.0f MB/s in all\n",
        populate ? " (populated by 16 threads first)" : "", (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3,
        (t4 - t3) * 1e3, mbs(len, t4 - t0));
}

static void gpu_rows(size_t len)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no GPU: the CUDA rows are skipped\n");
        return;
    }
    void *dev, *pin;
    CUDA_OK(cudaMalloc(&dev, len));
    CUDA_OK(cudaMemset(dev, 1, len));
    CUDA_OK(cudaMallocHost(&pin, len));
    CUDA_OK(cudaMemcpy(pin, dev, len, cudaMemcpyDeviceToHost)); /* warm-up */
    double t0 = now();
    CUDA_OK(cudaMemcpy(pin, dev, len, cudaMemcpyDeviceToHost));
    printf("D2H into pinned memory: %.0f MB/s\n", mbs(len, now() - t0));
    register_row(dev, len, false);
    register_row(dev, len, true);
    cudaFreeHost(pin);
    cudaFree(dev);
}

int main(int argc, char **argv)
{
    size_t len = (size_t)(argc > 1 ? atol(argv[1]) : 1024) << 20;
    len -= len % (16u << 12); /* whole pages for every share */
    unsigned char *src = (unsigned char *)aligned_alloc(4096, len);
    if (!src || len == 0)
        return 1;
    for (size_t i = 0; i < len; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 12));
    printf("%zu MiB, MB/s\n\n", len >> 20);
    printf(
        "| threads | copy, fresh | nt copy, fresh | copy, pages present | populate + nt copy | pwrite, fresh |\n");
    printf("|---|---|---|---|---|---|\n");
    host_rows(src, len);
    gpu_rows(len);
    free(src);
    return 0;
}
