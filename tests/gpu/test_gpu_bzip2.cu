/*
 * test_gpu_bzip2.cu - the GPU suite for the bzip2 encoder (make check-gpu, or
 * scripts/gpu-suite.sh on a GPU host).
 *
 *   test_gpu_bzip2 [--quick] [--big] [-v]
 *
 * Every GPU stream must be the CPU engine's (bz2_compress, codecs/bzip2/bzip2.h)
 * byte for byte at the same level (docs/BZIP2.md is the contract), through
 * both the batch API (gc_gpu_run_batch: contexts with default settings, with
 * 32 MiB piece_bytes and with one slot; single jobs, many jobs of mixed
 * sizes and levels in one batch, pinned host buffers, a batch shared with an
 * rle job) and the device-resident call (gc_gpu_bzip2_encode_device, with
 * scratch for one and for two 32 MiB segments per piece). The CPU stream is
 * decoded with libbz2 (the oracle) and compared with the input; a GPU stream
 * that differs from it is decoded too, for the diagnostic.
 *
 * Cases, at levels 1, 5 and 9: sizes 0..5, 255, 256, 4096, random sizes up to
 * 4 MiB; inputs of exactly a block's RLE1 limit L = level*100000-19 of run-free
 * data, +-1, and twice that; runs of 3/4/5/254/255/256/259 bytes starting just
 * before, at and after the block limit, and across the 32 MiB segment
 * boundary, where a piece of the device call or the batch ends (inputs
 * slightly over 32 MiB: not in --quick); text-like data; the
 * adversarial set: one byte repeated, periods 2, 3 and 7, a repeated 1 KiB
 * record, a Fibonacci string, u^k for a 4 KiB (and longer) random u filling a
 * block exactly, random bytes; blocks that repeat with a step their length
 * does not divide, some with misses, beside blocks that do not. Too small a dst_cap fails with GC_E_LIMIT
 * (bytes past dst_cap untouched, other jobs of the batch unaffected); stage
 * counters (blocks, pieces) are checked against the block plan of section 3.
 * --quick is a small mode for compute-sanitizer (no input over 1 MiB); --big
 * adds 256 MiB inputs. -v prints PASS lines in --quick too.
 * Prints PASS/FAIL per case and "N passed, N failed"; exit 1 on any failure,
 * 77 (skip) when there is no GPU.
 */
#include <bzlib.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bzip2.h" /* the CPU engine (the reference) */
#include "gpu.h"   /* the CUDA backend's C API; brings rle.h */
#include "gpu_test_util.cuh"

static int g_pass, g_fail;
static bool g_quick, g_big, g_verbose;

static const size_t SEG = (size_t)32 << 20; /* docs/BZIP2.md section 3 */
static const size_t GUARD = 256;            /* bytes past dst_cap that must stay untouched */

static void result(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result(bool ok, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ok) {
        g_pass++;
        if (g_verbose || !g_quick)
            printf("PASS %s\n", buf);
    } else {
        g_fail++;
        printf("FAIL %s\n", buf);
    }
    fflush(stdout);
}

static size_t block_limit(int level)
{
    return (size_t)(level ? level : 9) * 100000 - 19;
}

/* ---- data --------------------------------------------------------------- */

typedef std::vector<uint8_t> Bytes;

/* Random bytes with no two equal neighbours (and p[0] != before, if given):
 * RLE1 leaves them as they are, so RLE1 offsets are input offsets. */
static void gen_norun(uint8_t *p, size_t n, uint64_t seed, int before = -1)
{
    Rng r(seed);
    int prev = before;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)r.next();
        if (b == prev)
            b ^= 0x5c;
        p[i] = b;
        prev = b;
    }
}

/* Regions of random bytes, text, runs of 1..600 and constant stretches. */
static void gen_mixed(uint8_t *p, size_t n, uint64_t seed)
{
    Rng r(seed);
    size_t i = 0;
    while (i < n) {
        size_t len = std::min(n - i, (size_t)1 + r.below(200000));
        switch (r.next() % 4) {
        case 0: gen_random(p + i, len, r.next()); break;
        case 1: gen_text(p + i, len, r.next()); break;
        case 2:
            for (size_t k = 0; k < len;) {
                size_t run = std::min(len - k, (size_t)1 + r.below(600));
                memset(p + i + k, (int)(r.next() & (r.next() & 1 ? 0x3 : 0xff)), run);
                k += run;
            }
            break;
        default: memset(p + i, (int)(r.next() & 0xff), len); break;
        }
        i += len;
    }
}

/* u^k (then a prefix of u) for a run-free random u of length period whose
 * last byte differs from its first: RLE1 leaves it unchanged. */
static void gen_period(uint8_t *p, size_t n, size_t period, uint64_t seed)
{
    Bytes u(period);
    if (period == 1) {
        u[0] = 0x41;
    } else {
        gen_norun(u.data(), period, seed);
        if (u[period - 1] == u[0])
            u[period - 1] ^= (u[period - 2] == (uint8_t)(u[0] ^ 0x33)) ? 0x66 : 0x33;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = u[i % period];
}

/* A random 1 KiB record (runs allowed inside), repeated. */
static void gen_record(uint8_t *p, size_t n, uint64_t seed)
{
    uint8_t rec[1024];
    gen_random(rec, sizeof rec, seed);
    rec[100] = rec[101] = rec[102] = rec[103] = rec[104] = 7; /* one run inside the record */
    for (size_t i = 0; i < n; i++)
        p[i] = rec[i & 1023];
}

/* The Fibonacci word over {'a','b'}: s1 = "a", s2 = "ab", s(k) = s(k-1) s(k-2). */
static void gen_fibonacci(uint8_t *p, size_t n)
{
    if (!n)
        return;
    Bytes a(1, 'a'), b = { 'a', 'b' };
    while (b.size() < n) {
        Bytes c = b;
        c.insert(c.end(), a.begin(), a.end());
        a.swap(b);
        b.swap(c);
    }
    memcpy(p, b.data(), n);
}

enum Kind { K_RANDOM, K_NORUN, K_TEXT, K_MIXED, K_CONST, K_P2, K_P3, K_P7, K_REC1K, K_FIB, K_U4K, NKIND };
static const char *const kind_name[] = { "random",      "run-free",  "text",     "mixed",
                                         "one-byte",    "period-2",  "period-3", "period-7",
                                         "1KiB-record", "fibonacci", "u^k(4KiB)" };

static Bytes gen(Kind k, size_t n, uint64_t seed)
{
    Bytes v(n);
    uint8_t *p = v.data();
    switch (k) {
    case K_RANDOM: gen_random(p, n, seed); break;
    case K_NORUN: gen_norun(p, n, seed); break;
    case K_TEXT: gen_text(p, n, seed); break;
    case K_MIXED: gen_mixed(p, n, seed); break;
    case K_CONST: memset(p, 0xE7, n); break;
    case K_P2: gen_period(p, n, 2, seed); break;
    case K_P3: gen_period(p, n, 3, seed); break;
    case K_P7: gen_period(p, n, 7, seed); break;
    case K_REC1K: gen_record(p, n, seed); break;
    case K_FIB: gen_fibonacci(p, n); break;
    default: gen_period(p, n, 4096, seed); break;
    }
    return v;
}

/* Overwrite p[at .. at+len) (clipped to n) with a run of a byte that differs
 * from its neighbours, so the run is exactly len long. */
static void put_run(Bytes &v, size_t at, size_t len)
{
    size_t end = std::min(v.size(), at + len);
    int before = at ? v[at - 1] : -1, after = end < v.size() ? v[end] : -1;
    uint8_t b = 0x21;
    while (b == before || b == after)
        b++;
    for (size_t i = at; i < end; i++)
        v[i] = b;
}

/* ---- the contract's block plan (docs/BZIP2.md section 3), for the stage counters ---- */

/* Block starts, then n: units (runs cut every 255 bytes from their start) are
 * added to a block while it holds under L RLE1 bytes; units run on across blocks. */
static std::vector<size_t> plan_starts(const uint8_t *src, size_t n, int level)
{
    const size_t L = block_limit(level);
    std::vector<size_t> st;
    size_t len = L, i = 0;
    while (i < n) {
        if (len >= L) {
            st.push_back(i);
            len = 0;
        }
        size_t r = 1;
        while (r < 255 && i + r < n && src[i + r] == src[i])
            r++;
        len += r >= 4 ? 5 : r;
        i += r;
    }
    st.push_back(n);
    return st;
}

static uint64_t plan_blocks(const uint8_t *src, size_t n, int level)
{
    return plan_starts(src, n, level).size() - 1;
}

/* Pieces of the device call: windows of `piece` bytes, each ending after its
 * last block that ends before the window's end (docs/BZIP2.md section 11). */
static uint64_t plan_pieces(const uint8_t *src, size_t n, int level, size_t piece)
{
    std::vector<size_t> st = plan_starts(src, n, level);
    uint64_t pieces = 0;
    for (size_t a = 0; a < n; pieces++) {
        if (n - a <= piece)
            break;
        size_t e = a + piece, next = e; /* no whole block: the window's end */
        for (size_t s : st)
            if (s > a && s < e)
                next = s;
        a = next;
    }
    return n ? pieces + 1 : 0;
}

/* ---- references and diagnostics ------------------------------------------------- */

static bool cpu_ref(const uint8_t *src, size_t n, int level, Bytes &out, std::string *why)
{
    bz2_options o;
    memset(&o, 0, sizeof o);
    o.level = level;
    o.threads = 0;
    uint8_t *d = nullptr;
    size_t dl = 0;
    gc_error e;
    int rc = bz2_compress(n ? src : (const uint8_t *)"", n, &o, &d, &dl, &e);
    if (rc != GC_OK) {
        *why = fmt("CPU bz2_compress failed: %s", e.msg);
        return false;
    }
    out.assign(d, d + dl);
    free(d);
    return true;
}

/* libbz2 decodes stream into exactly src[0..n)? */
static bool libbz2_check(const Bytes &stream, const uint8_t *src, size_t n, std::string *why)
{
    std::vector<char> out(n + 1);
    unsigned int olen = (unsigned int)(n + 1);
    int rc =
        BZ2_bzBuffToBuffDecompress(out.data(), &olen, (char *)stream.data(), (unsigned int)stream.size(), 0, 0);
    if (rc != BZ_OK) {
        *why = fmt("libbz2 rejects the stream (BZ2_bzBuffToBuffDecompress = %d)", rc);
        return false;
    }
    if (olen != n || (n && memcmp(out.data(), src, n) != 0)) {
        size_t i = 0;
        while (i < std::min((size_t)olen, n) && (uint8_t)out[i] == src[i])
            i++;
        *why = fmt("libbz2 decodes %u bytes, input is %zu, first difference at %zu", olen, n, i);
        return false;
    }
    return true;
}

/* Bit offsets of the block magics (0x314159265359) in a stream: for naming the
 * block of a difference only (a magic inside the data would be counted too). */
static std::vector<uint64_t> block_magics(const Bytes &s)
{
    std::vector<uint64_t> at;
    const uint64_t magic = 0x314159265359ull, mask = (1ull << 48) - 1;
    uint64_t win = 0;
    for (size_t i = 0; i < s.size(); i++) {
        for (int b = 7; b >= 0; b--) {
            win = ((win << 1) | ((s[i] >> b) & 1)) & mask;
            uint64_t end = (uint64_t)i * 8 + (7 - b) + 1;
            if (end >= 48 + 32 && win == magic)
                at.push_back(end - 48);
        }
    }
    return at;
}

/* "GPU stream N bytes vs CPU M, first difference at byte X (bit Y), in block K of B
 * of the CPU stream (its magic at bit Z); libbz2 on the GPU stream: ..." */
static std::string diff_msg(const uint8_t *got, size_t got_len, const Bytes &ref, const uint8_t *src, size_t n)
{
    size_t m = std::min(got_len, ref.size()), i = 0;
    while (i < m && got[i] == ref[i])
        i++;
    std::string s = fmt("GPU stream %zu bytes vs CPU %zu, first difference at byte %zu", got_len, ref.size(), i);
    if (i < m) {
        int bit = 0;
        while (!(((got[i] ^ ref[i]) << bit) & 0x80))
            bit++;
        uint64_t dbit = (uint64_t)i * 8 + bit;
        std::vector<uint64_t> mg = block_magics(ref);
        size_t k = 0;
        while (k < mg.size() && mg[k] <= dbit)
            k++;
        s += fmt(" (bit %llu: GPU %02x, CPU %02x)", (unsigned long long)dbit, got[i], ref[i]);
        if (k == 0)
            s += fmt(", in the stream header (before the first of %zu blocks)", mg.size());
        else
            s += fmt(", in block %zu of %zu of the CPU stream (magic at bit %llu, %llu bits into the block)",
                     k - 1, mg.size(), (unsigned long long)mg[k - 1], (unsigned long long)(dbit - mg[k - 1]));
    }
    std::string why;
    Bytes g(got, got + got_len);
    s += libbz2_check(g, src, n, &why) ? "; libbz2 decodes the GPU stream to the input" : "; GPU stream: " + why;
    return s;
}

static bool guard_ok(const uint8_t *p)
{
    for (size_t i = 0; i < GUARD; i++)
        if (p[i] != 0xA5)
            return false;
    return true;
}

/* ---- device helpers ---------------------------------------------------------------- */

struct DevBuf {
    void *p = nullptr;
    size_t n = 0;
    DevBuf() = default;
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
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

static gc_gpu_ctx *g_ctx;     /* default config: 3 streams, 64 MiB */
static gc_gpu_ctx *g_small;   /* 3 slots, 32 MiB piece_bytes */
static gc_gpu_ctx *g_one;     /* 1 stream, 32 MiB */
static size_t g_scr1, g_scr2; /* scratch sizes for one / two segments per piece */
static DevBuf g_scratch;      /* g_scr2 bytes (g_scr1 when --quick) */

/* One case through gc_gpu_bzip2_encode_device; piece_segs = segments per
 * piece the scratch is sized for (1 or 2). */
static void via_device(const char *name, const uint8_t *src, size_t n, int level, const Bytes &ref,
                       uint64_t want_blocks, unsigned piece_segs)
{
    size_t cap = gc_gpu_bzip2_encode_cap(n);
    size_t scr = piece_segs > 1 ? g_scr2 : g_scr1;
    DevBuf d_src, d_dst;
    if (!d_src.alloc(n) || !d_dst.alloc(cap + GUARD) || g_scratch.n < scr) {
        result(false, "%s device: cudaMalloc failed", name);
        return;
    }
    cudaMemcpy(d_src.p, src, n, cudaMemcpyHostToDevice);
    cudaMemset(d_dst.p, 0xA5, cap + GUARD);
    size_t len = 0;
    gc_gpu_bzip2_stages st;
    memset(&st, 0, sizeof st);
    gc_error e;
    memset(&e, 0, sizeof e);
    double t0 = now_s();
    int rc = gc_gpu_bzip2_encode_device(g_ctx, d_src.p, n, level, d_dst.p, cap, &len, g_scratch.p, scr, &st, &e);
    double dt = now_s() - t0;
    if (rc != GC_OK) {
        result(false, "%s device (%u-segment pieces): rc %d: %s", name, piece_segs, rc, e.msg);
        return;
    }
    if (len > cap) {
        result(false, "%s device: dst_len %zu > dst_cap %zu", name, len, cap);
        return;
    }
    Bytes out(len + GUARD);
    cudaMemcpy(out.data(), d_dst.p, len + GUARD, cudaMemcpyDeviceToHost); /* the guard right after the stream */
    Bytes tail(GUARD);
    cudaMemcpy(tail.data(), (uint8_t *)d_dst.p + cap, GUARD, cudaMemcpyDeviceToHost);
    if (len != ref.size() || memcmp(out.data(), ref.data(), len) != 0) {
        result(false, "%s device: %s", name, diff_msg(out.data(), len, ref, src, n).c_str());
        return;
    }
    uint64_t want_pieces = plan_pieces(src, n, level, piece_segs * SEG);
    bool st_ok = st.blocks == want_blocks && (st.pieces == want_pieces || (n == 0 && st.pieces <= 1)) &&
                 st.plan_ms >= 0 && st.bwt_ms >= 0 && st.mtf_ms >= 0 && st.tables_ms >= 0 && st.pack_ms >= 0;
    result(st_ok && guard_ok(tail.data()),
           "%s device (%u-segment pieces): identical, %zu bytes, %.1f ms; stages: %llu blocks (plan %llu), %llu "
           "pieces (want %llu)%s",
           name, piece_segs, len, dt * 1e3, (unsigned long long)st.blocks, (unsigned long long)want_blocks,
           (unsigned long long)st.pieces, (unsigned long long)want_pieces,
           guard_ok(tail.data()) ? "" : "; bytes past dst_cap overwritten");
}

struct Item {
    std::string name;
    const uint8_t *src;
    size_t n;
    int level;        /* as passed in opt (0 = 9) */
    const Bytes *ref; /* CPU stream */
    size_t cap;       /* dst_cap; < ref->size() expects GC_E_LIMIT */
};

/* Run items as one batch on ctx; one result per item (prefix names the batch). */
static void via_batch(gc_gpu_ctx *ctx, const char *ctx_name, std::vector<Item> &items, bool pinned = false)
{
    size_t total = 0, tin = 0;
    for (Item &it : items) {
        total += it.cap + GUARD;
        tin += it.n;
    }
    std::vector<gc_gpu_job> jobs(items.size());
    uint8_t *hdst = nullptr, *hsrc = nullptr;
    Bytes dst_pageable;
    if (pinned) {
        if (cudaMallocHost((void **)&hdst, total ? total : 16) != cudaSuccess ||
            cudaMallocHost((void **)&hsrc, tin ? tin : 16) != cudaSuccess) {
            result(false, "batch %s pinned: cudaMallocHost failed", ctx_name);
            if (hdst)
                cudaFreeHost(hdst);
            return;
        }
    } else {
        dst_pageable.resize(total ? total : 16);
        hdst = dst_pageable.data();
    }
    memset(hdst, 0xA5, total);
    size_t off = 0, soff = 0;
    for (size_t i = 0; i < items.size(); i++) {
        gc_gpu_job &j = jobs[i];
        memset(&j, 0, sizeof j);
        j.codec = GC_GPU_CODEC_BZIP2;
        j.op = GC_GPU_ENCODE;
        if (pinned) {
            memcpy(hsrc + soff, items[i].src, items[i].n);
            j.src = hsrc + soff;
            soff += items[i].n;
        } else {
            j.src = items[i].src;
        }
        j.src_len = items[i].n;
        j.opt.bzip2.level = items[i].level;
        j.dst = hdst + off;
        j.dst_cap = items[i].cap;
        j.status = -1;
        off += items[i].cap + GUARD;
    }
    gc_gpu_batch_stats stats;
    memset(&stats, 0, sizeof stats);
    gc_error e;
    memset(&e, 0, sizeof e);
    double t0 = now_s();
    int rc = gc_gpu_run_batch(ctx, jobs.data(), jobs.size(), &stats, &e);
    double dt = now_s() - t0;
    if (rc != GC_OK) {
        result(false, "batch on %s (%zu jobs): gc_gpu_run_batch rc %d: %s", ctx_name, jobs.size(), rc, e.msg);
    } else {
        uint64_t in_ok = 0, out_ok = 0;
        for (size_t i = 0; i < items.size(); i++) {
            const Item &it = items[i];
            const gc_gpu_job &j = jobs[i];
            bool guard = guard_ok(j.dst + j.dst_cap);
            if (it.cap < it.ref->size()) {
                result(j.status == GC_E_LIMIT && guard,
                       "%s batch on %s: dst_cap %zu < stream %zu: status %d (want GC_E_LIMIT) \"%s\"%s",
                       it.name.c_str(), ctx_name, it.cap, it.ref->size(), j.status, j.err.msg,
                       guard ? "" : "; bytes past dst_cap overwritten");
                continue;
            }
            if (j.status != GC_OK) {
                result(false, "%s batch on %s: status %d: %s", it.name.c_str(), ctx_name, j.status, j.err.msg);
                continue;
            }
            in_ok += j.src_len;
            out_ok += j.dst_len;
            if (j.dst_len != it.ref->size() || memcmp(j.dst, it.ref->data(), j.dst_len) != 0) {
                result(false, "%s batch on %s%s: %s", it.name.c_str(), ctx_name, pinned ? " pinned" : "",
                       diff_msg(j.dst, std::min(j.dst_len, j.dst_cap), *it.ref, it.src, it.n).c_str());
                continue;
            }
            result(guard, "%s batch on %s%s: identical, %zu bytes%s", it.name.c_str(), ctx_name,
                   pinned ? " pinned" : "", j.dst_len, guard ? "" : "; bytes past dst_cap overwritten");
        }
        bool st = stats.bytes_in == in_ok && stats.bytes_out == out_ok;
        result(st,
               "batch on %s%s: %zu jobs, %.1f MB in %.1f ms; stats bytes_in %llu (want %llu) bytes_out %llu "
               "(want %llu)",
               ctx_name, pinned ? " pinned" : "", items.size(), tin / 1e6, dt * 1e3,
               (unsigned long long)stats.bytes_in, (unsigned long long)in_ok, (unsigned long long)stats.bytes_out,
               (unsigned long long)out_ok);
    }
    if (pinned) {
        cudaFreeHost(hdst);
        cudaFreeHost(hsrc);
    }
}

/* A case owns its input and CPU stream (checked with libbz2 once). */
struct Case {
    std::string name;
    Bytes data;
    int level = 9;
    Bytes ref;
    bool ok = false;
};

static bool prepare(Case &c)
{
    std::string why;
    if (!cpu_ref(c.data.data(), c.data.size(), c.level, c.ref, &why) ||
        !libbz2_check(c.ref, c.data.data(), c.data.size(), &why)) {
        result(false, "%s: oracle: %s", c.name.c_str(), why.c_str());
        c.ok = false;
        return false;
    }
    c.ok = true;
    return true;
}

/* Both paths for one case: a single-job batch (context chosen by the caller)
 * and the device call (two-segment pieces above one segment, alternating). */
static void run_case(Case &c, gc_gpu_ctx *ctx, const char *ctx_name, unsigned piece_segs = 1)
{
    if (!c.ok && !prepare(c))
        return;
    uint64_t blocks = plan_blocks(c.data.data(), c.data.size(), c.level);
    std::vector<Item> items = { { c.name, c.data.data(), c.data.size(), c.level, &c.ref,
                                  gc_gpu_bzip2_encode_cap(c.data.size()) } };
    via_batch(ctx, ctx_name, items);
    via_device(c.name.c_str(), c.data.data(), c.data.size(), c.level, c.ref, blocks, piece_segs);
}

static std::string case_name(Kind k, size_t n, int level, const char *extra = "")
{
    return fmt("L%d n=%zu %s%s", level, n, kind_name[k], extra);
}

/* ---- groups of cases ------------------------------------------------------------- */

static const int g_levels[3] = { 1, 5, 9 };

static void test_small_sizes(void)
{
    const size_t sizes[] = { 0, 1, 2, 3, 4, 5, 255, 256, 4096 };
    const Kind kinds[] = { K_RANDOM, K_CONST, K_TEXT, K_P2 };
    for (int level : g_levels) {
        if (g_quick && level == 5)
            continue;
        for (size_t n : sizes) {
            if (g_quick && (n == 2 || n == 3 || n == 255))
                continue;
            for (Kind k : kinds) {
                if (g_quick && (k == K_P2 || k == K_TEXT))
                    continue;
                Case c;
                c.name = case_name(k, n, level);
                c.level = level;
                c.data = gen(k, n, n * 7 + k);
                run_case(c, (n + k) % 2 ? g_ctx : g_small, (n + k) % 2 ? "default" : "32MiB");
            }
        }
    }
}

static void test_random_sizes(void)
{
    Rng r(2024);
    int count = g_quick ? 3 : 9;
    for (int i = 0; i < count; i++) {
        size_t n = 1 + r.below(g_quick ? (size_t)300000 : (size_t)4 << 20);
        Kind k = (Kind)(i % 4); /* random, run-free, text, mixed */
        int level = g_levels[i % 3];
        Case c;
        c.name = case_name(k, n, level, " (random size)");
        c.level = level;
        c.data = gen(k, n, 1000 + i);
        run_case(c, i % 2 ? g_ctx : g_one, i % 2 ? "default" : "1-stream");
    }
}

/* Run-free inputs of exactly the block limit +-1 (one block, one block, two) and twice it. */
static void test_block_limits(void)
{
    for (int level : g_levels) {
        if (g_quick && level != 1)
            continue;
        size_t L = block_limit(level);
        std::vector<size_t> sizes = { L - 1, L, L + 1 };
        if (!g_quick) {
            sizes.push_back(2 * L - 1);
            sizes.push_back(2 * L);
            sizes.push_back(2 * L + 1);
        }
        for (size_t n : sizes) {
            Case c;
            c.name = case_name(K_NORUN, n, level, fmt(" (L%+lld)", (long long)n - (long long)L).c_str());
            c.level = level;
            c.data = gen(K_NORUN, n, n);
            uint64_t want = (n + L - 1) / L;
            uint64_t got = plan_blocks(c.data.data(), n, level);
            if (got != want)
                result(false, "%s: test bug: plan gives %llu blocks, want %llu", c.name.c_str(),
                       (unsigned long long)got, (unsigned long long)want);
            run_case(c, n % 2 ? g_ctx : g_small, n % 2 ? "default" : "32MiB");
        }
    }
}

/* Runs of several lengths starting a few bytes before, at and after the block
 * limit of run-free data: the 5-byte unit that does not fit starts the next block.
 * One batch per level holds every case (many jobs in one batch); each also
 * goes through the device call. */
static void test_runs_at_block_end(void)
{
    std::vector<size_t> runs = { 3, 4, 5, 254, 255, 256, 259 };
    std::vector<int> deltas = { -6, -5, -4, -3, -2, -1, 0, 1 };
    if (g_quick) {
        runs = { 3, 4, 5, 259 };
        deltas = { -5, -4, 0 };
    }
    for (int level : g_levels) {
        if (g_quick && level != 1)
            continue;
        size_t L = block_limit(level);
        std::vector<Case> cases;
        cases.reserve(runs.size() * deltas.size());
        for (size_t r : runs) {
            for (int d : deltas) {
                cases.emplace_back();
                Case &c = cases.back();
                size_t at = L + d;
                size_t n = at + r + 300 + (size_t)(d + 6) * 13;
                c.level = level;
                c.data = gen(K_NORUN, n, r * 100 + d + level);
                put_run(c.data, at, r);
                c.name = case_name(K_NORUN, n, level, fmt(" run %zu at L%+d", r, d).c_str());
                prepare(c);
            }
        }
        std::vector<Item> items;
        for (Case &c : cases)
            if (c.ok)
                items.push_back({ c.name, c.data.data(), c.data.size(), c.level, &c.ref,
                                  gc_gpu_bzip2_encode_cap(c.data.size()) });
        via_batch(level == 5 ? g_small : g_ctx, level == 5 ? "32MiB" : "default", items);
        for (Case &c : cases)
            if (c.ok)
                via_device(c.name.c_str(), c.data.data(), c.data.size(), c.level, c.ref,
                           plan_blocks(c.data.data(), c.data.size(), c.level), 1);
    }
}

static void test_text(void)
{
    std::vector<size_t> sizes = { 100000 };
    if (!g_quick) {
        sizes = { 1u << 20, (5u << 20) + 3 };
    }
    for (int level : g_levels) {
        for (size_t n : sizes) {
            if (g_quick && level != 1)
                continue;
            Case c;
            c.name = case_name(K_TEXT, n, level);
            c.level = level;
            c.data = gen(K_TEXT, n, 77 + n);
            run_case(c, level == 9 ? g_ctx : g_small, level == 9 ? "default" : "32MiB");
        }
    }
}

/* One byte, periods 2/3/7, a 1 KiB record, Fibonacci, u^k, random: several blocks each. */
static void test_adversarial(void)
{
    const Kind kinds[] = { K_CONST, K_P2, K_P3, K_P7, K_REC1K, K_FIB, K_U4K, K_RANDOM };
    size_t n = g_quick ? 100000 : (3u << 20) + 11;
    for (int level : g_levels) {
        if (g_quick && level != 1)
            continue;
        for (Kind k : kinds) {
            Case c;
            c.name = case_name(k, n, level);
            c.level = level;
            c.data = gen(k, n, 4242 + k);
            run_case(c, (level + k) % 2 ? g_ctx : g_small, (level + k) % 2 ? "default" : "32MiB");
        }
        if (!g_quick) {
            /* one byte for 8 MiB: RLE1 shrinks 51:1, a block covers ~45 MB at level 9 */
            Case c;
            c.level = level;
            c.data = gen(K_CONST, 8u << 20, 1);
            c.name = case_name(K_CONST, c.data.size(), level);
            run_case(c, g_ctx, "default");
        }
    }
}

/* u^k whose blocks are pure powers: u of 4 KiB random run-free bytes filling
 * a block exactly (n = L, not a power unless 4096 | L), a power filling one
 * block exactly where L has a divisor in 1000..20000 (levels 1 and 5: 4347
 * and 13513; level 9's L = 899981 is prime: then 4096 * floor(L / 4096)),
 * and u^k over three blocks and more. */
static void test_powers(void)
{
    for (int level : g_levels) {
        if (g_quick && level != 1)
            continue;
        size_t L = block_limit(level);
        size_t p = 0;
        for (size_t d = 1000; d <= 20000 && !p; d++)
            if (L % d == 0)
                p = d;
        struct {
            size_t period, n;
            const char *what;
        } v[] = { { 4096, L, "4KiB u filling a block" },
                  { p ? p : 4096, p ? L : 4096 * (L / 4096), "pure power, one block" },
                  { 4096, 3 * L + 17, "4KiB u over 4 blocks" },
                  { 65536 + 7, 2 * L + 5, "64KiB+7 u over 3 blocks" } };
        for (auto &x : v) {
            if (g_quick && x.n > 2 * L)
                continue;
            Case c;
            c.level = level;
            c.data.resize(x.n);
            gen_period(c.data.data(), x.n, x.period, x.period * 3 + level);
            c.name = fmt("L%d n=%zu u^k |u|=%zu (%s)", level, x.n, x.period, x.what);
            run_case(c, level == 5 ? g_small : g_ctx, level == 5 ? "32MiB" : "default");
        }
    }
}

/* Flip a bit in every `every`-th byte from `from` on: a period with misses. */
static void put_misses(Bytes &d, size_t from, size_t every)
{
    for (size_t i = from; i < d.size(); i += every)
        d[i] ^= 0x80;
}

/* Blocks that repeat with a step the block's length does not divide: the rotation sort's chain
 * rounds (steps below and above the first sort's depth, several in one piece, steps with a few
 * misses and one with too many, a step whose first candidate is wrong, and blocks without a
 * step beside chain blocks in one piece, whose rounds then advance by the step, not twice). */
static void test_repeats(void)
{
    const size_t n = g_quick ? 400000 : (3u << 20) + 11;
    for (int level : { 1, 9 }) {
        if (g_quick && level != 1)
            continue;
        const size_t periods[] = { 2, 5, 13, 33, 100, 1000, 5000, 65543 };
        for (size_t q : periods) {
            Case c;
            c.level = level;
            c.data.resize(n);
            gen_period(c.data.data(), n, q, q + level);
            c.name = fmt("L%d n=%zu period %zu (repeats)", level, n, q);
            run_case(c, q % 2 ? g_ctx : g_small, q % 2 ? "default" : "32MiB");
        }
        struct {
            size_t q, every;
        } near[] = { { 7, 50000 }, { 1000, 3001 }, { 100, 700 }, { 3, 99991 } };
        for (auto &x : near) {
            Case c;
            c.level = level;
            c.data.resize(n);
            gen_period(c.data.data(), n, x.q, x.q * 7 + level);
            put_misses(c.data, x.every / 2, x.every);
            c.name = fmt("L%d n=%zu period %zu, a miss every %zu (repeats)", level, n, x.q, x.every);
            run_case(c, g_ctx, "default");
        }
        /* text, period 7, text, period 5, random, period 3, period 1500: one piece */
        const size_t part = n / 7;
        Case m;
        m.level = level;
        m.data.resize(7 * part);
        uint8_t *p = m.data.data();
        gen_text(p, part, 1);
        gen_period(p + part, part, 7, 2);
        gen_text(p + 2 * part, part, 3);
        gen_period(p + 3 * part, part, 5, 4);
        gen_random(p + 4 * part, part, 5);
        gen_period(p + 5 * part, part, 3, 6);
        gen_period(p + 6 * part, part, 1500, 7);
        m.name = fmt("L%d n=%zu text and periods 7, 5, 3, 1500 in one piece (repeats)", level, m.data.size());
        run_case(m, g_ctx, "default");
        /* u of 1000 bytes whose first 32 recur at 400: the first candidate step fails */
        Case w;
        w.level = level;
        w.data.resize(n);
        Bytes u(1000);
        gen_norun(u.data(), u.size(), 99 + level);
        memcpy(u.data() + 400, u.data(), 32);
        for (size_t i = 0; i < n; i++)
            w.data[i] = u[i % u.size()];
        w.name = fmt("L%d n=%zu period 1000 whose start recurs at 400 (repeats)", level, n);
        run_case(w, g_small, "32MiB");
    }
}

/* Inputs slightly over 32 MiB (full mode): blocks cross the segment boundary as bzip2's do. */
static void test_segments(void)
{
    struct Spec {
        size_t run;      /* 0: none */
        long long start; /* run start relative to the boundary */
        size_t n;
        int level;
        const char *what;
    } specs[] = {
        { 0, 0, SEG + 1234, 9, "run-free across the segment boundary" },
        { 0, 0, SEG, 1, "exactly one segment" },
        { 0, 0, SEG + 1, 5, "one segment and one byte" },
        { 3, -1, SEG + 200000, 1, "run 3 across" },
        { 4, -2, SEG + 200000, 9, "run 4 across" },
        { 5, -4, SEG + 200000, 5, "run 5 across" },
        { 255, -100, SEG + 300001, 9, "run 255 across" },
        { 256, -255, SEG + 300001, 1, "run 256 across, one byte after" },
        { 259, -3, SEG + 300001, 5, "run 259 across" },
        { 3u << 20, -(1536 << 10), SEG + (5u << 20), 9, "3 MiB run across" },
    };
    for (auto &s : specs) {
        Case c;
        c.level = s.level;
        c.data.resize(s.n);
        /* text up to 1 MiB before the boundary, run-free bytes around it */
        size_t text_end = SEG - (1u << 20);
        gen_text(c.data.data(), text_end, s.n);
        gen_norun(c.data.data() + text_end, s.n - text_end, s.n + 1, c.data[text_end - 1]);
        if (s.run)
            put_run(c.data, (size_t)((long long)SEG + s.start), s.run);
        c.name = fmt("L%d n=%zu %s (segment)", s.level, s.n, s.what);
        bool small = &s - specs < 5 ? (&s - specs) % 2 : 1;
        run_case(c, small ? g_small : g_ctx, small ? "32MiB" : "default", (&s - specs) % 2 ? 2 : 1);
    }
    /* two segments and 5 bytes of mixed data: pieces of one and of two segments, each ending at a block start */
    Case c;
    c.level = 9;
    c.data = gen(K_MIXED, 2 * SEG + 5, 31337);
    c.name = case_name(K_MIXED, c.data.size(), 9, " (3 segments)");
    if (prepare(c)) {
        uint64_t blocks = plan_blocks(c.data.data(), c.data.size(), 9);
        via_device(c.name.c_str(), c.data.data(), c.data.size(), 9, c.ref, blocks, 1);
        via_device(c.name.c_str(), c.data.data(), c.data.size(), 9, c.ref, blocks, 2);
        std::vector<Item> items = { { c.name, c.data.data(), c.data.size(), 9, &c.ref,
                                      gc_gpu_bzip2_encode_cap(c.data.size()) } };
        via_batch(g_small, "32MiB", items); /* a job larger than the context's piece_bytes */
        via_batch(g_ctx, "default", items, true);
    }
}

/* Many jobs of mixed sizes, kinds and levels in one batch, on each context. */
static void test_mixed_batches(void)
{
    struct Ctx {
        gc_gpu_ctx *ctx;
        const char *name;
    } ctxs[] = { { g_ctx, "default" }, { g_small, "32MiB" }, { g_one, "1-stream" } };
    int round = 0;
    for (auto &cx : ctxs) {
        Rng r(555 + round);
        std::vector<Case> cases(g_quick ? 8 : 40);
        std::vector<Item> items;
        for (size_t i = 0; i < cases.size(); i++) {
            Case &c = cases[i];
            size_t n = i % 5 == 0 ? r.below(300) : 1 + r.below(g_quick ? 60000 : (i % 7 == 0 ? 6u << 20 : 900000));
            Kind k = (Kind)r.below(NKIND);
            c.level = g_levels[r.below(3)];
            c.data = gen(k, n, r.next());
            c.name = fmt("job %zu ", i) + case_name(k, n, c.level);
            if (prepare(c))
                items.push_back({ c.name, c.data.data(), n, c.level, &c.ref, gc_gpu_bzip2_encode_cap(n) });
        }
        if (round == 0 && !items.empty())
            items[0].level = 0, items[0].ref = nullptr; /* set below: level 0 means 9 */
        Case c9;
        if (round == 0 && !items.empty()) {
            c9.level = 9;
            c9.data.assign(items[0].src, items[0].src + items[0].n);
            c9.name = items[0].name + " as level 0";
            if (prepare(c9)) {
                items[0].ref = &c9.ref;
                items[0].name = c9.name;
            } else {
                items.erase(items.begin());
            }
        }
        via_batch(cx.ctx, cx.name, items, round == 1);
        round++;
    }
}

/* dst_cap too small: GC_E_LIMIT for that job only, nothing written past dst_cap;
 * an exact dst_cap fits; the device call likewise. Level 10 and a decode job fail
 * their job only; a batch shared with an rle job. */
static void test_limits(void)
{
    Case c;
    c.level = 9;
    c.data = gen(K_TEXT, g_quick ? 120000 : 1500000, 99);
    c.name = case_name(K_TEXT, c.data.size(), 9);
    Case r;
    r.level = 1;
    r.data = gen(K_RANDOM, 300000, 98);
    r.name = case_name(K_RANDOM, r.data.size(), 1);
    if (!prepare(c) || !prepare(r))
        return;
    size_t sz = c.ref.size();
    std::vector<Item> items = {
        { c.name + " dst_cap=size-1", c.data.data(), c.data.size(), 9, &c.ref, sz - 1 },
        { c.name + " dst_cap=exact", c.data.data(), c.data.size(), 9, &c.ref, sz },
        { c.name + " dst_cap=10", c.data.data(), c.data.size(), 9, &c.ref, 10 },
        { c.name + " dst_cap=0", c.data.data(), c.data.size(), 9, &c.ref, 0 },
        { c.name + " dst_cap=half", c.data.data(), c.data.size(), 9, &c.ref, sz / 2 },
        { r.name + " dst_cap=size-1 (random)", r.data.data(), r.data.size(), 1, &r.ref, r.ref.size() - 1 },
        { r.name + " dst_cap=cap", r.data.data(), r.data.size(), 1, &r.ref,
          gc_gpu_bzip2_encode_cap(r.data.size()) },
    };
    via_batch(g_ctx, "default", items);
    via_batch(g_small, "32MiB", items);

    /* device call: exact fit, one byte short, too little scratch */
    size_t n = c.data.size();
    DevBuf d_src, d_dst;
    if (!d_src.alloc(n) || !d_dst.alloc(sz + GUARD)) {
        result(false, "limits device: cudaMalloc failed");
        return;
    }
    cudaMemcpy(d_src.p, c.data.data(), n, cudaMemcpyHostToDevice);
    for (size_t cap : { sz - 1, sz, (size_t)10 }) {
        cudaMemset(d_dst.p, 0xA5, sz + GUARD);
        size_t len = 0;
        gc_error e;
        memset(&e, 0, sizeof e);
        int rc =
            gc_gpu_bzip2_encode_device(g_ctx, d_src.p, n, 9, d_dst.p, cap, &len, g_scratch.p, g_scr1, nullptr, &e);
        Bytes out(sz + GUARD);
        cudaMemcpy(out.data(), d_dst.p, sz + GUARD, cudaMemcpyDeviceToHost);
        bool guard = true;
        for (size_t i = cap; i < sz + GUARD; i++)
            guard = guard && out[i] == 0xA5;
        if (cap >= sz)
            result(rc == GC_OK && len == sz && memcmp(out.data(), c.ref.data(), sz) == 0 && guard,
                   "%s device dst_cap=exact (%zu): rc %d, %zu bytes%s", c.name.c_str(), cap, rc, len,
                   guard ? "" : "; bytes past dst_cap overwritten");
        else
            result(rc == GC_E_LIMIT && guard, "%s device dst_cap=%zu < %zu: rc %d (want GC_E_LIMIT) \"%s\"%s",
                   c.name.c_str(), cap, sz, rc, e.msg, guard ? "" : "; bytes past dst_cap overwritten");
    }
    {
        size_t len = 0;
        gc_error e;
        memset(&e, 0, sizeof e);
        int rc = gc_gpu_bzip2_encode_device(g_ctx, d_src.p, n, 9, d_dst.p, sz + GUARD, &len, g_scratch.p,
                                            g_scr1 / 2, nullptr, &e);
        result(rc != GC_OK && rc != GC_E_DEVICE,
               "%s device with half a segment's scratch: an error (rc %d \"%s\")", c.name.c_str(), rc, e.msg);
        rc = gc_gpu_bzip2_encode_device(g_ctx, d_src.p, n, 10, d_dst.p, sz + GUARD, &len, g_scratch.p, g_scr1,
                                        nullptr, &e);
        result(rc != GC_OK && rc != GC_E_DEVICE, "%s device level 10: an error (rc %d \"%s\")", c.name.c_str(), rc,
               e.msg);
    }

    /* level 10, a bzip2 decode job (of the reference stream) and an rle job beside a good bzip2 job */
    rle_options ro;
    memset(&ro, 0, sizeof ro);
    ro.width = 1;
    ro.chunk_size = 1u << 16;
    ro.threads = 1;
    Bytes rle_ref(rle_compress_bound(r.data.size(), &ro));
    size_t rle_len = 0;
    gc_error e;
    if (rle_compress(r.data.data(), r.data.size(), &ro, rle_ref.data(), rle_ref.size(), &rle_len, &e) != GC_OK) {
        result(false, "rle_compress: %s", e.msg);
        return;
    }
    size_t cap = gc_gpu_bzip2_encode_cap(n);
    Bytes d0(cap), d1(cap), d2(cap), d3(rle_ref.size());
    gc_gpu_job j[4];
    memset(j, 0, sizeof j);
    for (int i = 0; i < 4; i++) {
        j[i].codec = GC_GPU_CODEC_BZIP2;
        j[i].op = GC_GPU_ENCODE;
        j[i].src = c.data.data();
        j[i].src_len = n;
        j[i].opt.bzip2.level = 9;
        j[i].status = -1;
    }
    j[0].dst = d0.data(), j[0].dst_cap = cap;
    j[1].dst = d1.data(), j[1].dst_cap = cap, j[1].opt.bzip2.level = 10;
    j[2].dst = d2.data(), j[2].dst_cap = cap, j[2].op = GC_GPU_DECODE, j[2].src = c.ref.data(),
    j[2].src_len = c.ref.size();
    j[3].codec = GC_GPU_CODEC_RLE, j[3].src = r.data.data(), j[3].src_len = r.data.size(), j[3].opt.rle = ro;
    j[3].dst = d3.data(), j[3].dst_cap = d3.size();
    int rc = gc_gpu_run_batch(g_ctx, j, 4, nullptr, &e);
    result(rc == GC_OK && j[0].status == GC_OK && j[0].dst_len == sz && memcmp(d0.data(), c.ref.data(), sz) == 0,
           "mixed-codec batch: bzip2 job identical (rc %d, status %d, %zu bytes)", rc, j[0].status, j[0].dst_len);
    result(rc == GC_OK && j[1].status != GC_OK && j[1].status != GC_E_DEVICE,
           "mixed-codec batch: bzip2 level 10 fails its job only (status %d \"%s\")", j[1].status, j[1].err.msg);
    result(rc == GC_OK && j[2].status == GC_OK && j[2].dst_len == n && memcmp(d2.data(), c.data.data(), n) == 0,
           "mixed-codec batch: bzip2 decode job gives the input back (status %d \"%s\", %zu bytes)", j[2].status,
           j[2].err.msg, j[2].dst_len);
    result(rc == GC_OK && j[3].status == GC_OK && j[3].dst_len == rle_len &&
               memcmp(d3.data(), rle_ref.data(), rle_len) == 0,
           "mixed-codec batch: rle job identical to rle_compress (status %d \"%s\")", j[3].status, j[3].err.msg);
}

static void test_big(void)
{
    for (Kind k : { K_MIXED, K_TEXT }) {
        Case c;
        c.level = 9;
        c.data = gen(k, (256u << 20) + 77, 256 + k);
        c.name = case_name(k, c.data.size(), 9, " (--big)");
        run_case(c, k == K_MIXED ? g_ctx : g_small, k == K_MIXED ? "default" : "32MiB", 2);
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
        else {
            fprintf(stderr, "usage: %s [--quick] [--big] [-v]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    double t_start = now_s();
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

    gc_gpu_config small_cfg = { 3, 32u << 20 }, one_cfg = { 1, 32u << 20 };
    if (gc_gpu_open(0, nullptr, &g_ctx, &e) != GC_OK || gc_gpu_open(0, &small_cfg, &g_small, &e) != GC_OK ||
        gc_gpu_open(0, &one_cfg, &g_one, &e) != GC_OK) {
        printf("FAIL gc_gpu_open: %s\n0 passed, 1 failed\n", e.msg);
        return 1;
    }
    g_scr1 = gc_gpu_bzip2_scratch_size(0);
    g_scr2 = gc_gpu_bzip2_scratch_size(2 * SEG);
    result(g_scr1 > 0 && g_scr1 == gc_gpu_bzip2_scratch_size(SEG) && g_scr2 >= g_scr1,
           "gc_gpu_bzip2_scratch_size: %zu bytes for one segment (0 and 32 MiB alike), %zu for two", g_scr1,
           g_scr2);
    if (!g_scratch.alloc(g_quick ? g_scr1 : std::max(g_scr1, g_scr2))) {
        printf("FAIL cudaMalloc of %zu bytes of scratch\n%d passed, %d failed\n", g_scr2, g_pass, g_fail + 1);
        return 1;
    }

    struct {
        const char *name;
        void (*fn)(void);
        bool quick, full;
    } groups[] = {
        { "small sizes", test_small_sizes, true, true },
        { "random sizes", test_random_sizes, true, true },
        { "block limits", test_block_limits, true, true },
        { "runs at block ends", test_runs_at_block_end, true, true },
        { "text", test_text, true, true },
        { "adversarial", test_adversarial, true, true },
        { "powers", test_powers, true, true },
        { "repeats", test_repeats, true, true },
        { "dst_cap limits", test_limits, true, true },
        { "mixed batches", test_mixed_batches, true, true },
        { "segments", test_segments, false, true },
    };
    for (auto &g : groups) {
        if (g_quick ? !g.quick : !g.full)
            continue;
        double t0 = now_s();
        int f0 = g_fail;
        g.fn();
        printf("-- %s: %.1f s%s\n", g.name, now_s() - t0,
               g_fail > f0 ? fmt(", %d failed", g_fail - f0).c_str() : "");
    }
    if (g_big) {
        double t0 = now_s();
        test_big();
        printf("-- big: %.1f s\n", now_s() - t0);
    }

    gc_gpu_close(g_one);
    gc_gpu_close(g_small);
    gc_gpu_close(g_ctx);
    printf("total %.1f s\n", now_s() - t_start);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
