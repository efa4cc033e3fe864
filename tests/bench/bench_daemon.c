/*
 * bench_daemon.c - throughput and latency through a running gpucompd.
 *
 *   bench_daemon SOCKET large SIZE_MIB          one client, memfd transport
 *   bench_daemon SOCKET many CLIENTS SIZE_MIB ROUNDS     buffer API (the library copies)
 *   bench_daemon SOCKET manywarm CLIENTS SIZE_MIB ROUNDS the same after one untimed call each
 *   bench_daemon SOCKET manyfd CLIENTS SIZE_MIB ROUNDS   data in memfds, gpucomp_compress_fd
 *   bench_daemon SOCKET manyreg CLIENTS SIZE_MIB ROUNDS  the same with registered memfds
 *   bench_daemon SOCKET manyfd-dec CLIENTS SIZE_MIB ROUNDS  manyfd's decompress twin: each client
 *       compresses its data once (untimed), then times gpucomp_decompress_fd of that frame;
 *       GB/s counts the decompressed bytes
 *   bench_daemon SOCKET small CLIENTS SIZE_BYTES ROUNDS   (latency percentiles)
 *   bench_daemon FILE gen SIZE_MIB              write the same data to FILE (for other tools)
 *   bench_daemon SOCKET bzip2-large FILE LEVEL ROUNDS
 *   bench_daemon SOCKET bzip2-many FILE CLIENTS SLICE_MIB LEVEL ROUNDS
 *   bench_daemon SOCKET bzip2-dec-many FILE CLIENTS SLICE_MIB ROUNDS
 *   bench_daemon SOCKET whole FILE OUT c|d bzip2|rle LEVEL [ROUNDS]   one file, one request (per round)
 *
 * Data: short runs (mean run 8 bytes), the class the rle codec is for.
 * Every round trip is verified. Prints one markdown table row per run, plus
 * the daemon's device counters (copy/kernel overlap) for the run.
 *
 * The bzip2 modes compress a real file instead (scripts/gpu-bzip2-daemon-bench.sh):
 * bzip2-large sends all of FILE as one request from a memfd (as the library
 * sends large inputs) ROUNDS times, reusing the output memfd, and reports the
 * best and median round; bzip2-many runs CLIENTS connections at once, each
 * compressing its own SLICE_MIB slice of FILE (client i from offset
 * i * SLICE_MIB, wrapping around the end) ROUNDS times, and reports the
 * aggregate. MB/s = 10^6 input bytes per second of wall time. Each output is
 * decoded once, outside the timed part, by the CPU engine (bz2_decompress),
 * not by the daemon, and compared with the input. bzip2-dec-many is
 * bzip2-many's decompress twin: each client compresses its slice in-process
 * with the CPU engine (level 9, one thread, untimed), then all clients at
 * once send that stream to the daemon for decompression ROUNDS times;
 * MB/s = 10^6 decompressed bytes per second, aggregate; every client's last
 * output is compared with its slice (untimed).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bzip2.h"
#include "gc_clock.h"
#include "gpucomp.h"

static const char *socket_path;

static double now_s(void)
{
    return (double)gc_now_ns() / 1e9;
}

static void die(const char *what, gpucomp_client *c, int rc)
{
    fprintf(stderr, "bench_daemon: %s: %s (%s)\n", what, gpucomp_strerror(rc),
            c ? gpucomp_last_error(c) : gpucomp_connect_error());
    exit(1);
}

static void fill_runs(uint8_t *p, size_t len, uint64_t seed)
{
    size_t i = 0;
    while (i < len) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t run = 1 + ((seed >> 33) % 15);
        uint8_t v = (uint8_t)(seed >> 56);
        for (size_t k = 0; k < run && i < len; k++)
            p[i++] = v;
    }
}

static gpucomp_client *connect_client(void)
{
    gpucomp_client *c;
    int rc = gpucomp_connect(socket_path, &c);
    if (rc != GPUCOMP_OK)
        die("connect", NULL, rc);
    return c;
}

static uint8_t *map_memfd(int fd, size_t len, int prot)
{
    void *p = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

/* Snapshot of the device counters, summed over devices. */
typedef struct device_totals {
    uint64_t h2d, kernel, d2h, wall, batches, fallbacks, gpu_requests;
} device_totals;

static device_totals totals(gpucomp_client *c)
{
    gpucomp_stats st;
    int rc = gpucomp_stats_get(c, &st);
    if (rc != GPUCOMP_OK)
        die("stats", c, rc);
    device_totals t = { .gpu_requests = st.gpu_requests };
    for (uint32_t i = 0; i < st.gpu_devices; i++) {
        t.h2d += st.devices[i].h2d_ns;
        t.kernel += st.devices[i].kernel_ns;
        t.d2h += st.devices[i].d2h_ns;
        t.wall += st.devices[i].wall_ns;
        t.batches += st.devices[i].batches;
        t.fallbacks += st.devices[i].fallbacks;
    }
    return t;
}

static void print_overlap(const char *label, device_totals a, device_totals b, double wall_s)
{
    double h2d = (double)(b.h2d - a.h2d) * 1e-9, k = (double)(b.kernel - a.kernel) * 1e-9;
    double d2h = (double)(b.d2h - a.d2h) * 1e-9;
    double slowest = h2d > k ? (h2d > d2h ? h2d : d2h) : (k > d2h ? k : d2h);
    printf("| %s | device: %llu batches, %llu GPU requests, H2D %.3f s, kernels %.3f s, D2H %.3f s; "
           "end-to-end %.3f s = %.2fx the slowest stage |\n",
           label, (unsigned long long)(b.batches - a.batches),
           (unsigned long long)(b.gpu_requests - a.gpu_requests), h2d, k, d2h, wall_s,
           slowest > 0 ? wall_s / slowest : 0.0);
}

typedef int (*fd_call)(gpucomp_client *, const gpucomp_options *, int, size_t, int, size_t *);

/* One timed fd call, with the device counters around it for the overlap figure. */
static double timed(gpucomp_client *c, fd_call call, const char *label, int in, size_t len, int out,
                    size_t *out_len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    device_totals before = totals(c);
    double t = now_s();
    int rc = call(c, &o, in, len, out, out_len);
    double s = now_s() - t;
    if (rc != GPUCOMP_OK)
        die(label, c, rc);
    print_overlap(label, before, totals(c), s);
    return s;
}

/*
 * One client, one large buffer in a memfd. Each direction runs twice: cold
 * (the output memfd's pages do not exist yet: the kernel allocates and
 * zeroes them during the call) and warm (a reused output buffer, the steady
 * state of a client that keeps its buffers).
 */
static void run_large(size_t mib)
{
    size_t len = mib << 20;
    gpucomp_client *c = connect_client();
    int in = gpucomp_memfd_create("bench-in"), packed = gpucomp_memfd_create("bench-packed");
    int back = gpucomp_memfd_create("bench-back");
    if (in < 0 || packed < 0 || back < 0 || ftruncate(in, (off_t)len) != 0) {
        perror("memfd");
        exit(1);
    }
    uint8_t *src = map_memfd(in, len, PROT_READ | PROT_WRITE);
    fill_runs(src, len, 42);
    size_t packed_len = 0, back_len = 0;
    double comp[2], decomp[2];
    for (int warm = 0; warm < 2; warm++) {
        comp[warm] = timed(c, gpucomp_compress_fd, warm ? "large compress, warm" : "large compress, cold", in, len,
                           packed, &packed_len);
        decomp[warm] = timed(c, gpucomp_decompress_fd, warm ? "large decompress, warm" : "large decompress, cold",
                             packed, packed_len, back, &back_len);
    }
    gpucomp_backend backend = gpucomp_last_backend(c);
    uint8_t *out = map_memfd(back, back_len, PROT_READ);
    if (back_len != len || memcmp(out, src, len) != 0) {
        fprintf(stderr, "bench_daemon: round trip mismatch\n");
        exit(1);
    }
    printf("| large: 1 client, %zu MiB, memfd, backend %s | compress %.2f GB/s cold, %.2f GB/s warm; "
           "decompress %.2f GB/s cold, %.2f GB/s warm; ratio %.2f; verified |\n",
           mib, backend == GPUCOMP_BACKEND_GPU ? "gpu" : "cpu", (double)len / comp[0] / 1e9,
           (double)len / comp[1] / 1e9, (double)len / decomp[0] / 1e9, (double)len / decomp[1] / 1e9,
           (double)len / (double)packed_len);
    munmap(src, len);
    munmap(out, back_len);
    close(in), close(packed), close(back);
    gpucomp_close(c);
}

#define FD_REGISTERED 2
#define BUF_WARM (-1) /* buffer API after one untimed call per client */

typedef struct worker_arg {
    size_t size;
    int rounds;
    int index;
    int use_fd;               /* data in memfds, gpucomp_compress_fd (no library copies);
                                   FD_REGISTERED: and registered with the daemon;
                                   0: the buffer API; BUF_WARM: the same, warmed up */
    double *latencies;        /* rounds entries */
    pthread_barrier_t *start; /* every client connected and its data ready */
    pthread_barrier_t *stop;  /* every client done with its timed rounds */
    int decompress;           /* memfd workers: time decompress_fd of one compressed frame */
} worker_arg;

static void verify(gpucomp_client *c, const gpucomp_options *o, const void *packed, size_t packed_len,
                   const uint8_t *src, size_t len)
{
    void *back;
    size_t back_len;
    int rc = gpucomp_decompress(c, o, packed, packed_len, &back, &back_len);
    if (rc != GPUCOMP_OK)
        die("decompress", c, rc);
    if (back_len != len || memcmp(back, src, len) != 0) {
        fprintf(stderr, "bench_daemon: round trip mismatch\n");
        exit(1);
    }
    gpucomp_free(back);
}

/* A client: set up, wait for all, run the timed rounds, wait for all, then verify one. */
static void *many_worker(void *p)
{
    worker_arg *a = p;
    gpucomp_client *c = connect_client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    uint8_t *src = malloc(a->size);
    fill_runs(src, a->size, (uint64_t)a->index + 1);
    void *first = NULL;
    size_t first_len = 0;
    if (a->use_fd == BUF_WARM) {
        /* a long-lived client's steady state: the library's staging memfds
         * exist and the daemon has mapped them */
        void *packed;
        size_t packed_len;
        int rc = gpucomp_compress(c, &o, src, a->size, &packed, &packed_len);
        if (rc != GPUCOMP_OK)
            die("compress", c, rc);
        gpucomp_free(packed);
    }
    pthread_barrier_wait(a->start);
    for (int r = 0; r < a->rounds; r++) {
        void *packed;
        size_t packed_len;
        double t = now_s();
        int rc = gpucomp_compress(c, &o, src, a->size, &packed, &packed_len);
        a->latencies[r] = now_s() - t;
        if (rc != GPUCOMP_OK)
            die("compress", c, rc);
        if (r == 0)
            first = packed, first_len = packed_len;
        else
            gpucomp_free(packed);
    }
    pthread_barrier_wait(a->stop);
    verify(c, &o, first, first_len, src, a->size); /* outside the timed section */
    gpucomp_free(first);
    free(src);
    gpucomp_close(c);
    return NULL;
}

/*
 * A long-lived client registers its buffers before the timed rounds: one
 * untimed call sizes the output memfd to the codec's bound, then both files
 * are registered (page-locked by a GPU daemon), as gpucomp.h describes.
 */
static void register_buffers(gpucomp_client *c, const gpucomp_options *o, int in, size_t len, int packed)
{
    size_t packed_len;
    int rc = gpucomp_compress_fd(c, o, in, len, packed, &packed_len);
    if (rc != GPUCOMP_OK)
        die("compress_fd", c, rc);
    struct stat st;
    int pinned_in = 0, pinned_out = 0;
    if (fstat(packed, &st) != 0)
        die("fstat", c, GPUCOMP_E_IO);
    if ((rc = gpucomp_register_fd(c, in, len, &pinned_in)) != GPUCOMP_OK ||
        (rc = gpucomp_register_fd(c, packed, (size_t)st.st_size, &pinned_out)) != GPUCOMP_OK)
        die("register_fd", c, rc);
    if (!pinned_in || !pinned_out)
        fprintf(stderr, "bench_daemon: registered buffers are not page-locked (no GPU?)\n");
}

/* A client that keeps its data in a memfd (a storage server's shared buffer,
 * say) and reuses one output memfd: gpucomp_compress_fd, so the library makes
 * no copies; unless registered, the daemon still stages both through pinned
 * memory. */
static void *many_fd_worker(void *p)
{
    worker_arg *a = p;
    gpucomp_client *c = connect_client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    int in = gpucomp_memfd_create("bench-in"), packed = gpucomp_memfd_create("bench-packed");
    int back = gpucomp_memfd_create("bench-back");
    if (in < 0 || packed < 0 || back < 0 || ftruncate(in, (off_t)a->size) != 0) {
        perror("memfd");
        exit(1);
    }
    uint8_t *src = map_memfd(in, a->size, PROT_READ | PROT_WRITE);
    fill_runs(src, a->size, (uint64_t)a->index + 1);
    size_t packed_len = 0, back_len = 0;
    if (a->use_fd == FD_REGISTERED)
        register_buffers(c, &o, in, a->size, packed);
    if (a->decompress) { /* the frame every timed round decodes, made untimed */
        int rc = gpucomp_compress_fd(c, &o, in, a->size, packed, &packed_len);
        if (rc != GPUCOMP_OK)
            die("compress_fd", c, rc);
    }
    pthread_barrier_wait(a->start);
    for (int r = 0; r < a->rounds; r++) {
        double t = now_s();
        int rc = a->decompress ? gpucomp_decompress_fd(c, &o, packed, packed_len, back, &back_len)
                               : gpucomp_compress_fd(c, &o, in, a->size, packed, &packed_len);
        a->latencies[r] = now_s() - t;
        if (rc != GPUCOMP_OK)
            die(a->decompress ? "decompress_fd" : "compress_fd", c, rc);
    }
    pthread_barrier_wait(a->stop);
    /* outside the timed section: the last result decodes to the input (decompress: the last
     * output is the input) */
    if (!a->decompress) {
        int rc = gpucomp_decompress_fd(c, &o, packed, packed_len, back, &back_len);
        if (rc != GPUCOMP_OK)
            die("decompress_fd", c, rc);
    }
    uint8_t *out = map_memfd(back, back_len, PROT_READ);
    if (back_len != a->size || memcmp(out, src, a->size) != 0) {
        fprintf(stderr, "bench_daemon: round trip mismatch\n");
        exit(1);
    }
    munmap(out, back_len);
    munmap(src, a->size);
    close(in), close(packed), close(back);
    gpucomp_close(c);
    return NULL;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_clients(const char *mode, int clients, size_t size, int rounds, int use_fd, int decompress)
{
    pthread_t *threads = calloc((size_t)clients, sizeof *threads);
    worker_arg *args = calloc((size_t)clients, sizeof *args);
    double *lat = calloc((size_t)clients * (size_t)rounds, sizeof *lat);
    gpucomp_client *c = connect_client();
    pthread_barrier_t start, stop;
    pthread_barrier_init(&start, NULL, (unsigned)clients + 1);
    pthread_barrier_init(&stop, NULL, (unsigned)clients + 1);
    for (int i = 0; i < clients; i++) {
        args[i] =
            (worker_arg){ size, rounds, i, use_fd, lat + (size_t)i * (size_t)rounds, &start, &stop, decompress };
        pthread_create(&threads[i], NULL, use_fd > 0 ? many_fd_worker : many_worker, &args[i]);
    }
    pthread_barrier_wait(&start);
    device_totals t0 = totals(c);
    double t = now_s();
    pthread_barrier_wait(&stop);
    double wall = now_s() - t;
    device_totals t1 = totals(c);
    for (int i = 0; i < clients; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&stop);
    size_t n = (size_t)clients * (size_t)rounds;
    qsort(lat, n, sizeof *lat, compare_double);
    printf("| %s: %d clients x %d x %zu bytes | aggregate %.2f GB/s %s, %.0f req/s, latency p50 %.3f ms p99 %.3f "
           "ms |\n",
           mode, clients, rounds, size, (double)size * (double)n / wall / 1e9,
           decompress ? "decompress" : "compress", (double)n / wall, lat[n / 2] * 1e3, lat[(n * 99) / 100] * 1e3);
    print_overlap(mode, t0, t1, wall);
    gpucomp_close(c);
    free(threads), free(args), free(lat);
}

/* ---- bzip2 modes: a real file, compressed by the daemon, decoded by the CPU engine ---- */

/* Read len bytes of the file at offset off (wrapping around its end) into a fresh memfd. */
static int file_to_memfd(int file, size_t file_len, size_t off, size_t len, const char *name)
{
    int fd = gpucomp_memfd_create(name);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror("memfd");
        exit(1);
    }
    uint8_t *p = map_memfd(fd, len, PROT_READ | PROT_WRITE);
    size_t done = 0;
    while (done < len) {
        size_t at = (off + done) % file_len, want = len - done;
        if (want > file_len - at)
            want = file_len - at;
        ssize_t n = pread(file, p + done, want, (off_t)at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "bench_daemon: reading the input file: %s\n", n < 0 ? strerror(errno) : "short file");
            exit(1);
        }
        done += (size_t)n;
    }
    munmap(p, len);
    return fd;
}

static int open_input(const char *path, size_t *len)
{
    int f = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (f < 0 || fstat(f, &st) != 0) {
        fprintf(stderr, "bench_daemon: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    if (st.st_size <= 0) {
        fprintf(stderr, "bench_daemon: %s is empty\n", path);
        exit(1);
    }
    *len = (size_t)st.st_size;
    return f;
}

/* The CPU engine decodes the bzip2 stream in packed[0..packed_len) back to in[0..len). */
static void bz2_verify(int packed, size_t packed_len, int in, size_t len, unsigned threads)
{
    const uint8_t *z = map_memfd(packed, packed_len, PROT_READ);
    const uint8_t *src = map_memfd(in, len, PROT_READ);
    uint8_t *back = NULL;
    size_t back_len = 0;
    gc_error err = { 0 };
    int rc = bz2_decompress(z, packed_len, len + 1, threads, &back, &back_len, &err);
    if (rc != GC_OK) {
        fprintf(stderr, "bench_daemon: the daemon's bzip2 stream does not decode: %s\n", err.msg);
        exit(1);
    }
    if (back_len != len || memcmp(back, src, len) != 0) {
        fprintf(stderr, "bench_daemon: bzip2 round trip mismatch (%zu bytes back, %zu in)\n", back_len, len);
        exit(1);
    }
    free(back);
    munmap((void *)z, packed_len);
    munmap((void *)src, len);
}

static const char *backend_name(gpucomp_backend b)
{
    return b == GPUCOMP_BACKEND_GPU ? "gpu" : b == GPUCOMP_BACKEND_CPU ? "cpu" : "unknown";
}

/*
 * One client, all of the file in one memfd, one output memfd reused for
 * every round (the first round also allocates its pages: see "first").
 */
static void run_bzip2_large(const char *path, int level, int rounds)
{
    size_t len;
    int file = open_input(path, &len);
    int in = file_to_memfd(file, len, 0, len, "bench-bz2-in");
    close(file);
    int packed = gpucomp_memfd_create("bench-bz2-packed");
    if (packed < 0) {
        perror("memfd");
        exit(1);
    }
    gpucomp_client *c = connect_client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = level;
    double *t = calloc((size_t)rounds, sizeof *t), best_engine = 0;
    size_t packed_len = 0;
    int gpu_rounds = 0;
    device_totals t0 = totals(c);
    double total = 0;
    for (int r = 0; r < rounds; r++) {
        double s = now_s();
        int rc = gpucomp_compress_fd(c, &o, in, len, packed, &packed_len);
        t[r] = now_s() - s;
        if (rc != GPUCOMP_OK)
            die("bzip2 compress_fd", c, rc);
        total += t[r];
        double engine = (double)gpucomp_last_engine_ns(c) / 1e9;
        if (r == 0 || engine < best_engine)
            best_engine = engine;
        gpu_rounds += gpucomp_last_backend(c) == GPUCOMP_BACKEND_GPU;
    }
    device_totals t1 = totals(c);
    gpucomp_backend backend = gpucomp_last_backend(c);
    bz2_verify(packed, packed_len, in, len, 0);
    double first = t[0];
    qsort(t, (size_t)rounds, sizeof *t, compare_double);
    double median = rounds % 2 ? t[rounds / 2] : (t[rounds / 2 - 1] + t[rounds / 2]) / 2;
    printf("| bzip2-large: 1 client, %zu bytes, level %d, memfd, %d rounds, backend %s (gpu %d of %d) | "
           "compress best %.1f MB/s, median %.1f MB/s, first %.1f MB/s; engine best %.1f MB/s; "
           "out %zu bytes, ratio %.3f; verified by the CPU engine |\n",
           len, level, rounds, backend_name(backend), gpu_rounds, rounds, (double)len / t[0] / 1e6,
           (double)len / median / 1e6, (double)len / first / 1e6,
           best_engine > 0 ? (double)len / best_engine / 1e6 : 0.0, packed_len, (double)len / (double)packed_len);
    print_overlap("bzip2-large", t0, t1, total);
    free(t);
    close(in), close(packed);
    gpucomp_close(c);
}

/* What every bzip2 many-client worker's argument starts with: its rounds,
 * its latencies, the barriers around the timed part, and how many of its
 * requests the GPU served. */
typedef struct many_common {
    int rounds, on_gpu;
    double *latencies;
    pthread_barrier_t *start, *stop;
} many_common;

/* The timed part of a many-client run. */
typedef struct many_result {
    double wall, p50, p99;
    int on_gpu;
    size_t requests;
    device_totals t0, t1;
} many_result;

/* worker on each of `clients` arguments (arg_size bytes apart, each starting
 * with a many_common), `rounds` requests each, all clients at once. */
static many_result run_many(void *args, size_t arg_size, int clients, int rounds, void *(*worker)(void *))
{
    pthread_t *threads = calloc((size_t)clients, sizeof *threads);
    double *lat = calloc((size_t)clients * (size_t)rounds, sizeof *lat);
    gpucomp_client *c = connect_client();
    pthread_barrier_t start, stop;
    pthread_barrier_init(&start, NULL, (unsigned)clients + 1);
    pthread_barrier_init(&stop, NULL, (unsigned)clients + 1);
    for (int i = 0; i < clients; i++) {
        many_common *m = (many_common *)((char *)args + (size_t)i * arg_size);
        *m = (many_common){
            .rounds = rounds, .latencies = lat + (size_t)i * (size_t)rounds, .start = &start, .stop = &stop
        };
        if (pthread_create(&threads[i], NULL, worker, m) != 0) {
            fprintf(stderr, "bench_daemon: cannot start client thread %d\n", i);
            exit(1);
        }
    }
    many_result r = { .requests = (size_t)clients * (size_t)rounds };
    pthread_barrier_wait(&start);
    r.t0 = totals(c);
    double t = now_s();
    pthread_barrier_wait(&stop);
    r.wall = now_s() - t;
    r.t1 = totals(c);
    for (int i = 0; i < clients; i++) {
        pthread_join(threads[i], NULL);
        r.on_gpu += ((many_common *)((char *)args + (size_t)i * arg_size))->on_gpu;
    }
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&stop);
    qsort(lat, r.requests, sizeof *lat, compare_double);
    r.p50 = lat[r.requests / 2];
    r.p99 = lat[(r.requests * 99) / 100];
    gpucomp_close(c);
    free(threads), free(lat);
    return r;
}

typedef struct bz2_worker_arg {
    many_common m; /* first */
    int file;
    size_t file_len, off, size;
    int level;
    size_t out_len;
} bz2_worker_arg;

static void *bzip2_worker(void *p)
{
    bz2_worker_arg *a = p;
    gpucomp_client *c = connect_client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = a->level;
    int in = file_to_memfd(a->file, a->file_len, a->off, a->size, "bench-bz2-in");
    int packed = gpucomp_memfd_create("bench-bz2-packed");
    if (packed < 0) {
        perror("memfd");
        exit(1);
    }
    pthread_barrier_wait(a->m.start);
    for (int r = 0; r < a->m.rounds; r++) {
        double t = now_s();
        int rc = gpucomp_compress_fd(c, &o, in, a->size, packed, &a->out_len);
        a->m.latencies[r] = now_s() - t;
        if (rc != GPUCOMP_OK)
            die("bzip2 compress_fd", c, rc);
        a->m.on_gpu += gpucomp_last_backend(c) == GPUCOMP_BACKEND_GPU;
    }
    pthread_barrier_wait(a->m.stop);
    bz2_verify(packed, a->out_len, in, a->size, 1); /* outside the timed part; every client at once */
    close(in), close(packed);
    gpucomp_close(c);
    return NULL;
}

static void run_bzip2_many(const char *path, int clients, size_t slice, int level, int rounds)
{
    size_t len;
    int file = open_input(path, &len);
    bz2_worker_arg *args = calloc((size_t)clients, sizeof *args);
    for (int i = 0; i < clients; i++)
        args[i] = (bz2_worker_arg){
            .file = file, .file_len = len, .off = ((size_t)i * slice) % len, .size = slice, .level = level
        };
    many_result r = run_many(args, sizeof *args, clients, rounds, bzip2_worker);
    size_t out = 0;
    for (int i = 0; i < clients; i++)
        out += args[i].out_len;
    close(file);
    printf(
        "| bzip2-many: %d clients x %d x %zu bytes, level %d, memfd, of a %zu-byte file, gpu %d of %zu requests | "
        "aggregate %.1f MB/s compress, latency p50 %.1f ms p99 %.1f ms; "
        "out %zu bytes (last round), ratio %.3f; verified by the CPU engine |\n",
        clients, rounds, slice, level, len, r.on_gpu, r.requests,
        (double)slice * (double)r.requests / r.wall / 1e6, r.p50 * 1e3, r.p99 * 1e3, out,
        (double)slice * (double)clients / (double)out);
    print_overlap("bzip2-many", r.t0, r.t1, r.wall);
    free(args);
}

typedef struct bz2_dec_arg {
    many_common m; /* first */
    int file;
    size_t file_len, off, size, packed_len;
} bz2_dec_arg;

static void *bzip2_dec_worker(void *p)
{
    bz2_dec_arg *a = p;
    gpucomp_client *c = connect_client();
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.max_output = a->size;
    int in = file_to_memfd(a->file, a->file_len, a->off, a->size, "bench-bz2d-plain");
    /* the slice's bzip2 stream, made here by the CPU engine (untimed) */
    const uint8_t *plain = map_memfd(in, a->size, PROT_READ);
    bz2_options bo = { .level = 9, .threads = 1 };
    uint8_t *z = NULL;
    gc_error err = { 0 };
    if (bz2_compress(plain, a->size, &bo, &z, &a->packed_len, &err) != GC_OK) {
        fprintf(stderr, "bench_daemon: bz2_compress: %s\n", err.msg);
        exit(1);
    }
    int packed = gpucomp_memfd_create("bench-bz2d-packed");
    int out = gpucomp_memfd_create("bench-bz2d-out");
    if (packed < 0 || out < 0 || ftruncate(packed, (off_t)a->packed_len) != 0) {
        perror("memfd");
        exit(1);
    }
    uint8_t *zp = map_memfd(packed, a->packed_len, PROT_READ | PROT_WRITE);
    memcpy(zp, z, a->packed_len);
    munmap(zp, a->packed_len);
    free(z);
    size_t out_len = 0;
    pthread_barrier_wait(a->m.start);
    for (int r = 0; r < a->m.rounds; r++) {
        double t = now_s();
        int rc = gpucomp_decompress_fd(c, &o, packed, a->packed_len, out, &out_len);
        a->m.latencies[r] = now_s() - t;
        if (rc != GPUCOMP_OK)
            die("bzip2 decompress_fd", c, rc);
        a->m.on_gpu += gpucomp_last_backend(c) == GPUCOMP_BACKEND_GPU;
    }
    pthread_barrier_wait(a->m.stop);
    /* outside the timed part: the last output is the slice */
    const uint8_t *back = out_len ? map_memfd(out, out_len, PROT_READ) : NULL;
    if (out_len != a->size || memcmp(back, plain, a->size) != 0) {
        fprintf(stderr, "bench_daemon: bzip2 decompress mismatch (%zu bytes back, %zu in)\n", out_len, a->size);
        exit(1);
    }
    if (back)
        munmap((void *)back, out_len);
    munmap((void *)plain, a->size);
    close(in), close(packed), close(out);
    gpucomp_close(c);
    return NULL;
}

static void run_bzip2_dec_many(const char *path, int clients, size_t slice, int rounds)
{
    size_t len;
    int file = open_input(path, &len);
    bz2_dec_arg *args = calloc((size_t)clients, sizeof *args);
    for (int i = 0; i < clients; i++)
        args[i] = (bz2_dec_arg){ .file = file, .file_len = len, .off = ((size_t)i * slice) % len, .size = slice };
    many_result r = run_many(args, sizeof *args, clients, rounds, bzip2_dec_worker);
    size_t packed = 0;
    for (int i = 0; i < clients; i++)
        packed += args[i].packed_len;
    close(file);
    printf("| bzip2-dec-many: %d clients x %d x %zu bytes out, CPU engine -9 streams, memfd, of a %zu-byte file, "
           "gpu %d of %zu requests | aggregate %.1f MB/s decompress, latency p50 %.1f ms p99 %.1f ms; "
           "in %zu bytes, ratio %.3f; verified |\n",
           clients, rounds, slice, len, r.on_gpu, r.requests, (double)slice * (double)r.requests / r.wall / 1e6,
           r.p50 * 1e3, r.p99 * 1e3, packed, (double)slice * (double)clients / (double)packed);
    print_overlap("bzip2-dec-many", r.t0, r.t1, r.wall);
    free(args);
}

/*
 * whole: all of FILE as one whole-buffer request (a memfd, as the library
 * sends large inputs), compress (c) or decompress (d), the result written
 * to OUT; scripts/stream-bench.sh compares this with gpucomp's streams.
 * Prints "WHOLE <op> <bytes in> <bytes out> <seconds of the request>
 * <backend>" per round; the copies from FILE and to OUT are outside the
 * time. Rounds after the first send the same request again on the same
 * client and memfds, as a program reusing the library's memfds does: its
 * output goes into pages the first round allocated, which a fresh memfd's
 * first request pays for (docs/BENCHMARKS.md, "One H200").
 */
static void run_whole(const char *path, const char *out_path, const char *op, const char *codec, int level,
                      int rounds)
{
    int compress = strcmp(op, "c") == 0;
    size_t len;
    int file = open_input(path, &len);
    int in = file_to_memfd(file, len, 0, len, "bench-whole-in");
    close(file);
    int out = gpucomp_memfd_create("bench-whole-out");
    if (out < 0) {
        perror("memfd");
        exit(1);
    }
    gpucomp_options o;
    gpucomp_options_init(&o, strcmp(codec, "rle") == 0 ? GPUCOMP_CODEC_RLE : GPUCOMP_CODEC_BZIP2);
    o.level = level;
    gpucomp_client *c = connect_client();
    size_t out_len = 0;
    for (int r = 0; r < rounds; r++) {
        double t = now_s();
        int rc = compress ? gpucomp_compress_fd(c, &o, in, len, out, &out_len)
                          : gpucomp_decompress_fd(c, &o, in, len, out, &out_len);
        t = now_s() - t;
        if (rc != GPUCOMP_OK)
            die(compress ? "whole compress_fd" : "whole decompress_fd", c, rc);
        printf("WHOLE %s %zu %zu %.6f %s\n", compress ? "compress" : "decompress", len, out_len, t,
               backend_name(gpucomp_last_backend(c)));
    }
    close(in);
    int f = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f < 0) {
        fprintf(stderr, "bench_daemon: %s: %s\n", out_path, strerror(errno));
        exit(1);
    }
    if (out_len > 0) {
        const uint8_t *p = map_memfd(out, out_len, PROT_READ);
        for (size_t done = 0; done < out_len;) {
            ssize_t n = write(f, p + done, out_len - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                fprintf(stderr, "bench_daemon: writing %s: %s\n", out_path, strerror(errno));
                exit(1);
            }
            done += (size_t)n;
        }
        munmap((void *)p, out_len);
    }
    if (close(f) != 0) {
        fprintf(stderr, "bench_daemon: %s: %s\n", out_path, strerror(errno));
        exit(1);
    }
    close(out);
    gpucomp_close(c);
}

static int gen_file(const char *path, size_t len)
{
    uint8_t *buf = malloc(len);
    if (!buf)
        return 1;
    fill_runs(buf, len, 42);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f)
        fclose(f);
    free(buf);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: bench_daemon SOCKET large SIZE_MIB | many|manywarm|manyfd|manyfd-dec|manyreg CLIENTS "
                "SIZE_MIB ROUNDS | "
                "small CLIENTS SIZE_BYTES ROUNDS | bzip2-large FILE LEVEL ROUNDS | "
                "bzip2-many FILE CLIENTS SLICE_MIB LEVEL ROUNDS | bzip2-dec-many FILE CLIENTS SLICE_MIB ROUNDS | "
                "whole FILE OUT c|d bzip2|rle LEVEL [ROUNDS]\n");
        return 2;
    }
    socket_path = argv[1];
    if (strcmp(argv[2], "gen") == 0) { /* gen FILE SIZE_MIB: the same data, for other tools */
        size_t len = (size_t)atol(argv[3]) << 20;
        return gen_file(argv[1], len);
    }
    if (strcmp(argv[2], "large") == 0)
        run_large((size_t)atol(argv[3]));
    else if (strcmp(argv[2], "many") == 0 && argc >= 6)
        run_clients("many", atoi(argv[3]), (size_t)atol(argv[4]) << 20, atoi(argv[5]), 0, 0);
    else if (strcmp(argv[2], "manywarm") == 0 && argc >= 6)
        run_clients("manywarm", atoi(argv[3]), (size_t)atol(argv[4]) << 20, atoi(argv[5]), BUF_WARM, 0);
    else if (strcmp(argv[2], "manyfd") == 0 && argc >= 6)
        run_clients("manyfd", atoi(argv[3]), (size_t)atol(argv[4]) << 20, atoi(argv[5]), 1, 0);
    else if (strcmp(argv[2], "manyfd-dec") == 0 && argc >= 6)
        run_clients("manyfd-dec", atoi(argv[3]), (size_t)atol(argv[4]) << 20, atoi(argv[5]), 1, 1);
    else if (strcmp(argv[2], "manyreg") == 0 && argc >= 6)
        run_clients("manyreg", atoi(argv[3]), (size_t)atol(argv[4]) << 20, atoi(argv[5]), FD_REGISTERED, 0);
    else if (strcmp(argv[2], "small") == 0 && argc >= 6)
        run_clients("small", atoi(argv[3]), (size_t)atol(argv[4]), atoi(argv[5]), 0, 0);
    else if (strcmp(argv[2], "bzip2-large") == 0 && argc >= 6 && atoi(argv[5]) > 0)
        run_bzip2_large(argv[3], atoi(argv[4]), atoi(argv[5]));
    else if (strcmp(argv[2], "bzip2-many") == 0 && argc >= 8 && atoi(argv[4]) > 0 && atol(argv[5]) > 0 &&
             atoi(argv[7]) > 0)
        run_bzip2_many(argv[3], atoi(argv[4]), (size_t)atol(argv[5]) << 20, atoi(argv[6]), atoi(argv[7]));
    else if (strcmp(argv[2], "bzip2-dec-many") == 0 && argc >= 7 && atoi(argv[4]) > 0 && atol(argv[5]) > 0 &&
             atoi(argv[6]) > 0)
        run_bzip2_dec_many(argv[3], atoi(argv[4]), (size_t)atol(argv[5]) << 20, atoi(argv[6]));
    else if (strcmp(argv[2], "whole") == 0 && argc >= 8 &&
             (strcmp(argv[5], "c") == 0 || strcmp(argv[5], "d") == 0) &&
             (strcmp(argv[6], "bzip2") == 0 || strcmp(argv[6], "rle") == 0))
        run_whole(argv[3], argv[4], argv[5], argv[6], atoi(argv[7]),
                  argc >= 9 && atoi(argv[8]) > 0 ? atoi(argv[8]) : 1);
    else
        return 2;
    return 0;
}
