/*
 * test_gpu_rle.cu - the GPU suite for the rle codec (make check-gpu, or
 * scripts/gpu-suite.sh on a GPU host).
 *
 *   test_gpu_rle [--quick] [--big]
 *
 * Compares the CUDA backend with the CPU reference (codecs/rle/cpu) byte
 * for byte: every width, data classes random / short runs / long runs /
 * constant / mixed, sizes 0, 1, small, around chunk and tile boundaries, up
 * to 256 MiB with --big; chunk sizes 64 .. 2^22 (aligned and unaligned chunk
 * starts); both the batch pipeline (pageable and pinned buffers, slicing over
 * several pieces) and the device-resident calls. Decodes CPU and GPU frames,
 * feeds corrupt frames (flipped bytes, truncation, lying index, lying run
 * counts and lengths) and expects an error, never a crash, and runs batches
 * from several host threads, each on its own context and all on one shared
 * context. Also checks the device CRC machinery on another polynomial (zlib's
 * CRC-32) and block geometry against bitwise references.
 * --quick is a small mode for compute-sanitizer.
 * Prints PASS/FAIL per case and "N passed, N failed"; exit 1 on any failure,
 * 77 (skip) when there is no GPU.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

extern "C" {
#include "crc32c.h"
#include "gpu.h"
#include "rle.h"
}
#include "crc32c_device.cuh"

static int g_pass, g_fail;
static bool g_quick, g_big, g_verbose;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void result(bool ok, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_mu);
    if (ok) {
        g_pass++;
        if (g_verbose || !g_quick)
            printf("PASS %s\n", buf);
    } else {
        g_fail++;
        printf("FAIL %s\n", buf);
    }
    fflush(stdout);
    pthread_mutex_unlock(&g_mu);
}

/* ---- data --------------------------------------------------------------- */

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1)
    {
    }
    uint64_t next()
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
};

enum Kind { RANDOM, SHORT, LONG, CONSTANT, MIXED, NKIND };
static const char *kind_name[] = { "random", "short-runs", "long-runs", "constant", "mixed" };

static void gen(uint8_t *p, size_t n, unsigned w, Kind k, uint64_t seed)
{
    Rng r(seed);
    if (k == RANDOM) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t v = r.next();
            memcpy(p + i, &v, 8);
        }
        for (; i < n; i++)
            p[i] = (uint8_t)r.next();
        return;
    }
    uint64_t val = r.next();
    size_t i = 0;
    size_t region = 0;
    Kind cur = k;
    while (i < n) {
        if (k == MIXED && region == 0) {
            cur = (Kind)(r.next() % 4);
            region = 1 + r.next() % (1 << 18);
        }
        size_t run;
        switch (cur) {
        case RANDOM: run = 1; break;
        case SHORT: run = 1 + r.next() % 15; break; /* mean 8 */
        case LONG: run = 1 + r.next() % 511; break; /* mean 256 */
        default: run = n; break;
        }
        if (cur != CONSTANT)
            val = r.next() & (r.next() % 4 == 0 ? 0x3 : ~0ull); /* few values sometimes: equal neighbours */
        for (size_t e = 0; e < run && i < n; e++) {
            for (unsigned b = 0; b < w && i < n; b++, i++)
                p[i] = (uint8_t)(val >> (8 * b));
        }
        if (k == MIXED)
            region = region > run ? region - run : 0;
    }
}

/* ---- helpers ------------------------------------------------------------- */

struct DevBuf {
    void *p = nullptr;
    size_t n = 0;
    ~DevBuf()
    {
        if (p)
            cudaFree(p);
    }
    bool alloc(size_t bytes)
    {
        if (p)
            cudaFree(p);
        p = nullptr;
        n = bytes;
        return cudaMalloc(&p, bytes ? bytes : 16) == cudaSuccess;
    }
};

static std::vector<uint8_t> cpu_frame(const uint8_t *src, size_t n, unsigned w, uint32_t cs)
{
    rle_options o = { w, cs, 1 };
    std::vector<uint8_t> f(rle_compress_bound(n, &o));
    size_t len = 0;
    gc_error e;
    if (rle_compress(src, n, &o, f.data(), f.size(), &len, &e) != GC_OK) {
        fprintf(stderr, "CPU rle_compress failed: %s\n", e.msg);
        f.clear();
        return f;
    }
    f.resize(len);
    return f;
}

static size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* One round trip on the device-resident API. */
static void case_device(gc_gpu_ctx *ctx, const uint8_t *src, size_t n, unsigned w, uint32_t cs,
                        const std::vector<uint8_t> &ref, const char *name)
{
    rle_options o = { w, cs, 1 };
    size_t bound = rle_compress_bound(n, &o);
    size_t scr = gc_gpu_rle_scratch_size(n, &o);
    DevBuf d_src, d_dst, d_scr, d_out;
    if (!d_src.alloc(n) || !d_dst.alloc(bound) || !d_scr.alloc(scr) || !d_out.alloc(n + 16)) {
        result(false, "%s device: cudaMalloc failed", name);
        return;
    }
    cudaMemcpy(d_src.p, src, n, cudaMemcpyHostToDevice);
    cudaMemset(d_dst.p, 0xA5, bound);
    size_t flen = 0;
    gc_error e;
    int rc = gc_gpu_rle_encode_device(ctx, d_src.p, n, &o, d_dst.p, bound, &flen, d_scr.p, scr, &e);
    if (rc != GC_OK) {
        result(false, "%s device encode: %s", name, e.msg);
        return;
    }
    std::vector<uint8_t> f(flen);
    cudaMemcpy(f.data(), d_dst.p, flen, cudaMemcpyDeviceToHost);
    if (flen != ref.size() || memcmp(f.data(), ref.data(), flen) != 0) {
        result(false, "%s device encode: frame differs from CPU (len %zu vs %zu, first diff at %zu)", name, flen,
               ref.size(), first_diff(f.data(), ref.data(), std::min(flen, ref.size())));
        return;
    }
    /* decode the CPU frame (identical bytes) */
    cudaMemset(d_out.p, 0x5A, n + 16);
    size_t olen = 0;
    rc = gc_gpu_rle_decode_device(ctx, d_dst.p, flen, d_out.p, n, &olen, d_scr.p, scr, &e);
    if (rc != GC_OK) {
        result(false, "%s device decode: %s", name, e.msg);
        return;
    }
    std::vector<uint8_t> out(n + 16);
    cudaMemcpy(out.data(), d_out.p, n + 16, cudaMemcpyDeviceToHost);
    bool ok = olen == n && memcmp(out.data(), src, n) == 0;
    for (size_t i = n; i < n + 16; i++)
        ok = ok && out[i] == 0x5A;
    result(ok, "%s device round trip", name);
}

static void case_batch(gc_gpu_ctx *ctx, const uint8_t *src, size_t n, unsigned w, uint32_t cs,
                       const std::vector<uint8_t> &ref, const char *name, bool pinned)
{
    rle_options o = { w, cs, 1 };
    size_t bound = rle_compress_bound(n, &o);
    uint8_t *dst, *out, *in = (uint8_t *)src;
    if (pinned) {
        if (cudaMallocHost(&dst, bound + 1) != cudaSuccess || cudaMallocHost(&out, n + 1) != cudaSuccess ||
            cudaMallocHost(&in, n + 1) != cudaSuccess) {
            result(false, "%s batch: cudaMallocHost failed", name);
            return;
        }
        memcpy(in, src, n);
    } else {
        dst = (uint8_t *)malloc(bound + 1);
        out = (uint8_t *)malloc(n + 1);
    }
    gc_gpu_job j[2];
    memset(j, 0, sizeof j);
    j[0].codec = GC_GPU_CODEC_RLE;
    j[0].op = GC_GPU_ENCODE;
    j[0].src = in;
    j[0].src_len = n;
    j[0].opt.rle = o;
    j[0].dst = dst;
    j[0].dst_cap = bound;
    gc_error e;
    gc_gpu_batch_stats st;
    int rc = gc_gpu_run_batch(ctx, j, 1, &st, &e);
    bool ok = rc == GC_OK && j[0].status == GC_OK && j[0].dst_len == ref.size() &&
              memcmp(dst, ref.data(), ref.size()) == 0;
    if (!ok)
        result(false, "%s batch%s encode: rc %d status %d (%s) len %zu vs %zu diff at %zu", name,
               pinned ? " pinned" : "", rc, j[0].status, rc ? e.msg : j[0].err.msg, j[0].dst_len, ref.size(),
               first_diff(dst, ref.data(), std::min(j[0].dst_len, ref.size())));
    else
        result(true, "%s batch%s encode", name, pinned ? " pinned" : "");
    /* decode the reference frame */
    memcpy(dst, ref.data(), ref.size());
    memset(&j[1], 0, sizeof j[1]);
    j[1].codec = GC_GPU_CODEC_RLE;
    j[1].op = GC_GPU_DECODE;
    j[1].src = dst;
    j[1].src_len = ref.size();
    j[1].dst = out;
    j[1].dst_cap = n;
    rc = gc_gpu_run_batch(ctx, &j[1], 1, &st, &e);
    ok = rc == GC_OK && j[1].status == GC_OK && j[1].dst_len == n && memcmp(out, src, n) == 0;
    result(ok, "%s batch%s decode%s%s", name, pinned ? " pinned" : "", ok ? "" : ": ",
           ok ? "" : (rc ? e.msg : j[1].err.msg));
    if (pinned) {
        cudaFreeHost(dst);
        cudaFreeHost(out);
        cudaFreeHost(in);
    } else {
        free(dst);
        free(out);
    }
}

/* ---- corrupt frames --------------------------------------------------------- */

static void fix_header_crc(std::vector<uint8_t> &f)
{
    uint32_t cc;
    memcpy(&cc, f.data() + 20, 4);
    size_t h = 32 + 4ull * cc;
    if (h + 4 > f.size())
        return;
    uint32_t c = crc32c(f.data(), h);
    memcpy(f.data() + h, &c, 4);
}

static int gpu_decode_status(gc_gpu_ctx *ctx, const std::vector<uint8_t> &f, size_t orig, bool device,
                             std::string *msg)
{
    gc_error e;
    if (device) {
        DevBuf d_f, d_o, d_s;
        rle_options o = { 8, 64, 1 };
        size_t scr = gc_gpu_rle_scratch_size(orig + 4096, &o);
        d_f.alloc(f.size() + 16);
        d_o.alloc(orig + 16);
        d_s.alloc(scr);
        cudaMemcpy(d_f.p, f.data(), f.size(), cudaMemcpyHostToDevice);
        size_t ol = 0;
        int rc = gc_gpu_rle_decode_device(ctx, d_f.p, f.size(), d_o.p, orig + 16, &ol, d_s.p, scr, &e);
        *msg = e.msg;
        return rc;
    }
    std::vector<uint8_t> out(orig + 16);
    gc_gpu_job j;
    memset(&j, 0, sizeof j);
    j.codec = GC_GPU_CODEC_RLE;
    j.op = GC_GPU_DECODE;
    j.src = f.data();
    j.src_len = f.size();
    j.dst = out.data();
    j.dst_cap = out.size();
    int rc = gc_gpu_run_batch(ctx, &j, 1, nullptr, &e);
    if (rc != GC_OK) {
        *msg = std::string("batch failed: ") + e.msg;
        return -1; /* device failure: a real failure of the test */
    }
    *msg = j.err.msg;
    return j.status;
}

static void test_corrupt(gc_gpu_ctx *ctx)
{
    const size_t n = g_quick ? 300000 : 3000000;
    const unsigned w = 2;
    const uint32_t cs = 8192;
    std::vector<uint8_t> src(n);
    gen(src.data(), n, w, MIXED, 77);
    std::vector<uint8_t> ref = cpu_frame(src.data(), n, w, cs);
    uint32_t cc;
    memcpy(&cc, ref.data() + 20, 4);
    size_t hsz = 32 + 4ull * cc + 4;
    std::vector<size_t> rec_off(cc + 1);
    rec_off[0] = hsz;
    for (uint32_t c = 0; c < cc; c++) {
        uint32_t s;
        memcpy(&s, ref.data() + 32 + 4 * c, 4);
        rec_off[c + 1] = rec_off[c] + s;
    }
    int rle_chunk = -1;
    for (uint32_t c = 0; c < cc && rle_chunk < 0; c++)
        if (ref[rec_off[c]] == 1)
            rle_chunk = (int)c;
    Rng r(1234);
    struct Mut {
        std::string name;
        std::vector<uint8_t> f;
    };
    std::vector<Mut> muts;
    int flips = g_quick ? 12 : 60;
    for (int i = 0; i < flips; i++) {
        Mut m{ "flip byte in records", ref };
        size_t pos = hsz + r.next() % (ref.size() - hsz);
        m.f[pos] ^= (uint8_t)(1 + r.next() % 255);
        char b[64];
        snprintf(b, sizeof b, "flip record byte %zu", pos);
        m.name = b;
        muts.push_back(m);
    }
    for (int i = 0; i < 4; i++) {
        Mut m{ "flip header byte", ref };
        m.f[r.next() % hsz] ^= 0x10;
        muts.push_back(m);
    }
    for (size_t cut : { (size_t)0, (size_t)10, hsz - 1, hsz + 5, ref.size() / 2, ref.size() - 1 }) {
        Mut m{ "truncated to " + std::to_string(cut), std::vector<uint8_t>(ref.begin(), ref.begin() + cut) };
        muts.push_back(m);
    }
    {
        Mut m{ "trailing byte", ref };
        m.f.push_back(0);
        muts.push_back(m);
    }
    for (int i = 0; i < 6 && cc >= 2; i++) {
        /* lying index: move k bytes between two entries, keep the sum, fix the header CRC */
        Mut m{ "lying index (sum kept)", ref };
        uint32_t a = (uint32_t)(r.next() % cc), b = (uint32_t)(r.next() % cc);
        if (a == b)
            b = (a + 1) % cc;
        uint32_t va, vb, k = 1 + (uint32_t)(r.next() % 40);
        memcpy(&va, m.f.data() + 32 + 4 * a, 4);
        memcpy(&vb, m.f.data() + 32 + 4 * b, 4);
        if (vb < k + 12)
            k = 1;
        va += k;
        vb -= k;
        memcpy(m.f.data() + 32 + 4 * a, &va, 4);
        memcpy(m.f.data() + 32 + 4 * b, &vb, 4);
        fix_header_crc(m.f);
        muts.push_back(m);
    }
    {
        Mut m{ "index entry below a record header", ref };
        uint32_t v = 5;
        memcpy(m.f.data() + 32, &v, 4);
        fix_header_crc(m.f);
        muts.push_back(m);
    }
    if (rle_chunk >= 0) {
        size_t ro = rec_off[rle_chunk];
        uint32_t runs;
        memcpy(&runs, ref.data() + ro + 4, 4);
        unsigned lw = ref[ro + 1];
        {
            Mut m{ "run_count lies", ref };
            uint32_t v = runs + 1;
            memcpy(m.f.data() + ro + 4, &v, 4);
            muts.push_back(m);
        }
        {
            Mut m{ "run_count huge", ref };
            uint32_t v = 0xFFFFFFF0u;
            memcpy(m.f.data() + ro + 4, &v, 4);
            muts.push_back(m);
        }
        {
            Mut m{ "len_width 3", ref };
            m.f[ro + 1] = 3;
            muts.push_back(m);
        }
        {
            Mut m{ "mode 2", ref };
            m.f[ro] = 2;
            muts.push_back(m);
        }
        {
            Mut m{ "reserved byte set", ref };
            m.f[ro + 2] = 1;
            muts.push_back(m);
        }
        {
            Mut m{ "run length too long", ref };
            size_t lp = ro + 12 + (size_t)runs * w;
            for (unsigned b = 0; b < lw; b++)
                m.f[lp + b] = 0xFF;
            muts.push_back(m);
        }
        {
            Mut m{ "run lengths swapped (sum kept, CRC catches)", ref };
            size_t lp = ro + 12 + (size_t)runs * w;
            if (runs >= 2 && lw == 1 && m.f[lp] != m.f[lp + 1]) {
                std::swap(m.f[lp], m.f[lp + 1]);
                muts.push_back(m);
            }
        }
        {
            Mut m{ "stored crc wrong", ref };
            m.f[ro + 8] ^= 1;
            muts.push_back(m);
        }
    }
    for (Mut &m : muts) {
        for (int dev = 0; dev < 2; dev++) {
            std::string msg;
            int rc = gpu_decode_status(ctx, m.f, n, dev == 1, &msg);
            /* the CPU decoder is the judge of whether the mutation is harmless */
            std::vector<uint8_t> out(n + 16);
            size_t ol = 0;
            gc_error e;
            int cpu = rle_decompress(m.f.data(), m.f.size(), 1, out.data(), out.size(), &ol, &e);
            bool ok = rc != -1 && rc != GC_E_DEVICE && rc != GC_E_INTERNAL && ((rc == GC_OK) == (cpu == GC_OK));
            result(ok, "corrupt %s (%s): gpu %d [%s], cpu %d", m.name.c_str(), dev ? "device" : "batch", rc,
                   msg.c_str(), cpu);
        }
    }
}

/* ---- mixed batches, slicing, threads ------------------------------------- */

struct Item {
    std::vector<uint8_t> src, ref, dst;
    unsigned w;
    uint32_t cs;
    bool decode;
};

static void make_items(std::vector<Item> &items, int count, uint64_t seed, size_t max_size)
{
    static const uint32_t css[] = { 64, 1000, 4096, 16392, 65536, 1u << 20 };
    Rng r(seed);
    for (int i = 0; i < count; i++) {
        Item it;
        it.w = 1u << (r.next() % 4);
        it.cs = css[r.next() % 6];
        it.cs -= it.cs % it.w;
        if (it.cs < 64)
            it.cs = 64;
        size_t n = r.next() % max_size;
        it.src.resize(n);
        gen(it.src.data(), n, it.w, (Kind)(r.next() % NKIND), r.next());
        it.ref = cpu_frame(it.src.data(), n, it.w, it.cs);
        it.decode = r.next() % 2;
        items.push_back(std::move(it));
    }
}

static bool run_items(gc_gpu_ctx *ctx, std::vector<Item> &items, std::string *why)
{
    std::vector<gc_gpu_job> jobs(items.size());
    for (size_t i = 0; i < items.size(); i++) {
        Item &it = items[i];
        gc_gpu_job &j = jobs[i];
        memset(&j, 0, sizeof j);
        if (it.decode) {
            it.dst.assign(it.src.size() + 1, 0);
            j.codec = GC_GPU_CODEC_RLE;
            j.op = GC_GPU_DECODE;
            j.src = it.ref.data();
            j.src_len = it.ref.size();
        } else {
            rle_options o = { it.w, it.cs, 1 };
            it.dst.assign(rle_compress_bound(it.src.size(), &o), 0);
            j.codec = GC_GPU_CODEC_RLE;
            j.op = GC_GPU_ENCODE;
            j.src = it.src.data();
            j.src_len = it.src.size();
            j.opt.rle = o;
        }
        j.dst = it.dst.data();
        j.dst_cap = it.dst.size();
    }
    gc_error e;
    gc_gpu_batch_stats st;
    if (gc_gpu_run_batch(ctx, jobs.data(), jobs.size(), &st, &e) != GC_OK) {
        *why = e.msg;
        return false;
    }
    for (size_t i = 0; i < items.size(); i++) {
        Item &it = items[i];
        gc_gpu_job &j = jobs[i];
        const std::vector<uint8_t> &want = it.decode ? it.src : it.ref;
        if (j.status != GC_OK || j.dst_len != want.size() || memcmp(j.dst, want.data(), want.size()) != 0) {
            char b[300];
            snprintf(b, sizeof b, "job %zu (%s w%u cs%u n%zu): status %d %s", i, it.decode ? "decode" : "encode",
                     it.w, (unsigned)it.cs, it.src.size(), j.status, j.err.msg);
            *why = b;
            return false;
        }
    }
    return true;
}

struct ThreadArg {
    gc_gpu_ctx *ctx;
    int dev;
    uint64_t seed;
    bool ok;
    std::string why;
};

static void *thread_main(void *p)
{
    ThreadArg *a = (ThreadArg *)p;
    gc_gpu_ctx *own = nullptr;
    gc_gpu_ctx *ctx = a->ctx;
    gc_error e;
    if (!ctx) {
        gc_gpu_config cfg = { 2, 2u << 20 };
        if (gc_gpu_open(a->dev, &cfg, &own, &e) != GC_OK) {
            a->ok = false;
            a->why = e.msg;
            return nullptr;
        }
        ctx = own;
    }
    a->ok = true;
    for (int round = 0; round < (g_quick ? 2 : 4) && a->ok; round++) {
        std::vector<Item> items;
        make_items(items, g_quick ? 4 : 8, a->seed * 100 + round, g_quick ? 300000 : 3000000);
        a->ok = run_items(ctx, items, &a->why);
    }
    gc_gpu_close(own);
    return nullptr;
}

static void test_threads(int dev, gc_gpu_ctx *shared)
{
    for (int mode = 0; mode < 2; mode++) {
        const int nt = 4;
        pthread_t th[nt];
        ThreadArg args[nt];
        for (int i = 0; i < nt; i++) {
            args[i].ctx = mode ? shared : nullptr;
            args[i].dev = dev;
            args[i].seed = 1000 + 10 * mode + i;
            args[i].ok = false;
            pthread_create(&th[i], nullptr, thread_main, &args[i]);
        }
        for (int i = 0; i < nt; i++) {
            pthread_join(th[i], nullptr);
            result(args[i].ok, "threads: %s, thread %d%s%s", mode ? "one shared context" : "own contexts", i,
                   args[i].ok ? "" : ": ", args[i].why.c_str());
        }
    }
}

/* ---- host-copy modes of the batch pipeline ------------------------------------ */

/* A memfd of len bytes mapped MAP_SHARED|MAP_POPULATE with prot (the daemon's
 * transport); the contents written through a separate mapping first. */
static uint8_t *memfd_map(size_t len, int prot, const uint8_t *init, int *fd)
{
    *fd = memfd_create("test-gpu-rle", MFD_CLOEXEC);
    if (*fd < 0 || ftruncate(*fd, (off_t)len) != 0)
        return nullptr;
    if (init) {
        void *w = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
        if (w == MAP_FAILED)
            return nullptr;
        memcpy(w, init, len);
        munmap(w, len);
    }
    void *p = mmap(nullptr, len, prot, MAP_SHARED | MAP_POPULATE, *fd, 0);
    return p == MAP_FAILED ? nullptr : (uint8_t *)p;
}

/* GC_GPU_COPY_THREADS / GC_GPU_COPY_NT (read by gc_gpu_open): mixed batches,
 * and a job of more than 64 MiB in memfd mappings at unaligned offsets
 * (partial pages at both ends), encode and decode, against the CPU. */
static void test_host_copy_modes(int dev)
{
    struct Mode {
        const char *name, *threads, *nt;
    } modes[] = {
        { "stage, 0 copy threads", "0", nullptr },
        { "stage, 3 copy threads, no NT", "3", "0" },
        { "stage, default copy threads", nullptr, nullptr },
    };
    const size_t n = (g_quick ? 70u << 20 : 150u << 20) + 5;
    const unsigned w = 2;
    std::vector<uint8_t> src(n);
    gen(src.data(), n, w, MIXED, 4242);
    std::vector<uint8_t> ref = cpu_frame(src.data(), n, w, RLE_DEFAULT_CHUNK_SIZE);
    rle_options o = { w, RLE_DEFAULT_CHUNK_SIZE, 1 };
    size_t bound = rle_compress_bound(n, &o);
    for (const Mode &m : modes) {
        if (m.threads)
            setenv("GC_GPU_COPY_THREADS", m.threads, 1);
        else
            unsetenv("GC_GPU_COPY_THREADS");
        if (m.nt)
            setenv("GC_GPU_COPY_NT", m.nt, 1);
        else
            unsetenv("GC_GPU_COPY_NT");
        gc_gpu_ctx *ctx = nullptr;
        gc_gpu_config cfg = { 3, 4u << 20 };
        gc_error e;
        int rc = gc_gpu_open(dev, &cfg, &ctx, &e);
        unsetenv("GC_GPU_COPY_THREADS");
        unsetenv("GC_GPU_COPY_NT");
        if (rc != GC_OK) {
            result(false, "host copy %s: gc_gpu_open: %s", m.name, e.msg);
            continue;
        }
        for (int round = 0; round < 2; round++) {
            std::vector<Item> items;
            make_items(items, g_quick ? 6 : 12, 900 + round, g_quick ? 400000 : 5000000);
            std::string why;
            bool ok = run_items(ctx, items, &why);
            result(ok, "host copy %s: mixed batch %d%s%s", m.name, round, ok ? "" : ": ", why.c_str());
        }
        int fds[3] = { -1, -1, -1 };
        std::vector<uint8_t> in(n + 3);
        memcpy(in.data() + 3, src.data(), n);
        uint8_t *mi = memfd_map(n + 3, PROT_READ, in.data(), &fds[0]);
        uint8_t *mf = memfd_map(bound + 1, PROT_READ | PROT_WRITE, nullptr, &fds[1]);
        uint8_t *mo = memfd_map(n + 5, PROT_READ | PROT_WRITE, nullptr, &fds[2]);
        if (!mi || !mf || !mo) {
            result(false, "host copy %s: memfd mappings failed", m.name);
        } else {
            gc_gpu_job j;
            memset(&j, 0, sizeof j);
            j.codec = GC_GPU_CODEC_RLE;
            j.op = GC_GPU_ENCODE;
            j.src = mi + 3;
            j.src_len = n;
            j.opt.rle = o;
            j.dst = mf + 1;
            j.dst_cap = bound;
            gc_gpu_batch_stats st;
            rc = gc_gpu_run_batch(ctx, &j, 1, &st, &e);
            bool ok = rc == GC_OK && j.status == GC_OK && j.dst_len == ref.size() &&
                      memcmp(mf + 1, ref.data(), ref.size()) == 0;
            result(ok, "host copy %s: memfd encode %zu bytes at unaligned offsets (rc %d status %d %s)", m.name, n,
                   rc, j.status, rc ? e.msg : j.err.msg);
            memset(&j, 0, sizeof j);
            j.codec = GC_GPU_CODEC_RLE;
            j.op = GC_GPU_DECODE;
            j.src = mf + 1;
            j.src_len = ref.size();
            j.dst = mo + 5;
            j.dst_cap = n;
            if (ok) {
                /* the frame in the mapping is the CPU's: decode it back */
                rc = gc_gpu_run_batch(ctx, &j, 1, &st, &e);
                ok = rc == GC_OK && j.status == GC_OK && j.dst_len == n && memcmp(mo + 5, src.data(), n) == 0;
                result(ok, "host copy %s: memfd decode (rc %d status %d %s)", m.name, rc, j.status,
                       rc ? e.msg : j.err.msg);
            }
        }
        if (mi)
            munmap(mi, n + 3);
        if (mf)
            munmap(mf, bound + 1);
        if (mo)
            munmap(mo, n + 5);
        for (int fd : fds)
            if (fd >= 0)
                close(fd);
        gc_gpu_close(ctx);
    }
}

/* ---- the device CRC machinery for other polynomials and geometries ------------------ */

/* Bitwise reflected CRC, init and final xor 0xFFFFFFFF: zlib's crc32 for
 * 0xEDB88320, crc32c for 0x82F63B78 (a reference independent of the tables).
 * bzip2's CRC-32 (0x04C11DB7 MSB-first, not reflected) would be
 * brev32(ref_crc(0xEDB88320, the bytes bit-reversed)); see gpu_internal.cuh. */
static uint32_t ref_crc(uint32_t poly, const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1u)));
    }
    return ~c;
}

/* The CRC of n bytes of src (host) computed on the device with tables Tab. */
template <class Tab>
static bool device_crc(const uint8_t *src, size_t n, uint32_t *crc, std::string *why)
{
    Tab *h_tab = (Tab *)malloc(sizeof(Tab));
    Tab *d_tab = nullptr;
    uint8_t *d_src = nullptr;
    uint32_t *d_crc = nullptr;
    void *d_scr = nullptr;
    const size_t scr = gcgpu::crc_scratch_bytes<Tab>(n);
    gc_error e;
    bool ok = false;
    cudaError_t rc = cudaErrorMemoryAllocation;
    if (h_tab) {
        gcgpu::crc_tables_build(h_tab);
        rc = cudaMalloc(&d_tab, sizeof(Tab));
    }
    if (rc == cudaSuccess)
        rc = cudaMemcpy(d_tab, h_tab, sizeof(Tab), cudaMemcpyHostToDevice);
    if (rc == cudaSuccess)
        rc = cudaMalloc(&d_src, n ? n : 1);
    if (rc == cudaSuccess && n)
        rc = cudaMemcpy(d_src, src, n, cudaMemcpyHostToDevice);
    if (rc == cudaSuccess)
        rc = cudaMalloc(&d_crc, 4);
    if (rc == cudaSuccess && scr)
        rc = cudaMalloc(&d_scr, scr);
    if (rc != cudaSuccess) {
        *why = cudaGetErrorString(rc);
    } else if (gcgpu::crc_launch(d_tab, d_src, n, d_crc, d_scr, scr, 0, &e) != GC_OK) {
        *why = e.msg;
    } else if ((rc = cudaMemcpy(crc, d_crc, 4, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        *why = cudaGetErrorString(rc);
    } else {
        ok = true;
    }
    cudaFree(d_scr);
    cudaFree(d_crc);
    cudaFree(d_src);
    cudaFree(d_tab);
    free(h_tab);
    return ok;
}

template <class Tab>
static void crc_case(const char *name, const uint8_t *src, size_t n, uint32_t want)
{
    uint32_t got = 0;
    std::string why;
    bool ok = device_crc<Tab>(src, n, &got, &why);
    result(ok && got == want, "device %s (poly %08x, %d threads) of %zu bytes: %08x, reference %08x%s%s", name,
           Tab::kPoly, Tab::kThreads, n, got, want, why.empty() ? "" : ": ", why.c_str());
}

/* One machinery, several (polynomial, geometry) pairs: zlib's CRC-32 on the rle
 * geometry and on blocks of 128 threads, and rle's CRC32C through the same
 * launcher, against bitwise references and the CPU crc32c. */
static void test_device_crc()
{
    static const uint8_t check[] = "123456789";
    result(ref_crc(gcgpu::kCrc32Poly, check, 9) == 0xCBF43926u &&
               ref_crc(gcgpu::kCrc32cPoly, check, 9) == 0xE3069283u,
           "bitwise CRC references give the catalogue check values");
    using Crc32Small = gcgpu::CrcTablesT<gcgpu::kCrc32Poly, 128>;
    const size_t sizes[] = { 0, 1, 9, 4095, 16384, 16385, (1u << 20) + 7, (5u << 20) + 3 };
    std::vector<uint8_t> buf((5u << 20) + 3);
    Rng r(1313);
    for (auto &b : buf)
        b = (uint8_t)r.next();
    for (size_t n : sizes) {
        const uint8_t *p = n == 9 ? check : buf.data();
        const uint32_t c32 = ref_crc(gcgpu::kCrc32Poly, p, n);
        crc_case<gcgpu::Crc32Tables>("crc32", p, n, c32);
        crc_case<Crc32Small>("crc32", p, n, c32);
        crc_case<gcgpu::CrcTables>("crc32c", p, n, crc32c(p, n));
    }
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            g_quick = true;
        else if (!strcmp(argv[i], "--big"))
            g_big = true;
        else if (!strcmp(argv[i], "-v"))
            g_verbose = true;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    int ndev = gc_gpu_device_count();
    printf("gc_gpu_device_count() = %d\n", ndev);
    if (ndev == 0) {
        printf("SKIP: no CUDA device\n0 passed, 0 failed\n");
        return 77;
    }
    gc_gpu_info info;
    gc_error e;
    if (gc_gpu_device_info(0, &info, &e) == GC_OK)
        printf("device 0: %s, %d SMs, cc %d.%d, %.1f GiB\n", info.name, info.sm_count, info.cc_major,
               info.cc_minor, info.total_mem / 1073741824.0);
    result(gc_gpu_device_info(ndev, &info, &e) == GC_E_INVALID, "device_info rejects device %d", ndev);

    gc_gpu_ctx *ctx = nullptr, *small = nullptr;
    gc_gpu_config cfg = { 3, 64u << 20 };
    if (gc_gpu_open(0, &cfg, &ctx, &e) != GC_OK) {
        printf("FAIL gc_gpu_open: %s\n0 passed, 1 failed\n", e.msg);
        return 1;
    }
    gc_gpu_config scfg = { 3, 1u << 20 }; /* forces several pieces per job */
    if (gc_gpu_open(0, &scfg, &small, &e) != GC_OK) {
        printf("FAIL gc_gpu_open (small): %s\n0 passed, 1 failed\n", e.msg);
        return 1;
    }

    /* sizes x widths x classes x chunk sizes */
    std::vector<size_t> sizes = { 0,  1,   2,    3,    7,    8,    15,    16,    17,    63,        64,
                                  65, 127, 1000, 4095, 4096, 4097, 16383, 16384, 16385, 65536 + 3, 100003 };
    if (g_quick)
        sizes = { 0, 1, 9, 64, 65, 1000, 4097, 16385, 100003 };
    if (!g_quick) {
        sizes.push_back((1u << 20) - 1);
        sizes.push_back((1u << 20) + 7);
        sizes.push_back(3u << 20);
        sizes.push_back((17u << 20) + 5);
    }
    std::vector<uint32_t> chunks = { 64, 72, 1000, 4096, 16392, 65536, 1u << 20, 1u << 22 };
    Rng pick(42);
    int idx = 0;
    for (size_t n : sizes) {
        for (unsigned w : { 1u, 2u, 4u, 8u }) {
            for (int k = 0; k < NKIND; k++) {
                if (g_quick && (k + idx) % NKIND >= 2)
                    continue;
                /* not every combination: a rotating choice of chunk size, always one small one */
                uint32_t cs_list[2] = { chunks[pick.next() % chunks.size()], chunks[(idx++) % 3] };
                for (uint32_t cs : cs_list) {
                    cs -= cs % w;
                    if (cs < 64)
                        cs = 64;
                    if (g_quick && n > 20000 && cs < 1000)
                        continue;
                    std::vector<uint8_t> src(n);
                    gen(src.data(), n, w, (Kind)k, n * 31 + w * 7 + k);
                    std::vector<uint8_t> ref = cpu_frame(src.data(), n, w, cs);
                    char name[160];
                    snprintf(name, sizeof name, "n=%zu w=%u %s cs=%u", n, w, kind_name[k], (unsigned)cs);
                    case_device(ctx, src.data(), n, w, cs, ref, name);
                    if (pick.next() % 3 == 0 || n <= 17)
                        case_batch((pick.next() & 1) || cs > (1u << 20) ? ctx : small, src.data(), n, w, cs, ref,
                                   name, pick.next() % 2);
                }
            }
        }
    }

    /* dense run heads inside rle chunks: every element starts a run over the first
     * eighth (or a sixteenth) of each chunk, then one long run, so run tiles cover
     * little output with 64 heads per segment, and len_width is 2 or 4 */
    for (unsigned w : { 1u, 2u, 4u, 8u }) {
        for (uint32_t cs : { 65536u, 1u << 20 }) {
            size_t n = (size_t)cs * 2 + 37 * w + 3;
            std::vector<uint8_t> src(n);
            size_t cel = cs / w, frac = (w == 8 ? 16 : 8);
            for (size_t q = 0; q * w < n; q++) {
                size_t qc = q % cel;
                uint64_t v =
                    qc < cel / frac ? (q * 0x9E3779B97F4A7C15ull) | 1 : 0x0101010101010101ull * (q / cel + 2);
                for (unsigned b = 0; b < w && q * w + b < n; b++)
                    src[q * w + b] = (uint8_t)(v >> (8 * b));
            }
            std::vector<uint8_t> ref = cpu_frame(src.data(), n, w, cs);
            char name[160];
            snprintf(name, sizeof name, "n=%zu w=%u dense-heads cs=%u", n, w, (unsigned)cs);
            case_device(ctx, src.data(), n, w, cs, ref, name);
        }
    }

    /* large: the device path over big inputs, every class, width 1 and 4 */
    std::vector<size_t> bigs;
    if (!g_quick)
        bigs.push_back(64u << 20);
    if (g_big)
        bigs.push_back(256u << 20);
    for (size_t n : bigs) {
        std::vector<uint8_t> src(n);
        for (int k = 0; k < NKIND; k++) {
            for (unsigned w : { 1u, 4u }) {
                gen(src.data(), n, w, (Kind)k, 99 + k);
                std::vector<uint8_t> ref = cpu_frame(src.data(), n, w, RLE_DEFAULT_CHUNK_SIZE);
                char name[160];
                snprintf(name, sizeof name, "n=%zu w=%u %s cs=1MiB", n, w, kind_name[k]);
                case_device(ctx, src.data(), n, w, RLE_DEFAULT_CHUNK_SIZE, ref, name);
                if (k == MIXED)
                    case_batch(ctx, src.data(), n, w, RLE_DEFAULT_CHUNK_SIZE, ref, name, w == 4);
            }
        }
    }

    /* mixed batches with slicing */
    for (int round = 0; round < (g_quick ? 2 : 6); round++) {
        std::vector<Item> items;
        make_items(items, g_quick ? 6 : 16, 500 + round, g_quick ? 400000 : 5000000);
        std::string why;
        bool ok = run_items(round % 2 ? ctx : small, items, &why);
        result(ok, "mixed batch %d (%zu jobs, %s context)%s%s", round, items.size(),
               round % 2 ? "64 MiB" : "1 MiB", ok ? "" : ": ", why.c_str());
    }

    {
        /* a chunk larger than the context's pieces: GC_E_LIMIT for that job only */
        std::vector<uint8_t> src(3u << 20);
        gen(src.data(), src.size(), 1, LONG, 5);
        rle_options o = { 1, 2u << 20, 1 };
        rle_options o2 = { 1, 1u << 16, 1 };
        std::vector<uint8_t> dst(rle_compress_bound(src.size(), &o)), dst2(rle_compress_bound(src.size(), &o2));
        gc_gpu_job j[3];
        memset(j, 0, sizeof j);
        for (int i = 0; i < 3; i++) {
            j[i].codec = GC_GPU_CODEC_RLE;
            j[i].op = GC_GPU_ENCODE;
            j[i].src = src.data();
            j[i].src_len = src.size();
            j[i].opt.rle = o;
            j[i].dst = i ? dst2.data() : dst.data();
            j[i].dst_cap = i ? dst2.size() : dst.size();
        }
        j[1].opt.rle = o2;
        j[2].codec = (gc_gpu_codec)0; /* no codec: GC_E_INVALID for that job only */
        int rc = gc_gpu_run_batch(small, j, 3, nullptr, &e);
        std::vector<uint8_t> ref = cpu_frame(src.data(), src.size(), 1, 1u << 16);
        result(rc == GC_OK && j[0].status == GC_E_LIMIT && j[1].status == GC_OK && j[1].dst_len == ref.size() &&
                   memcmp(dst2.data(), ref.data(), ref.size()) == 0 && j[2].status == GC_E_INVALID,
               "chunk larger than piece_bytes, a job of no codec: an error for that job only (%s; %s)",
               j[0].err.msg, j[2].err.msg);
    }

    test_device_crc();
    test_corrupt(ctx);
    test_corrupt(small);
    test_threads(0, ctx);
    test_host_copy_modes(0);

    gc_gpu_close(small);
    gc_gpu_close(ctx);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
