/*
 * test_gpu_bzip2_dec.cu - the GPU suite for the bzip2 DECODER (make check-gpu,
 * or scripts/gpu-suite.sh on a GPU host).
 *
 *   test_gpu_bzip2_dec [--quick] [--only NAME,...] [-v]
 *
 * The contract: for any input, the GPU decode must either succeed with the
 * bytes of bz2_decompress (the CPU engine, codecs/bzip2/bzip2.h) on the same
 * input, or fail exactly when the CPU engine fails, and a failing job never
 * reports output. Every case goes three ways in:
 *   grow   gc_gpu_run_batch, a GC_GPU_CODEC_BZIP2 / GC_GPU_DECODE job whose
 *          dst starts NULL / 0 and whose grow callback reallocs;
 *   fixed  the same with a fixed dst (the CPU's output size exactly, or a
 *          hint where the CPU fails) and grow NULL, GUARD bytes after dst_cap
 *          that must stay untouched;
 *   device gc_gpu_bzip2_decode_device, input and output in device memory
 *          (dst_cap as for fixed, guard bytes after it).
 * Where the CPU engine succeeds the GPU must succeed, identically. Where it
 * fails, the GPU must fail with a stream status (GC_E_CORRUPT, GC_E_TRUNCATED,
 * GC_E_CRC; GC_E_LIMIT only in the fixed and device ways, whose buffers a
 * corrupt stream may overrun) and dst_len 0. A failure of another class than
 * the CPU's is counted as a class mismatch, not a failure (the daemon reruns
 * GPU failures on the CPU).
 *
 * Cases: streams from libbz2 (levels 1, 5, 9) and the CPU engine (1, 9) of
 * sizes 0..5, 100, 4096, 899999, 900000, 900001, 1 MiB, 5 MiB, 64 MiB of text,
 * random bytes, zeros, runs of 3/4/5/254/255/256/259, one byte value, all 256
 * values, period 2; randomised blocks; concatenated streams with empty ones;
 * more candidates than one wave (> 2048 blocks); block magics inside the data
 * and crafted blocks whose Huffman bits hold the block (and end) magic; trailing
 * garbage; single-bit flips and truncations of valid streams; hostile crafted
 * blocks (origPtr >= n, code lengths 0 and 21, 1 and 7 tables, no selectors,
 * a selector past the tables, oversubscribed codes, zero runs past 900000,
 * blocks longer than their level, an empty symbol map); oversubscribed tables
 * that bzip2 decodes (tests/bz2_oversub.h); output limits (dst_cap
 * one short, a grow callback that refuses, decode_device with too little
 * room); a batch of decode jobs beside a bzip2 encode and an rle encode job.
 * --quick is a small subset for compute-sanitizer (no input over ~1 MiB);
 * --only runs the groups whose names contain one of the words (racecheck,
 * which instruments every shared-memory access, runs two groups).
 * Prints "FAIL <case>: <detail>" per failing check (PASS lines with -v), a
 * line per group, and "bzip2 decode suite: N passed, M failed (K class
 * mismatches)"; exit 1 on any failure, 77 (skip) when there is no GPU.
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

/* The CPU engine (the reference). */
#include "bz2_internal.h" /* bz2_compress_ex, BZ2_ENC_RANDOMISE */
#include "gpu.h"          /* C API, with extern "C" inside; brings rle.h */
#include "gpu_test_util.cuh"
#include "../bz2_oversub.h" /* the crafted stream bzip2 decodes */

typedef std::vector<uint8_t> Bytes;

static int g_pass, g_fail, g_mismatch;
static bool g_quick, g_verbose, g_dead; /* g_dead: GC_E_DEVICE seen, no more GPU work */
static gc_gpu_ctx *g_ctx;
static const size_t GUARD = 64; /* bytes after dst_cap that must stay untouched */
static const uint64_t BLOCK_MAGIC = 0x314159265359ull, EOS_MAGIC = 0x177245385090ull;

static void result(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result(bool ok, const char *fmt, ...)
{
    char buf[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (ok) {
        g_pass++;
        if (g_verbose)
            printf("PASS %s\n", buf);
    } else {
        g_fail++;
        printf("FAIL %s\n", buf);
    }
}

static const char *st_name(int st)
{
    return gc_status_str(st);
}

/* ---- data ------------------------------------------------------------------ */

/* Runs of exactly len bytes, neighbouring runs of different bytes. */
static void gen_runs(uint8_t *p, size_t n, size_t len, uint64_t seed)
{
    Rng r(seed);
    uint8_t prev = 0;
    for (size_t i = 0; i < n; i += len) {
        uint8_t b = (uint8_t)r.next();
        if (b == prev)
            b ^= 0x80;
        memset(p + i, b, std::min(len, n - i));
        prev = b;
    }
}

enum Kind {
    K_TEXT,
    K_RANDOM,
    K_ZEROS,
    K_R3,
    K_R4,
    K_R5,
    K_R254,
    K_R255,
    K_R256,
    K_R259,
    K_ONE,
    K_ALL256,
    K_P2,
    NKIND
};
static const char *const kind_name[] = { "text",     "random",  "zeros",   "runs3",   "runs4",
                                         "runs5",    "runs254", "runs255", "runs256", "runs259",
                                         "one-byte", "all-256", "period-2" };

static Bytes gen(Kind k, size_t n, uint64_t seed)
{
    Bytes v(n);
    uint8_t *p = v.data();
    switch (k) {
    case K_TEXT: gen_text(p, n, seed); break;
    case K_RANDOM: gen_random(p, n, seed); break;
    case K_ZEROS: memset(p, 0, n); break;
    case K_R3: gen_runs(p, n, 3, seed); break;
    case K_R4: gen_runs(p, n, 4, seed); break;
    case K_R5: gen_runs(p, n, 5, seed); break;
    case K_R254: gen_runs(p, n, 254, seed); break;
    case K_R255: gen_runs(p, n, 255, seed); break;
    case K_R256: gen_runs(p, n, 256, seed); break;
    case K_R259: gen_runs(p, n, 259, seed); break;
    case K_ONE: memset(p, 0xFF, n); break;
    case K_ALL256:
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)i;
        break;
    default:
        for (size_t i = 0; i < n; i++)
            p[i] = i & 1 ? 'b' : 'a';
        break;
    }
    return v;
}

/* ---- encoders ---------------------------------------------------------------- */

enum Enc { E_LIB1, E_LIB5, E_LIB9, E_OUR1, E_OUR9, NENC };
static const char *const enc_name[] = { "libbz2-1", "libbz2-5", "libbz2-9", "ours-1", "ours-9" };
static const int enc_level[] = { 1, 5, 9, 1, 9 };

static bool compress_lib(const Bytes &src, int level, Bytes &out)
{
    unsigned int cap = (unsigned int)(src.size() + src.size() / 100 + 1024);
    out.resize(cap);
    int rc = BZ2_bzBuffToBuffCompress((char *)out.data(), &cap,
                                      (char *)(src.empty() ? (const uint8_t *)"" : src.data()),
                                      (unsigned int)src.size(), level, 0, 0);
    if (rc != BZ_OK) {
        result(false, "setup: BZ2_bzBuffToBuffCompress(level %d, %zu bytes) = %d", level, src.size(), rc);
        out.clear();
        return false;
    }
    out.resize(cap);
    return true;
}

static bool compress_ours(const Bytes &src, int level, unsigned flags, Bytes &out)
{
    bz2_options o;
    memset(&o, 0, sizeof o);
    o.level = level;
    uint8_t *d = nullptr;
    size_t dl = 0;
    gc_error e;
    int rc = bz2_compress_ex(src.empty() ? (const uint8_t *)"" : src.data(), src.size(), &o, flags, &d, &dl, &e);
    if (rc != GC_OK) {
        result(false, "setup: bz2_compress_ex(level %d, flags %u, %zu bytes): %s", level, flags, src.size(),
               e.msg);
        out.clear();
        return false;
    }
    out.assign(d, d + dl);
    free(d);
    return true;
}

static bool compress(Enc e, const Bytes &src, Bytes &out)
{
    return e <= E_LIB9 ? compress_lib(src, enc_level[e], out) : compress_ours(src, enc_level[e], 0, out);
}

/* ---- bit writer, bzip2 CRC and a tiny block builder for crafted streams ---------- */

struct BitW {
    Bytes b;
    uint64_t n = 0;
    void bit(unsigned v)
    {
        if (n % 8 == 0)
            b.push_back(0);
        if (v & 1)
            b.back() |= (uint8_t)(0x80 >> (n % 8));
        n++;
    }
    void put(uint64_t v, int k)
    {
        for (int i = k - 1; i >= 0; i--)
            bit((unsigned)(v >> i) & 1);
    }
};

static uint32_t g_crctab[256];
static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i << 24;
        for (int k = 0; k < 8; k++)
            c = c & 0x80000000u ? (c << 1) ^ 0x04c11db7u : c << 1;
        g_crctab[i] = c;
    }
}
static uint32_t bzcrc(const Bytes &p)
{
    uint32_t c = 0xffffffffu;
    for (uint8_t b : p)
        c = (c << 8) ^ g_crctab[(c >> 24) ^ b];
    return ~c;
}
static uint32_t combine(uint32_t comb, uint32_t blk)
{
    return ((comb << 1) | (comb >> 31)) ^ blk;
}

/* Zero run of length r as RUNA (0) / RUNB (1) symbols (bijective base 2). */
static void add_run(std::vector<uint16_t> &syms, uint64_t r)
{
    if (!r)
        return;
    uint64_t z = r - 1;
    for (;;) {
        syms.push_back(z & 1 ? 1 : 0);
        if (z < 2)
            break;
        z = (z - 2) / 2;
    }
}

/* One crafted block. Symbols are MTF/RLE2 symbols without the EOB (added).
 * Every table has the same uniform code length (the smallest that fits the
 * alphabet; a canonical code then maps symbol s to the code s), unless
 * overridden. The fields the hostile cases break are written as given. */
struct CBlock {
    std::vector<uint8_t> map; /* the symbol map: used byte values, ascending */
    std::vector<uint16_t> syms;
    uint32_t orig = 0;
    bool auto_crc = true; /* the CRC of what the block decodes to (libbz2's reading) */
    uint32_t crc = 0;
    int groups = 2;                  /* nGroups as written */
    int nsel = -1;                   /* nSelectors as written (-1: one per 50 symbols) */
    int bad_sel = -1;                /* >= 0: selector 0 written as this MTF value */
    int len0_sym = -1, len0_val = 0; /* table 0, symbol len0_sym: this raw length */
    int first_len = -1;              /* >= 0: the 5-bit starting length of table 0 */
    bool oversub = false;            /* table 0: every length 1 */
    /* results of decode_ref() */
    Bytes out; /* what the block decodes to (valid blocks) */
    bool single_cycle = false;
    uint32_t n = 0;
};

/* The block's content as libbz2 reads it: inverse MTF/RLE2, the inverse BWT
 * by following T from origPtr, RLE1. */
static void decode_ref(CBlock &b)
{
    Bytes col;
    std::vector<uint8_t> mtf(b.map);
    uint64_t run = 0;
    int k = 0;
    auto flush = [&]() {
        if (run && !mtf.empty())
            col.insert(col.end(), (size_t)std::min<uint64_t>(run, 2000000), mtf[0]);
        run = 0;
        k = 0;
    };
    for (uint16_t s : b.syms) {
        if (s <= 1) {
            run += (uint64_t)(s + 1) << k;
            k++;
            continue;
        }
        flush();
        size_t pos = s - 1;
        if (pos >= mtf.size())
            return;
        uint8_t v = mtf[pos];
        mtf.erase(mtf.begin() + pos);
        mtf.insert(mtf.begin(), v);
        col.push_back(v);
    }
    flush();
    b.n = (uint32_t)col.size();
    if (col.empty() || b.orig >= col.size())
        return;
    uint32_t cnt[257] = { 0 };
    for (uint8_t c : col)
        cnt[c + 1]++;
    for (int i = 0; i < 256; i++)
        cnt[i + 1] += cnt[i];
    std::vector<uint32_t> T(col.size());
    for (uint32_t i = 0; i < col.size(); i++)
        T[cnt[col[i]]++] = i;
    Bytes content(col.size());
    std::vector<uint8_t> seen(col.size(), 0);
    uint32_t p = T[b.orig];
    size_t distinct = 0;
    for (size_t i = 0; i < col.size(); i++) {
        content[i] = col[p];
        if (!seen[p]) {
            seen[p] = 1;
            distinct++;
        }
        p = T[p];
    }
    b.single_cycle = distinct == col.size();
    /* RLE1 */
    b.out.clear();
    int last = -1, same = 0;
    for (size_t i = 0; i < content.size(); i++) {
        if (same == 4) {
            b.out.insert(b.out.end(), content[i], (uint8_t)last);
            same = 0;
            last = -1;
            continue;
        }
        uint8_t c = content[i];
        b.out.push_back(c);
        if (c == last) {
            same++;
        } else {
            last = c;
            same = 1;
        }
    }
    if (b.auto_crc)
        b.crc = bzcrc(b.out);
}

static void write_block(BitW &w, CBlock &b)
{
    decode_ref(b);
    const int alpha = (int)b.map.size() + 2, eob = alpha - 1;
    std::vector<uint16_t> syms(b.syms);
    syms.push_back((uint16_t)eob);
    w.put(BLOCK_MAGIC, 48);
    w.put(b.crc, 32);
    w.bit(0);
    w.put(b.orig, 24);
    bool used[256] = { false };
    for (uint8_t v : b.map)
        used[v] = true;
    unsigned hi = 0;
    for (int g = 0; g < 16; g++)
        for (int i = 0; i < 16; i++)
            if (used[g * 16 + i])
                hi |= 0x8000u >> g;
    w.put(hi, 16);
    for (int g = 0; g < 16; g++) {
        if (!(hi & (0x8000u >> g)))
            continue;
        unsigned lo = 0;
        for (int i = 0; i < 16; i++)
            if (used[g * 16 + i])
                lo |= 0x8000u >> i;
        w.put(lo, 16);
    }
    if (b.map.empty())
        return; /* a decoder stops here; the rest is whatever follows */
    const int tables = b.groups;
    int nsel = b.nsel >= 0 ? b.nsel : (int)((syms.size() + 49) / 50);
    w.put((uint64_t)tables & 7, 3);
    w.put((uint64_t)nsel & 0x7fff, 15);
    for (int i = 0; i < nsel; i++) {
        int j = i == 0 && b.bad_sel >= 0 ? b.bad_sel : 0;
        for (int k = 0; k < j; k++)
            w.bit(1);
        w.bit(0);
    }
    int L = 1;
    while ((1 << L) < alpha)
        L++;
    std::vector<std::vector<int>> lens(std::max(tables, 1), std::vector<int>(alpha, L));
    if (b.oversub)
        std::fill(lens[0].begin(), lens[0].end(), 1);
    if (b.len0_sym >= 0 && b.len0_sym < alpha)
        lens[0][b.len0_sym] = b.len0_val;
    for (int t = 0; t < tables; t++) {
        int cur = t == 0 && b.first_len >= 0 ? b.first_len : lens[t][0];
        w.put((uint64_t)cur, 5);
        for (int s = 0; s < alpha; s++) {
            int target = lens[t][s];
            while (cur < target) {
                w.bit(1);
                w.bit(0);
                cur++;
            }
            while (cur > target) {
                w.bit(1);
                w.bit(1);
                cur--;
            }
            w.bit(0);
            if (cur < 1 || cur > 20)
                return; /* a decoder stops here */
        }
    }
    /* canonical codes of table 0 (all symbols use it: every selector is 0) */
    std::vector<uint32_t> code(alpha, 0);
    uint32_t vec = 0;
    for (int len = 1; len <= 20; len++) {
        for (int s = 0; s < alpha; s++)
            if (lens[0][s] == len)
                code[s] = vec++;
        vec <<= 1;
    }
    for (uint16_t s : syms)
        if (lens[0][s] >= 1 && lens[0][s] <= 20)
            w.put(code[s], lens[0][s]);
}

/* A stream of the given blocks, header level as given. */
static Bytes craft_stream(std::vector<CBlock> &blocks, int level)
{
    BitW w;
    w.put('B', 8);
    w.put('Z', 8);
    w.put('h', 8);
    w.put((uint64_t)('0' + level), 8);
    uint32_t comb = 0;
    for (CBlock &b : blocks) {
        write_block(w, b);
        comb = combine(comb, b.crc);
    }
    w.put(EOS_MAGIC, 48);
    w.put(comb, 32);
    return w.b;
}

static std::vector<uint64_t> find_magic(const Bytes &s, uint64_t magic)
{
    std::vector<uint64_t> at;
    const uint64_t mask = (1ull << 48) - 1;
    uint64_t win = 0;
    for (size_t i = 0; i < s.size(); i++)
        for (int b = 7; b >= 0; b--) {
            win = ((win << 1) | ((s[i] >> b) & 1)) & mask;
            uint64_t end = (uint64_t)i * 8 + (7 - b) + 1;
            if (end >= 48 && win == magic)
                at.push_back(end - 48);
        }
    return at;
}

/* ---- the three ways in and the verdict ------------------------------------------ */

struct Case {
    std::string name;
    Bytes in;
    size_t hint = 0;  /* dst_cap of the fixed / device ways where the CPU fails */
    int want_cpu = 0; /* 1: the stream was built valid (the CPU must take it); 2: hostile */
    /* the CPU engine's verdict */
    bool ref = false;
    int cpu_rc = -1;
    Bytes cpu_out;
    std::string cpu_msg;
};

/* libbz2 on every concatenated stream (BZ2_bzBuffToBuffDecompress stops after
 * the first): BZ_OK and the output, or libbz2's error. */
static int libbz2_all(const Bytes &in, Bytes &out)
{
    out.clear();
    size_t at = 0;
    int rc = BZ_OK;
    do {
        bz_stream z;
        memset(&z, 0, sizeof z);
        if (BZ2_bzDecompressInit(&z, 0, 0) != BZ_OK)
            return BZ_MEM_ERROR;
        z.next_in = (char *)in.data() + at;
        z.avail_in = (unsigned int)(in.size() - at);
        char buf[1 << 16];
        do {
            z.next_out = buf;
            z.avail_out = sizeof buf;
            rc = BZ2_bzDecompress(&z);
            out.insert(out.end(), buf, buf + (sizeof buf - z.avail_out));
        } while (rc == BZ_OK && (z.avail_in || z.avail_out == 0));
        at = in.size() - z.avail_in;
        BZ2_bzDecompressEnd(&z);
        if (rc == BZ_OK)
            rc = BZ_UNEXPECTED_EOF;
    } while (rc == BZ_STREAM_END && at < in.size());
    return rc == BZ_STREAM_END ? BZ_OK : rc;
}

static void cpu_ref(Case &c)
{
    if (c.ref)
        return;
    c.ref = true;
    uint8_t *d = nullptr;
    size_t dl = 0;
    gc_error e;
    memset(&e, 0, sizeof e);
    c.cpu_rc = bz2_decompress(c.in.empty() ? (const uint8_t *)"" : c.in.data(), c.in.size(), 0, 0, &d, &dl, &e);
    if (c.cpu_rc == GC_OK)
        c.cpu_out.assign(d, d + dl);
    else
        c.cpu_msg = e.msg;
    free(d);
    if (c.want_cpu == 1) {
        /* libbz2 as a second opinion on the crafting: both rejecting is a bug of
         * this test; a disagreement is the CPU engine's business (a NOTE), the
         * GPU is held to the CPU engine either way */
        Bytes o;
        int rc = libbz2_all(c.in, o);
        size_t ol = o.size();
        bool same = rc == BZ_OK && c.cpu_rc == GC_OK && o == c.cpu_out;
        if (rc != BZ_OK && c.cpu_rc != GC_OK)
            result(false, "setup %s: crafted to be valid, but libbz2 (%d) and the CPU engine (%s) reject it",
                   c.name.c_str(), rc, c.cpu_msg.c_str());
        else if (!same)
            printf("NOTE %s: libbz2 (%d, %zu bytes) and the CPU engine (%s, %zu bytes) disagree on this stream\n",
                   c.name.c_str(), rc, ol, st_name(c.cpu_rc), c.cpu_out.size());
    }
    if (c.want_cpu == 2 && c.cpu_rc == GC_OK && g_verbose)
        printf("NOTE %s: hostile stream accepted by the CPU engine (%zu bytes)\n", c.name.c_str(),
               c.cpu_out.size());
}

static int g_class_lines;

/* One verdict. st/out/out_len: what the GPU gave; limit_ok: GC_E_LIMIT stands for
 * a failure here (a fixed buffer); extra: a problem found by the caller. */
static void judge(const Case &c, const char *way, int st, const char *msg, const uint8_t *out, size_t out_len,
                  bool limit_ok, const std::string &extra)
{
    const char *nm = c.name.c_str();
    if (st == GC_E_DEVICE)
        g_dead = true;
    if (c.cpu_rc == GC_OK) {
        if (st != GC_OK) {
            result(false, "%s [%s]: GPU %s \"%s\", CPU ok (%zu bytes)", nm, way, st_name(st), msg,
                   c.cpu_out.size());
            return;
        }
        if (out_len != c.cpu_out.size() || (out_len && memcmp(out, c.cpu_out.data(), out_len) != 0)) {
            size_t m = std::min(out_len, c.cpu_out.size()), i = 0;
            while (i < m && out[i] == c.cpu_out[i])
                i++;
            result(false, "%s [%s]: GPU %zu bytes vs CPU %zu, first difference at byte %zu%s", nm, way, out_len,
                   c.cpu_out.size(), i, extra.c_str());
            return;
        }
        result(extra.empty(), "%s [%s]: identical, %zu bytes%s", nm, way, out_len, extra.c_str());
        return;
    }
    if (st == GC_OK) {
        result(false, "%s [%s]: GPU accepts (%zu bytes), CPU fails: %s \"%s\"", nm, way, out_len,
               st_name(c.cpu_rc), c.cpu_msg.c_str());
        return;
    }
    if (out_len) {
        result(false, "%s [%s]: failed (%s) but reports %zu bytes of output", nm, way, st_name(st), out_len);
        return;
    }
    bool stream_class = st == GC_E_CORRUPT || st == GC_E_TRUNCATED || st == GC_E_CRC;
    if (!stream_class && !(limit_ok && st == GC_E_LIMIT)) {
        result(false, "%s [%s]: GPU fails with %s \"%s\" (not a stream failure); CPU %s \"%s\"", nm, way,
               st_name(st), msg, st_name(c.cpu_rc), c.cpu_msg.c_str());
        return;
    }
    if (stream_class && st != c.cpu_rc) {
        g_mismatch++;
        if (g_verbose || g_class_lines++ < 25)
            printf("CLASS %s [%s]: GPU %s \"%s\", CPU %s \"%s\"\n", nm, way, st_name(st), msg, st_name(c.cpu_rc),
                   c.cpu_msg.c_str());
    }
    result(extra.empty(), "%s [%s]: both fail (GPU %s, CPU %s)%s", nm, way, st_name(st), st_name(c.cpu_rc),
           extra.c_str());
}

/* The grow callback: realloc, recording calls; refuses (with status refuse_st)
 * any len above refuse_above. */
struct GrowState {
    unsigned calls = 0;
    size_t last = 0;
    bool shrank = false; /* called with a smaller len than before */
    size_t refuse_above = SIZE_MAX;
    int refuse_st = GC_E_NOMEM;
};

static int grow_cb(gc_gpu_job *job, size_t len, gc_error *err)
{
    GrowState *g = (GrowState *)job->user;
    g->calls++;
    if (len < g->last)
        g->shrank = true;
    g->last = len;
    if (len > g->refuse_above)
        return gc_fail(err, (gc_status)g->refuse_st, "test: grow to %zu bytes refused", len);
    uint8_t *p = (uint8_t *)realloc(job->dst, len ? len : 1);
    if (!p)
        return gc_fail(err, GC_E_NOMEM, "test: realloc of %zu bytes failed", len);
    job->dst = p;
    job->dst_cap = len;
    return GC_OK;
}

static size_t fixed_cap(const Case &c)
{
    return c.cpu_rc == GC_OK ? c.cpu_out.size() : c.hint;
}

static void init_job(gc_gpu_job &j, const Case &c)
{
    memset(&j, 0, sizeof j);
    j.codec = GC_GPU_CODEC_BZIP2;
    j.op = GC_GPU_DECODE;
    j.src = c.in.empty() ? (const uint8_t *)"" : c.in.data();
    j.src_len = c.in.size();
    j.status = -1;
    j.dst_len = (size_t)-1;
}

static bool batch_rc(int rc, const gc_error &e, size_t n, const char *way, const std::string &first)
{
    if (rc == GC_OK)
        return true;
    if (rc == GC_E_DEVICE)
        g_dead = true;
    result(false, "batch of %zu jobs [%s] (first %s): gc_gpu_run_batch %s \"%s\"", n, way, first.c_str(),
           st_name(rc), e.msg);
    return false;
}

static void run_grow(std::vector<Case *> &cs)
{
    std::vector<gc_gpu_job> jobs(cs.size());
    std::vector<GrowState> gs(cs.size());
    for (size_t i = 0; i < cs.size(); i++) {
        init_job(jobs[i], *cs[i]);
        jobs[i].grow = grow_cb;
        jobs[i].user = &gs[i];
    }
    gc_gpu_batch_stats stats;
    memset(&stats, 0, sizeof stats);
    gc_error e;
    memset(&e, 0, sizeof e);
    int rc = gc_gpu_run_batch(g_ctx, jobs.data(), jobs.size(), &stats, &e);
    if (batch_rc(rc, e, cs.size(), "grow", cs[0]->name)) {
        uint64_t in_ok = 0, out_ok = 0;
        for (size_t i = 0; i < cs.size(); i++) {
            gc_gpu_job &j = jobs[i];
            std::string extra;
            if (j.status == GC_OK) {
                in_ok += j.src_len;
                out_ok += j.dst_len;
                if (j.dst_len > j.dst_cap)
                    extra += fmt("; dst_len %zu > dst_cap %zu", j.dst_len, j.dst_cap);
                if (j.dst_len && !j.dst)
                    extra += "; output without a buffer";
            }
            if (gs[i].shrank)
                extra += "; grow called with a smaller len than before";
            judge(*cs[i], "grow", j.status, j.err.msg, j.dst,
                  j.status == GC_OK ? std::min(j.dst_len, j.dst_cap) : j.dst_len, false, extra);
        }
        if (stats.bytes_in != in_ok || stats.bytes_out != out_ok)
            result(false,
                   "batch of %zu jobs [grow] (first %s): stats %llu in / %llu out, successful jobs %llu / %llu",
                   cs.size(), cs[0]->name.c_str(), (unsigned long long)stats.bytes_in,
                   (unsigned long long)stats.bytes_out, (unsigned long long)in_ok, (unsigned long long)out_ok);
    }
    for (gc_gpu_job &j : jobs)
        free(j.dst);
}

static void run_fixed(std::vector<Case *> &cs)
{
    std::vector<gc_gpu_job> jobs(cs.size());
    std::vector<uint8_t *> bufs(cs.size());
    for (size_t i = 0; i < cs.size(); i++) {
        size_t cap = fixed_cap(*cs[i]);
        bufs[i] = (uint8_t *)malloc(cap + GUARD);
        if (!bufs[i]) {
            result(false, "%s [fixed]: malloc of %zu bytes failed", cs[i]->name.c_str(), cap + GUARD);
            for (size_t k = 0; k < i; k++)
                free(bufs[k]);
            return;
        }
        memset(bufs[i] + cap, 0xA5, GUARD);
        init_job(jobs[i], *cs[i]);
        jobs[i].dst = bufs[i];
        jobs[i].dst_cap = cap;
    }
    gc_error e;
    memset(&e, 0, sizeof e);
    int rc = gc_gpu_run_batch(g_ctx, jobs.data(), jobs.size(), nullptr, &e);
    if (batch_rc(rc, e, cs.size(), "fixed", cs[0]->name)) {
        for (size_t i = 0; i < cs.size(); i++) {
            gc_gpu_job &j = jobs[i];
            size_t cap = fixed_cap(*cs[i]);
            std::string extra;
            for (size_t k = 0; k < GUARD; k++)
                if (bufs[i][cap + k] != 0xA5) {
                    extra = fmt("; bytes past dst_cap %zu overwritten", cap);
                    break;
                }
            if (j.dst != bufs[i] || j.dst_cap != cap)
                extra += "; dst / dst_cap changed without a grow callback";
            judge(*cs[i], "fixed", j.status, j.err.msg, bufs[i],
                  j.status == GC_OK ? std::min(j.dst_len, cap) : j.dst_len, true,
                  j.status == GC_OK && j.dst_len > cap ? extra + fmt("; dst_len %zu > dst_cap", j.dst_len)
                                                       : extra);
        }
    }
    for (uint8_t *p : bufs)
        free(p);
}

struct DevBuf {
    void *p = nullptr;
    size_t n = 0;
    DevBuf() = default;
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    ~DevBuf()
    {
        release();
    }
    void release()
    {
        if (p)
            cudaFree(p);
        p = nullptr;
        n = 0;
    }
    bool reserve(size_t bytes)
    {
        if (p && n >= bytes)
            return true;
        release();
        if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
            p = nullptr;
            cudaGetLastError();
            return false;
        }
        n = bytes ? bytes : 16;
        return true;
    }
};

static DevBuf g_din, g_dout;

static void run_device(Case &c)
{
    size_t cap = fixed_cap(c);
    if (!g_din.reserve(c.in.size() + 16) || !g_dout.reserve(cap + GUARD)) {
        result(false, "%s [device]: cudaMalloc of %zu + %zu bytes failed", c.name.c_str(), c.in.size(),
               cap + GUARD);
        return;
    }
    if (!c.in.empty())
        cudaMemcpy(g_din.p, c.in.data(), c.in.size(), cudaMemcpyHostToDevice);
    cudaMemset((uint8_t *)g_dout.p + cap, 0xA5, GUARD);
    size_t len = (size_t)-1;
    gc_gpu_bzip2_dec_stages stg;
    memset(&stg, 0, sizeof stg);
    gc_error e;
    memset(&e, 0, sizeof e);
    int rc = gc_gpu_bzip2_decode_device(g_ctx, g_din.p, c.in.size(), g_dout.p, cap, &len, &stg, &e);
    if (rc == GC_E_DEVICE) {
        g_dead = true;
        result(false, "%s [device]: GC_E_DEVICE \"%s\"", c.name.c_str(), e.msg);
        return;
    }
    std::string extra;
    Bytes out;
    if (rc == GC_OK) {
        if (len > cap)
            extra += fmt("; dst_len %zu > dst_cap %zu", len, cap);
        out.resize(std::min(len, cap));
        if (!out.empty())
            cudaMemcpy(out.data(), g_dout.p, out.size(), cudaMemcpyDeviceToHost);
    }
    uint8_t guard[GUARD];
    cudaError_t ce = cudaMemcpy(guard, (uint8_t *)g_dout.p + cap, GUARD, cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess) {
        g_dead = true;
        result(false, "%s [device]: cudaMemcpy after the decode: %s", c.name.c_str(), cudaGetErrorString(ce));
        return;
    }
    for (size_t k = 0; k < GUARD; k++)
        if (guard[k] != 0xA5) {
            extra += fmt("; bytes past dst_cap %zu overwritten", cap);
            break;
        }
    if (rc == GC_OK && stg.candidates < stg.blocks)
        extra += fmt("; stages: %llu blocks > %llu candidates", (unsigned long long)stg.blocks,
                     (unsigned long long)stg.candidates);
    if (rc == GC_OK && stg.candidates > 2048 && stg.waves < 2)
        extra += fmt("; stages: %llu candidates in %llu waves", (unsigned long long)stg.candidates,
                     (unsigned long long)stg.waves);
    if (g_verbose && rc == GC_OK)
        printf("     %s [device]: %llu candidates, %llu blocks, %llu streams, %llu waves\n", c.name.c_str(),
               (unsigned long long)stg.candidates, (unsigned long long)stg.blocks, (unsigned long long)stg.streams,
               (unsigned long long)stg.waves);
    judge(c, "device", rc, e.msg, out.data(), rc == GC_OK ? out.size() : len, true, extra);
}

/* All three ways for a list of cases: batches of up to 128 jobs / 256 MiB. */
static void run_cases(std::vector<Case> &cs)
{
    for (Case &c : cs)
        cpu_ref(c);
    size_t i = 0;
    while (i < cs.size() && !g_dead) {
        std::vector<Case *> part;
        size_t bytes = 0;
        while (i < cs.size() && part.size() < 128 &&
               (part.empty() || bytes + cs[i].in.size() + fixed_cap(cs[i]) < (256u << 20))) {
            bytes += cs[i].in.size() + fixed_cap(cs[i]);
            part.push_back(&cs[i++]);
        }
        run_grow(part);
        if (!g_dead)
            run_fixed(part);
        for (Case *c : part)
            if (!g_dead)
                run_device(*c);
    }
}

static void run_one(Case &c)
{
    std::vector<Case> v;
    v.push_back(std::move(c));
    run_cases(v);
}

static Case make_case(const std::string &name, Bytes in, size_t hint = 0, int want = 0)
{
    Case c;
    c.name = name;
    c.in = std::move(in);
    c.hint = hint;
    c.want_cpu = want;
    return c;
}

/* ---- the groups ---------------------------------------------------------------- */

static void test_matrix(void)
{
    std::vector<size_t> small = { 0, 1, 2, 3, 4, 5, 100, 4096 };
    std::vector<Kind> kinds;
    std::vector<Enc> encs;
    if (g_quick) {
        small = { 0, 1, 4, 100, 4096 };
        kinds = { K_TEXT, K_RANDOM, K_ZEROS, K_R255, K_ALL256 };
        encs = { E_LIB9, E_OUR1 };
    } else {
        for (int k = 0; k < NKIND; k++)
            kinds.push_back((Kind)k);
        for (int e = 0; e < NENC; e++)
            encs.push_back((Enc)e);
    }
    std::vector<Case> cs;
    for (size_t n : small)
        for (Kind k : kinds) {
            Bytes data = gen(k, n, 1000 + n * 31 + k);
            for (Enc e : encs) {
                Bytes s;
                if (compress(e, data, s))
                    cs.push_back(make_case(fmt("%s %s %zu", enc_name[e], kind_name[k], n), std::move(s)));
            }
        }
    run_cases(cs);
    cs.clear();
    /* the block boundaries: every class and encoder (quick: one) */
    std::vector<size_t> mid = { 899999, 900000, 900001 };
    if (g_quick)
        mid = { 900001 };
    for (size_t n : mid)
        for (Kind k : kinds) {
            if (g_quick && k != K_TEXT && k != K_ZEROS)
                continue;
            Bytes data = gen(k, n, 2000 + n + k);
            for (Enc e : encs) {
                Bytes s;
                if (compress(e, data, s))
                    cs.push_back(make_case(fmt("%s %s %zu", enc_name[e], kind_name[k], n), std::move(s)));
            }
            if (cs.size() >= 20) {
                run_cases(cs);
                cs.clear();
            }
        }
    run_cases(cs);
    cs.clear();
    if (g_quick)
        return;
    /* 1 MiB and 5 MiB: every class, the encoders in turn */
    for (size_t n : { (size_t)1 << 20, (size_t)5 << 20 }) {
        for (int k = 0; k < NKIND; k++) {
            Enc e = (Enc)((k + (n >> 20)) % NENC);
            Bytes s;
            if (compress(e, gen((Kind)k, n, 3000 + k), s))
                cs.push_back(make_case(fmt("%s %s %zu", enc_name[e], kind_name[k], n), std::move(s)));
        }
        run_cases(cs);
        cs.clear();
    }
    /* 64 MiB */
    const size_t big = (size_t)64 << 20;
    struct {
        Kind k;
        Enc e;
    } bigs[] = { { K_TEXT, E_OUR9 }, { K_RANDOM, E_OUR1 }, { K_ZEROS, E_LIB9 }, { K_R259, E_OUR9 } };
    for (auto &b : bigs) {
        Bytes s;
        if (compress(b.e, gen(b.k, big, 4000 + b.k), s)) {
            Case c = make_case(fmt("%s %s %zu", enc_name[b.e], kind_name[b.k], big), std::move(s));
            run_one(c);
        }
    }
}

static void test_randomised(void)
{
    struct {
        Kind k;
        size_t n;
        int level;
    } rs[] = { { K_TEXT, 1000, 9 },     { K_RANDOM, 2000, 1 },    { K_R255, 300000, 9 }, { K_TEXT, 250000, 1 },
               { K_ALL256, 600000, 5 }, { K_ZEROS, 5u << 20, 1 }, { K_R4, 900001, 9 },   { K_P2, 4, 1 } };
    std::vector<Case> cs;
    for (auto &r : rs) {
        if (g_quick && r.n > 300000)
            continue;
        Bytes s;
        if (compress_ours(gen(r.k, r.n, 5000 + r.n), r.level, BZ2_ENC_RANDOMISE, s))
            cs.push_back(
                make_case(fmt("randomised ours-%d %s %zu", r.level, kind_name[r.k], r.n), std::move(s), 0, 1));
    }
    run_cases(cs);
}

static Bytes empty_stream(void)
{
    Bytes s;
    compress_lib(Bytes(), 9, s);
    return s;
}

static Bytes cat(std::initializer_list<const Bytes *> parts)
{
    Bytes v;
    for (const Bytes *p : parts)
        v.insert(v.end(), p->begin(), p->end());
    return v;
}

static void test_multistream(void)
{
    Bytes e0 = empty_stream(), a, b, c, d;
    result(e0.size() == 14, "empty stream is 14 bytes (%zu)", e0.size());
    compress(E_OUR1, gen(K_TEXT, 150000, 61), a);
    compress(E_LIB5, gen(K_RANDOM, 5000, 62), b);
    compress(E_LIB9, gen(K_R255, 70000, 63), c);
    compress_ours(gen(K_TEXT, 3000, 64), 9, BZ2_ENC_RANDOMISE, d);
    std::vector<Case> cs;
    cs.push_back(make_case("multi a+empty+b", cat({ &a, &e0, &b })));
    cs.push_back(make_case("multi empty+a", cat({ &e0, &a })));
    cs.push_back(make_case("multi a+empty", cat({ &a, &e0 })));
    cs.push_back(make_case("multi empty+empty", cat({ &e0, &e0 })));
    cs.push_back(make_case("multi a+b+c+d(randomised)+empty+a", cat({ &a, &b, &c, &d, &e0, &a })));
    cs.push_back(make_case("multi b x3", cat({ &b, &b, &b })));
    /* like pbzip2: a 1 MB input in 100 kB streams, each its own stream */
    {
        Bytes data = gen(K_TEXT, 1000000, 65), all;
        for (size_t off = 0; off < data.size(); off += 100000) {
            Bytes part(data.begin() + off, data.begin() + std::min(data.size(), off + 100000)), s;
            compress(off % 200000 ? E_LIB9 : E_OUR9, part, s);
            all.insert(all.end(), s.begin(), s.end());
            if (off == 500000)
                all.insert(all.end(), e0.begin(), e0.end());
        }
        cs.push_back(make_case("multi pbzip2-like 10 x 100kB + empty", std::move(all)));
    }
    /* trailing garbage and broken second streams: the CPU fails, so must the GPU */
    Bytes magic = { 0x31, 0x41, 0x59, 0x26, 0x53, 0x59 }, bz = { 'B', 'Z' }, bzh = { 'B', 'Z', 'h' },
          bzh0 = { 'B', 'Z', 'h', '0' }, bzh9 = { 'B', 'Z', 'h', '9' }, zero = { 0 };
    size_t hint = 300000;
    cs.push_back(make_case("trailing block magic after a stream", cat({ &a, &magic }), hint));
    cs.push_back(make_case("trailing 'BZh9'+block magic after a stream", cat({ &a, &bzh9, &magic }), hint));
    cs.push_back(make_case("trailing 'BZ' after a stream", cat({ &a, &bz }), hint));
    cs.push_back(make_case("trailing 'BZh' after a stream", cat({ &a, &bzh }), hint));
    cs.push_back(make_case("trailing 'BZh9' after a stream", cat({ &a, &bzh9 }), hint));
    cs.push_back(make_case("trailing 'BZh0' after a stream", cat({ &a, &bzh0 }), hint));
    cs.push_back(make_case("trailing zero byte after a stream", cat({ &a, &zero }), hint));
    cs.push_back(make_case("trailing zero byte after an empty stream", cat({ &e0, &zero }), hint));
    cs.push_back(make_case("empty input", Bytes(), hint));
    cs.push_back(make_case("input 'BZh9'", bzh9, hint));
    cs.push_back(make_case("input 'BZh9'+block magic", cat({ &bzh9, &magic }), hint));
    run_cases(cs);
}

/* > 2048 candidates: more than one wave. */
static void test_waves(void)
{
    std::vector<Case> cs;
    {
        /* 3000 tiny streams (one block each) */
        Bytes all, s;
        for (int i = 0; i < 3000; i++) {
            compress(i % 3 ? E_OUR1 : E_LIB1, gen(i % 2 ? K_TEXT : K_RANDOM, 1 + i % 97, 7000 + i), s);
            all.insert(all.end(), s.begin(), s.end());
        }
        cs.push_back(make_case("waves: 3000 tiny streams", std::move(all)));
    }
    {
        /* level-1 text, 2100 blocks of ~100 kB (210 MB of output) */
        Bytes s;
        if (compress(E_OUR1, gen(K_TEXT, 210000000, 71), s))
            cs.push_back(make_case("waves: ours-1 text 210000000 (2100 blocks)", std::move(s)));
    }
    run_cases(cs);
}

/* Data holding the block magic at every bit offset, compressed; crafted blocks
 * whose Huffman bits carry the block magic and the end-of-stream magic. */
static void test_false_positives(void)
{
    std::vector<Case> cs;
    {
        Bytes data = gen(K_TEXT, g_quick ? 60000 : 400000, 81);
        Rng r(82);
        for (size_t at = 100; at + 8 < data.size(); at += 37 + r.below(200)) {
            int shift = (int)r.below(8);
            uint64_t w = BLOCK_MAGIC << (16 - shift); /* 64-bit window, magic at bit shift from the top */
            for (int k = 0; k < 7; k++)
                data[at + k] = (uint8_t)((data[at + k] & (k == 0 ? (0xFF00 >> shift) & 0xFF : 0)) |
                                         (uint8_t)(w >> (56 - 8 * k)));
        }
        for (Enc e : { E_LIB1, E_OUR1, E_LIB9 }) {
            Bytes s;
            if (compress(e, data, s))
                cs.push_back(make_case(fmt("magics in data, %s", enc_name[e]), std::move(s)));
        }
        /* the raw data, magics and all, after a valid stream */
        Bytes s;
        compress(E_OUR9, gen(K_TEXT, 5000, 83), s);
        Bytes v = cat({ &s, &data });
        cs.push_back(make_case("stream then raw data full of magics", std::move(v), 100000));
    }
    /* crafted: the magic inside the block's Huffman bits, shifted by k bits */
    Rng r(84);
    for (uint64_t magic : { BLOCK_MAGIC, EOS_MAGIC }) {
        for (int k = 0; k < 8; k++) {
            if (g_quick && k % 3)
                continue;
            bool found = false;
            for (int attempt = 0; attempt < 20000 && !found; attempt++) {
                CBlock b;
                for (int v = 1; v <= 254; v++)
                    b.map.push_back((uint8_t)v); /* alphabet 256: 8-bit codes, code = symbol */
                size_t pre = 2 + r.below(12), post = 2 + r.below(12);
                for (size_t i = 0; i < pre; i++)
                    b.syms.push_back((uint16_t)(2 + r.below(253)));
                /* 7 symbol bytes whose bits hold the magic at bit k (k = 0: 6 bytes) */
                unsigned __int128 win = (unsigned __int128)magic << (8 - k);
                size_t nb = k ? 7 : 6;
                if (!k)
                    win = (unsigned __int128)magic;
                bool ok = true;
                for (size_t i = 0; i < nb && ok; i++) {
                    unsigned v = (unsigned)(win >> (8 * (nb - 1 - i))) & 0xFF;
                    if (k && i == 0)
                        v |= (unsigned)(0xFF00 >> k) & 0xFF & (unsigned)(r.next() | 0x80);
                    if (k && i == nb - 1)
                        v |= (unsigned)r.next() & ((1u << (8 - k)) - 1);
                    if (v < 2 || v > 254)
                        ok = false;
                    b.syms.push_back((uint16_t)v);
                }
                if (!ok)
                    continue;
                for (size_t i = 0; i < post; i++)
                    b.syms.push_back((uint16_t)(2 + r.below(253)));
                b.orig = (uint32_t)r.below(b.syms.size());
                decode_ref(b);
                bool runs4 = false;
                for (size_t i = 3; i < b.out.size(); i++)
                    runs4 = runs4 ||
                            (b.out[i] == b.out[i - 1] && b.out[i] == b.out[i - 2] && b.out[i] == b.out[i - 3]);
                if (!b.single_cycle || runs4 || b.out.size() != b.syms.size())
                    continue;
                found = true;
                std::vector<CBlock> bl(1, b);
                Bytes s = craft_stream(bl, 1);
                /* besides the real one (the block at bit 32, or the end of stream) */
                bool has = find_magic(s, magic).size() >= 2;
                if (!has) {
                    result(false, "setup: crafted stream lacks the magic (shift %d)", k);
                    continue;
                }
                const char *mn = magic == BLOCK_MAGIC ? "block" : "end";
                cs.push_back(make_case(fmt("crafted %s magic in Huffman bits, shift %d", mn, k), s, 0, 1));
                /* the same block twice, and after a normal stream */
                std::vector<CBlock> two(2, b);
                cs.push_back(make_case(fmt("crafted %s magic in Huffman bits, shift %d, 2 blocks", mn, k),
                                       craft_stream(two, 1), 0, 1));
                Bytes n1;
                compress(E_LIB1, gen(K_TEXT, 20000, 85 + k), n1);
                cs.push_back(make_case(fmt("crafted %s magic in Huffman bits, shift %d, after a stream", mn, k),
                                       cat({ &n1, &s }), 0, 1));
            }
            if (!found)
                result(false, "setup: no single-cycle block with the magic at shift %d", k);
        }
    }
    run_cases(cs);
}

/* Single-bit flips and truncations of valid streams. */
static void test_corrupt(void)
{
    struct Src {
        std::string name;
        Bytes s;
        size_t out;
    };
    std::vector<Src> srcs;
    {
        Bytes d = gen(K_TEXT, g_quick ? 120000 : 250000, 91), s;
        compress(E_LIB1, d, s);
        srcs.push_back({ fmt("libbz2-1 text %zu", d.size()), s, d.size() });
    }
    if (!g_quick) {
        Bytes d = gen(K_RANDOM, 60000, 92), d2 = gen(K_R259, 60000, 93), s;
        d.insert(d.end(), d2.begin(), d2.end());
        compress(E_OUR9, d, s);
        srcs.push_back({ fmt("ours-9 random+runs %zu", d.size()), s, d.size() });
        Bytes t = gen(K_TEXT, 150000, 94);
        compress_ours(t, 1, BZ2_ENC_RANDOMISE, s);
        srcs.push_back({ "randomised ours-1 text 150000", s, t.size() });
        Bytes a, b, e0 = empty_stream();
        compress(E_OUR1, gen(K_TEXT, 30000, 95), a);
        compress(E_LIB5, gen(K_RANDOM, 5000, 96), b);
        srcs.push_back({ "multi ours-1 text 30000 + empty + libbz2-5 random 5000", cat({ &a, &e0, &b }), 35000 });
    }
    const int flips = g_quick ? 20 : 200, truncs = g_quick ? 10 : 30;
    for (Src &src : srcs) {
        std::vector<Case> cs;
        size_t hint = src.out + (64u << 10);
        Rng r(97 + src.s.size());
        for (int i = 0; i < flips; i++) {
            uint64_t bit = r.below(src.s.size() * 8);
            Bytes v = src.s;
            v[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
            cs.push_back(
                make_case(fmt("%s flip bit %llu", src.name.c_str(), (unsigned long long)bit), std::move(v), hint));
        }
        std::vector<uint64_t> eos = find_magic(src.s, EOS_MAGIC), blk = find_magic(src.s, BLOCK_MAGIC);
        uint64_t eos_bit = eos.empty() ? src.s.size() * 8 - 80 : eos.back();
        size_t L = src.s.size(), eb = (size_t)(eos_bit / 8);
        /* header, block header, just before the end-of-stream marker, inside it and inside the stream CRC first */
        std::vector<size_t> cuts = { 1, 3, 4,  5,  10,     eb,     eb + 3, eb + 7, L - 1,  40,
                                     2, 8, 14, 20, eb + 1, eb + 5, eb + 6, eb + 8, eb + 9, L - 2 };
        if (blk.size() > 1)
            cuts.push_back((size_t)(blk[1] / 8)); /* at the second block */
        if (!blk.empty())
            cuts.push_back((size_t)(blk[0] / 8) + 200); /* inside the first block */
        while (cuts.size() < (size_t)truncs)
            cuts.push_back(1 + r.below(L - 1));
        cuts.resize(truncs);
        for (size_t cut : cuts)
            if (cut < L)
                cs.push_back(make_case(fmt("%s truncated to %zu of %zu bytes", src.name.c_str(), cut, L),
                                       Bytes(src.s.begin(), src.s.begin() + cut), hint));
        run_cases(cs);
        if (g_dead)
            return;
    }
}

/* Hostile crafted blocks: the CPU engine fails them; so must the GPU. */
static void test_hostile(void)
{
    /* a valid block of 5 byte values (symbols 0..5; 6 is the EOB): a BWT
     * column that is one cycle, its content free of RLE1 runs */
    CBlock valid;
    {
        Rng r(131);
        for (int attempt = 0; attempt < 100000; attempt++) {
            CBlock b;
            b.map = { 'a', 'b', 'c', 'd', 'e' };
            for (int i = 0; i < 60; i++)
                b.syms.push_back((uint16_t)(r.below(8) < 2 ? r.below(2) : 2 + r.below(4)));
            b.orig = (uint32_t)r.below(40);
            decode_ref(b);
            bool runs4 = false;
            for (size_t i = 3; i < b.out.size(); i++)
                runs4 =
                    runs4 || (b.out[i] == b.out[i - 1] && b.out[i] == b.out[i - 2] && b.out[i] == b.out[i - 3]);
            if (b.single_cycle && !runs4 && b.orig < b.n) {
                valid = b;
                break;
            }
        }
        if (valid.syms.empty())
            result(false, "setup: no valid base block found");
    }
    auto base = [&]() { return valid; };
    std::vector<Case> cs;
    auto add = [&](const std::string &name, CBlock b, int level, int want) {
        std::vector<CBlock> v(1, b);
        cs.push_back(make_case(name, craft_stream(v, level), 1u << 20, want));
    };
    {
        add("crafted baseline block (valid)", base(), 9, 1);
        add("crafted baseline block (valid) at level 1", base(), 1, 1);
        std::vector<CBlock> three(3, base());
        cs.push_back(make_case("crafted 3 baseline blocks (valid)", craft_stream(three, 9), 0, 1));
    }
    /* Columns of several cycles: bzip2 follows origPtr's cycle n steps, going
     * round it, and the GPU repeats that cycle's bytes; the inverse BWT's
     * ranking must leave the splitter segments off origPtr's cycle out (the
     * larger blocks have hundreds of them). */
    for (size_t syms : { (size_t)60, (size_t)3000, (size_t)40000 }) {
        Rng r(137 + syms);
        CBlock found;
        for (int attempt = 0; attempt < 2000 && found.syms.empty(); attempt++) {
            CBlock b;
            for (int c = 0; c < 26; c++)
                b.map.push_back((uint8_t)('a' + c));
            for (size_t i = 0; i < syms; i++)
                b.syms.push_back((uint16_t)(2 + r.below(25))); /* never a run: MTF position 1..25 */
            b.orig = (uint32_t)r.below(syms);
            decode_ref(b);
            bool runs4 = false;
            for (size_t i = 3; i < b.out.size() && !runs4; i++)
                runs4 = b.out[i] == b.out[i - 1] && b.out[i] == b.out[i - 2] && b.out[i] == b.out[i - 3];
            if (!b.single_cycle && !runs4 && b.orig < b.n)
                found = b;
        }
        if (found.syms.empty())
            result(false, "setup: no %zu-symbol block of several cycles", syms);
        else
            add("crafted block of several cycles, " + std::to_string(syms) + " symbols", found, 9, 1);
    }
    {
        CBlock b = base();
        b.orig = b.n; /* base() is decoded: n is its column length */
        add("hostile origPtr = n", b, 9, 2);
        b.orig = 0xFFFFFF;
        add("hostile origPtr = 2^24-1", b, 9, 2);
    }
    {
        CBlock b = base();
        b.len0_sym = 3, b.len0_val = 0;
        add("hostile code length 0 (mid-table)", b, 9, 2);
        b.len0_sym = -1, b.first_len = 0;
        add("hostile code length 0 (first)", b, 9, 2);
        b.first_len = -1, b.len0_sym = 4, b.len0_val = 21;
        add("hostile code length 21", b, 9, 2);
        b.len0_sym = -1, b.first_len = 21;
        add("hostile code length 21 (first)", b, 9, 2);
        b.first_len = 31;
        add("hostile code length 31 (first)", b, 9, 2);
    }
    {
        CBlock b = base();
        b.oversub = true;
        add("hostile oversubscribed code (all lengths 1)", b, 9, 2);
    }
    {
        /* bzip2 decodes oversubscribed tables (codes that do not fit their
         * length are never produced): one whose used codes fit is valid */
        Bytes o(BZ2_OVERSUB_CAP);
        o.resize(bz2_oversub_stream(o.data(), o.size()));
        cs.push_back(make_case("crafted oversubscribed tables (valid, bzip2 decodes it)", o, 0, 1));
        static const int sets[][6] = {
            { 1, 1, 1, 1, 1, 20 }, { 2, 2, 2, 2, 2, 1 },     { 10, 10, 10, 10, 1, 1 },
            { 1, 2, 3, 4, 5, 5 },  { 12, 12, 11, 11, 1, 1 },
        };
        for (const auto &l : sets) {
            Bytes h(BZ2_OVERSUB_CAP);
            h.resize(bz2_oversub_stream_with(h.data(), h.size(), l));
            cs.push_back(
                make_case(fmt("oversubscribed table %d %d %d %d %d %d", l[0], l[1], l[2], l[3], l[4], l[5]), h,
                          1u << 10, 0));
        }
    }
    for (int g : { 0, 1, 7 }) {
        CBlock b = base();
        b.groups = g;
        add(fmt("hostile nGroups %d", g), b, 9, 2);
    }
    for (int g : { 3, 6 }) {
        CBlock b = base();
        b.groups = g;
        add(fmt("crafted nGroups %d (valid)", g), b, 9, 0);
    }
    {
        CBlock b = base();
        b.nsel = 0;
        add("hostile nSelectors 0", b, 9, 2);
        b.nsel = 1;
        add("hostile too few selectors (1 for 61 symbols)", b, 9, 2);
        b.nsel = 5;
        add("crafted extra selectors (5 for 61 symbols)", b, 9, 0);
        b.nsel = 18010;
        add("crafted 18010 selectors (past the 18002 limit)", b, 9, 0);
        b.nsel = 32767;
        add("crafted 32767 selectors", b, 9, 0);
    }
    for (int g : { 2, 6 }) {
        CBlock b = base();
        b.groups = g;
        b.bad_sel = g;
        add(fmt("hostile selector %d with %d tables", g, g), b, 9, 2);
    }
    {
        CBlock b;
        b.syms = base().syms;
        add("hostile empty symbol map", b, 9, 2);
    }
    {
        /* zero runs: exactly 900000 (the largest block) is valid at level 9 only */
        CBlock b;
        b.map = { 'a' };
        add_run(b.syms, 900000);
        b.orig = 0;
        add("crafted zero run of 900000 (max block, level 9)", b, 9, 1);
        add("hostile zero run of 900000 at level 8", b, 8, 2);
        add("hostile zero run of 900000 at level 1", b, 1, 2);
        CBlock c;
        c.map = { 'a' };
        add_run(c.syms, 900001);
        add("hostile zero run of 900001", c, 9, 2);
        CBlock d;
        d.map = { 'a' };
        for (int i = 0; i < 20; i++)
            d.syms.push_back(0); /* all RUNA: 2^20 - 1 */
        add("hostile all-RUNA run of 1048575", d, 9, 2);
        CBlock f;
        f.map = { 'a' };
        for (int i = 0; i < 40; i++)
            f.syms.push_back(1); /* all RUNB: 2^41 - 2 */
        add("hostile all-RUNB run of 2^41-2", f, 9, 2);
        CBlock g;
        g.map = { 'a', 'b' };
        add_run(g.syms, 450000);
        g.syms.push_back(2);
        add_run(g.syms, 450000);
        add("hostile two runs totalling 900001", g, 9, 2);
    }
    {
        /* a block longer than its level: libbz2 level 9 relabelled as level 1 */
        Bytes d(100001);
        Rng r(101);
        for (size_t i = 0; i < d.size(); i++) {
            d[i] = (uint8_t)r.next();
            if (i && d[i] == d[i - 1])
                d[i] ^= 0x5c;
        }
        Bytes s;
        compress_lib(Bytes(d.begin(), d.begin() + 100000), 9, s);
        s[3] = '1';
        cs.push_back(make_case("relabelled BZh9 -> BZh1, block of 100000 (fits)", s, 1u << 20, 1));
        compress_lib(d, 9, s);
        s[3] = '1';
        cs.push_back(make_case("hostile relabelled BZh9 -> BZh1, block of 100001", s, 1u << 20, 2));
        compress_lib(gen(K_TEXT, 150000, 102), 9, s);
        s[3] = '1';
        cs.push_back(make_case("hostile relabelled BZh9 -> BZh1, text block of 150000", s, 1u << 20, 2));
        compress_lib(gen(K_TEXT, 800000, 103), 9, s);
        s[3] = '7';
        cs.push_back(make_case("hostile relabelled BZh9 -> BZh7, text block of 800000", s, 1u << 20, 2));
    }
    run_cases(cs);
}

/* Output limits: a fixed dst one byte short, a grow callback that refuses,
 * decode_device with too little room. */
static void test_limits(void)
{
    Bytes data = gen(K_TEXT, 1500000, 111), s;
    if (!compress(E_OUR9, data, s))
        return;
    const size_t n = data.size();
    for (size_t cap : { n - 1, (size_t)0, n / 2 }) {
        uint8_t *buf = (uint8_t *)malloc(cap + GUARD);
        memset(buf + cap, 0xA5, GUARD);
        gc_gpu_job j;
        memset(&j, 0, sizeof j);
        j.codec = GC_GPU_CODEC_BZIP2;
        j.op = GC_GPU_DECODE;
        j.src = s.data();
        j.src_len = s.size();
        j.dst = buf;
        j.dst_cap = cap;
        j.dst_len = (size_t)-1;
        gc_error e;
        int rc = gc_gpu_run_batch(g_ctx, &j, 1, nullptr, &e);
        bool guard = true;
        for (size_t k = 0; k < GUARD; k++)
            guard = guard && buf[cap + k] == 0xA5;
        if (rc == GC_E_DEVICE)
            g_dead = true;
        result(rc == GC_OK && j.status == GC_E_LIMIT && j.dst_len == 0 && guard,
               "limits: fixed dst_cap %zu for %zu bytes, grow NULL: rc %s, status %s (want GC_E_LIMIT), dst_len "
               "%zu%s",
               cap, n, st_name(rc), st_name(j.status), j.dst_len, guard ? "" : ", bytes past dst_cap overwritten");
        free(buf);
        if (g_dead)
            return;
    }
    for (int refuse : { GC_E_NOMEM, GC_E_LIMIT, GC_E_IO }) {
        for (size_t above : { (size_t)0, n / 2, n - 1 }) {
            GrowState g;
            g.refuse_above = above;
            g.refuse_st = refuse;
            gc_gpu_job j;
            memset(&j, 0, sizeof j);
            j.codec = GC_GPU_CODEC_BZIP2;
            j.op = GC_GPU_DECODE;
            j.src = s.data();
            j.src_len = s.size();
            j.grow = grow_cb;
            j.user = &g;
            j.dst_len = (size_t)-1;
            gc_error e;
            int rc = gc_gpu_run_batch(g_ctx, &j, 1, nullptr, &e);
            if (rc == GC_E_DEVICE)
                g_dead = true;
            result(rc == GC_OK && j.status == refuse && j.dst_len == 0 && g.calls >= 1,
                   "limits: grow refusing above %zu with %s (output %zu): status %s \"%s\", dst_len %zu, %u calls",
                   above, st_name(refuse), n, st_name(j.status), j.err.msg, j.dst_len, g.calls);
            free(j.dst);
            if (g_dead)
                return;
        }
    }
    /* a grow that allows everything: one or more calls, growing len */
    {
        GrowState g;
        gc_gpu_job j;
        memset(&j, 0, sizeof j);
        j.codec = GC_GPU_CODEC_BZIP2;
        j.op = GC_GPU_DECODE;
        j.src = s.data();
        j.src_len = s.size();
        j.grow = grow_cb;
        j.user = &g;
        gc_error e;
        int rc = gc_gpu_run_batch(g_ctx, &j, 1, nullptr, &e);
        if (rc == GC_E_DEVICE)
            g_dead = true;
        result(rc == GC_OK && j.status == GC_OK && j.dst_len == n && j.dst_cap >= n &&
                   memcmp(j.dst, data.data(), n) == 0 && g.calls >= 1 && !g.shrank,
               "limits: grow from NULL: status %s, %zu bytes, %u grow calls%s", st_name(j.status), j.dst_len,
               g.calls, g.shrank ? ", len shrank" : "");
        free(j.dst);
        if (g_dead)
            return;
    }
    /* device: exact, one short, none; a misaligned input */
    if (!g_din.reserve(s.size() + 16) || !g_dout.reserve(n + GUARD)) {
        result(false, "limits device: cudaMalloc failed");
        return;
    }
    cudaMemcpy(g_din.p, s.data(), s.size(), cudaMemcpyHostToDevice);
    for (size_t cap : { n, n - 1, (size_t)0 }) {
        cudaMemset((uint8_t *)g_dout.p + cap, 0xA5, GUARD);
        size_t len = (size_t)-1;
        gc_error e;
        int rc = gc_gpu_bzip2_decode_device(g_ctx, g_din.p, s.size(), g_dout.p, cap, &len, nullptr, &e);
        if (rc == GC_E_DEVICE) {
            g_dead = true;
            result(false, "limits device dst_cap %zu: GC_E_DEVICE \"%s\"", cap, e.msg);
            return;
        }
        uint8_t guard[GUARD];
        cudaMemcpy(guard, (uint8_t *)g_dout.p + cap, GUARD, cudaMemcpyDeviceToHost);
        bool gok = true;
        for (size_t k = 0; k < GUARD; k++)
            gok = gok && guard[k] == 0xA5;
        if (cap == n) {
            Bytes out(n);
            cudaMemcpy(out.data(), g_dout.p, n, cudaMemcpyDeviceToHost);
            result(rc == GC_OK && len == n && out == data && gok,
                   "limits device dst_cap exact %zu: rc %s, %zu bytes%s", cap, st_name(rc), len,
                   gok ? "" : ", bytes past dst_cap overwritten");
        } else {
            result(rc == GC_E_LIMIT && len == 0 && gok,
                   "limits device dst_cap %zu < %zu: rc %s \"%s\" (want GC_E_LIMIT), "
                   "dst_len %zu%s",
                   cap, n, st_name(rc), e.msg, len, gok ? "" : ", bytes past dst_cap overwritten");
        }
    }
    {
        /* the device input must be 4-byte aligned */
        Bytes sh(s.size() + 1);
        memcpy(sh.data() + 1, s.data(), s.size());
        cudaMemcpy(g_din.p, sh.data(), sh.size(), cudaMemcpyHostToDevice);
        size_t len = (size_t)-1;
        gc_error e;
        int rc =
            gc_gpu_bzip2_decode_device(g_ctx, (uint8_t *)g_din.p + 1, s.size(), g_dout.p, n, &len, nullptr, &e);
        if (rc == GC_E_DEVICE)
            g_dead = true;
        result(rc != GC_OK && rc != GC_E_DEVICE, "limits device misaligned input: rc %s \"%s\" (want an error)",
               st_name(rc), e.msg);
    }
}

/* bzip2 decode jobs beside a bzip2 encode job and an rle encode job. */
static void test_mixed_batch(void)
{
    Bytes t = gen(K_TEXT, g_quick ? 200000 : 1200000, 121), r = gen(K_RANDOM, 300000, 122),
          enc_src = gen(K_TEXT, 500000, 123);
    Bytes st, sr, bad, multi, e0 = empty_stream();
    compress(E_OUR9, t, st);
    compress(E_LIB1, r, sr);
    bad = st;
    bad[bad.size() / 2] ^= 0x10;
    multi = cat({ &sr, &e0, &st });
    Case cbad = make_case("mixed: flipped", bad, t.size() + 65536);
    cpu_ref(cbad);
    /* references of the encode jobs */
    Bytes bz_ref;
    compress_ours(enc_src, 5, 0, bz_ref);
    rle_options ro;
    memset(&ro, 0, sizeof ro);
    ro.width = 1;
    ro.chunk_size = 1u << 16;
    ro.threads = 1;
    Bytes rle_ref(rle_compress_bound(r.size(), &ro));
    size_t rle_len = 0;
    gc_error e;
    if (rle_compress(r.data(), r.size(), &ro, rle_ref.data(), rle_ref.size(), &rle_len, &e) != GC_OK) {
        result(false, "mixed batch: rle_compress: %s", e.msg);
        return;
    }
    const size_t bz_cap = gc_gpu_bzip2_encode_cap(enc_src.size());
    Bytes fixed(r.size()), benc(bz_cap), renc(rle_ref.size());
    GrowState g0, g3, g4;
    gc_gpu_job j[6];
    memset(j, 0, sizeof j);
    for (int i = 0; i < 6; i++) {
        j[i].codec = GC_GPU_CODEC_BZIP2;
        j[i].op = GC_GPU_DECODE;
        j[i].status = -1;
    }
    j[0].src = st.data(), j[0].src_len = st.size(), j[0].grow = grow_cb, j[0].user = &g0;
    j[1].src = sr.data(), j[1].src_len = sr.size(), j[1].dst = fixed.data(), j[1].dst_cap = fixed.size();
    j[2].op = GC_GPU_ENCODE, j[2].src = enc_src.data(), j[2].src_len = enc_src.size(), j[2].opt.bzip2.level = 5;
    j[2].dst = benc.data(), j[2].dst_cap = bz_cap;
    j[3].src = bad.data(), j[3].src_len = bad.size(), j[3].grow = grow_cb, j[3].user = &g3;
    j[4].src = multi.data(), j[4].src_len = multi.size(), j[4].grow = grow_cb, j[4].user = &g4;
    j[5].codec = GC_GPU_CODEC_RLE, j[5].op = GC_GPU_ENCODE, j[5].src = r.data(), j[5].src_len = r.size();
    j[5].opt.rle = ro, j[5].dst = renc.data(), j[5].dst_cap = renc.size();
    int rc = gc_gpu_run_batch(g_ctx, j, 6, nullptr, &e);
    if (rc != GC_OK) {
        if (rc == GC_E_DEVICE)
            g_dead = true;
        result(false, "mixed batch: gc_gpu_run_batch %s \"%s\"", st_name(rc), e.msg);
    } else {
        result(j[0].status == GC_OK && j[0].dst_len == t.size() && memcmp(j[0].dst, t.data(), t.size()) == 0,
               "mixed batch: decode (grow) %s \"%s\", %zu bytes", st_name(j[0].status), j[0].err.msg,
               j[0].dst_len);
        result(j[1].status == GC_OK && j[1].dst_len == r.size() && fixed == r,
               "mixed batch: decode (fixed) %s \"%s\", %zu bytes", st_name(j[1].status), j[1].err.msg,
               j[1].dst_len);
        result(j[2].status == GC_OK && j[2].dst_len == bz_ref.size() &&
                   memcmp(benc.data(), bz_ref.data(), bz_ref.size()) == 0,
               "mixed batch: bzip2 encode identical to bz2_compress: %s \"%s\", %zu bytes (CPU %zu)",
               st_name(j[2].status), j[2].err.msg, j[2].dst_len, bz_ref.size());
        judge(cbad, "mixed batch grow", j[3].status, j[3].err.msg, j[3].dst, j[3].dst_len, false, "");
        Bytes mref = cat({ &r, &t });
        result(j[4].status == GC_OK && j[4].dst_len == mref.size() &&
                   memcmp(j[4].dst, mref.data(), mref.size()) == 0,
               "mixed batch: decode multi-stream (grow) %s \"%s\", %zu bytes", st_name(j[4].status), j[4].err.msg,
               j[4].dst_len);
        result(j[5].status == GC_OK && j[5].dst_len == rle_len &&
                   memcmp(renc.data(), rle_ref.data(), rle_len) == 0,
               "mixed batch: rle encode identical to rle_compress: %s \"%s\"", st_name(j[5].status), j[5].err.msg);
    }
    free(j[0].dst);
    free(j[3].dst);
    free(j[4].dst);
}

/* Whether group `name` is in the comma-separated list (null: every group). */
static bool selected(const char *only, const char *name)
{
    if (!only)
        return true;
    std::string list = std::string(",") + only + ",";
    std::string key = name;
    for (size_t a = 0; a < list.size();) {
        size_t b = list.find(',', a + 1);
        std::string item = list.substr(a + 1, b - a - 1);
        if (!item.empty() && key.find(item) != std::string::npos)
            return true;
        a = b;
    }
    return false;
}

/* ---- stream parts (docs/BZIP2.md "Streaming"): partial jobs against bz2_decompress_part ---- */

static bool same_state(const bz2_dstate &d, const bz2_dstate &p)
{
    return p.bit == d.bit && !p.in_stream == !d.in_stream && (!d.in_stream || p.level == d.level) &&
           p.combined == d.combined && p.stream_no == d.stream_no && p.block_no == d.block_no &&
           !p.garbage == !d.garbage && (!d.garbage || p.garbage_at == d.garbage_at) && !p.head == !d.head &&
           p.head_max_nblock == d.head_max_nblock && !p.head_ended == !d.head_ended &&
           p.head_blocks == d.head_blocks && p.head_combined == d.head_combined &&
           p.head_stored == d.head_stored && !p.soft_stopped == !d.soft_stopped;
}

static std::string state_words(const bz2_dstate &s)
{
    return fmt("bit %u, stream %u, block %u, level %d, combined 0x%08x, garbage %d, head %d (longest %u, "
               "ended %d after %u blocks, combined 0x%08x, stored 0x%08x)",
               s.bit, s.stream_no, s.block_no, s.level, s.combined, s.garbage, s.head, s.head_max_nblock,
               s.head_ended, s.head_blocks, s.head_combined, s.head_stored);
}

/*
 * Cuts: the next piece ends at cuts[k]; the decoder sees the carried tail
 * plus the piece. Both engines get the same cuts; after every call the GPU
 * job's state must be the CPU's, its used bytes the same, its output equal.
 */
static void run_parts(const char *name, const Bytes &in, const std::vector<size_t> &cuts)
{
    bz2_dstate st;
    memset(&st, 0, sizeof st);
    Bytes carry;
    size_t at = 0;
    for (size_t k = 0; k <= cuts.size(); k++) {
        size_t end = k < cuts.size() ? std::min(cuts[k], in.size()) : in.size();
        bool more = k < cuts.size();
        Bytes src = carry;
        src.insert(src.end(), in.begin() + (long)at, in.begin() + (long)end);
        at = end;
        gc_gpu_job j;
        memset(&j, 0, sizeof j);
        GrowState gs;
        j.codec = GC_GPU_CODEC_BZIP2;
        j.op = GC_GPU_DECODE;
        j.src = src.empty() ? (const uint8_t *)"" : src.data();
        j.src_len = src.size();
        j.grow = grow_cb;
        j.user = &gs;
        j.partial = 1;
        j.part_more = more;
        j.part = st; /* the job takes the CPU decoder's own state type */
        gc_error e;
        memset(&e, 0, sizeof e);
        int brc = gc_gpu_run_batch(g_ctx, &j, 1, nullptr, &e);
        uint8_t *out = nullptr;
        size_t out_len = 0, used = 0;
        gc_error ce;
        memset(&ce, 0, sizeof ce);
        int crc =
            bz2_decompress_part(src.data(), src.size(), more, &st, 0, 1, nullptr, &out, &out_len, &used, &ce);
        if (!batch_rc(brc, e, 1, "parts", name)) {
            free(out);
            free(j.dst);
            return;
        }
        bool ok = true;
        std::string why;
        if (crc != GC_OK) {
            ok = j.status != GC_OK; /* the daemon reruns a failed part on the CPU for its exact words */
            why = fmt("CPU %s \"%s\", GPU %s", st_name(crc), ce.msg, st_name(j.status));
        } else if (j.status != GC_OK) {
            ok = false;
            why = fmt("GPU %s \"%s\" where the CPU decoded", st_name(j.status), j.err.msg);
        } else if (j.dst_len != out_len || (out_len && memcmp(j.dst, out, out_len) != 0)) {
            ok = false;
            why = fmt("output %zu bytes, CPU %zu (or different bytes)", j.dst_len, out_len);
        } else if (j.part_used != used || !same_state(st, j.part)) {
            ok = false;
            why = fmt("used %zu (CPU %zu), bit %u (%u), stream %u (%u), block %u (%u), garbage %d (%d)",
                      j.part_used, used, j.part.bit, st.bit, j.part.stream_no, st.stream_no, j.part.block_no,
                      st.block_no, j.part.garbage, st.garbage);
        }
        free(out);
        free(j.dst);
        if (!ok || crc != GC_OK) {
            result(ok, "%s [parts]: call %zu of %zu: %s", name, k + 1, cuts.size() + 1,
                   ok ? "both failed" : why.c_str());
            return;
        }
        carry.assign(src.begin() + (long)used, src.end());
    }
    result(true, "%s [parts]", name);
}

static std::vector<size_t> even_cuts(size_t len, size_t piece)
{
    std::vector<size_t> c;
    for (size_t x = piece; x < len; x += piece)
        c.push_back(x);
    return c;
}

static std::vector<size_t> random_cuts(size_t len, size_t most, uint64_t seed)
{
    Rng r{ seed };
    std::vector<size_t> c;
    for (size_t x = 1 + r.below(most); x < len; x += 1 + r.below(most))
        c.push_back(x);
    return c;
}

static void test_parts(void)
{
    Bytes e0 = empty_stream(), a, b, c, d;
    compress(E_OUR9, gen(K_TEXT, 2500000, 81), a);  /* three blocks */
    compress(E_LIB1, gen(K_RANDOM, 250000, 82), b); /* three blocks, little compression */
    compress(E_LIB9, gen(K_R255, 3000000, 83), c);  /* runs: tiny blocks */
    compress_ours(gen(K_TEXT, 5000, 84), 9, BZ2_ENC_RANDOMISE, d);
    Bytes multi = cat({ &a, &e0, &b, &d }), nl = { '\n' }, garbage = cat({ &a, &nl }), bz = { 'B', 'Z' };
    Bytes cut_prefix = cat({ &b, &bz });
    struct {
        const char *name;
        const Bytes *in;
    } inputs[] = { { "text 3 blocks", &a },
                   { "random 3 blocks", &b },
                   { "runs", &c },
                   { "randomised", &d },
                   { "multi-stream", &multi },
                   { "trailing newline", &garbage },
                   { "trailing 'BZ'", &cut_prefix },
                   { "empty stream", &e0 } };
    for (auto &x : inputs) {
        size_t n = x.in->size();
        run_parts(fmt("%s, whole", x.name).c_str(), *x.in, {});
        run_parts(fmt("%s, halves", x.name).c_str(), *x.in, { n / 2 });
        run_parts(fmt("%s, 64 KiB pieces", x.name).c_str(), *x.in, even_cuts(n, 65536));
        run_parts(fmt("%s, random pieces", x.name).c_str(), *x.in, random_cuts(n, n / 5 + 2, n));
        if (n < 4000)
            run_parts(fmt("%s, 1-byte pieces", x.name).c_str(), *x.in, even_cuts(n, 1));
    }
    /* a damaged block in the second part: the GPU must fail where the CPU does */
    Bytes bad = a;
    bad[bad.size() / 2] ^= 0x40;
    run_parts("text with a flipped bit, random pieces", bad, random_cuts(bad.size(), 300000, 85));
    Bytes cut(a.begin(), a.begin() + (long)(a.size() * 2 / 3));
    run_parts("text truncated, halves", cut, { cut.size() / 2 });
}

/* ---- parts that begin inside a stream (bz2_dstate_at_magic, the "head" stream) ---- */

/* One partial job over src from state *st: its status; on success its output, state and used bytes. */
static int gpu_part(const Bytes &src, bool more, bz2_dstate *st, Bytes &out, size_t *used, gc_error *je)
{
    gc_gpu_job j;
    memset(&j, 0, sizeof j);
    GrowState gs;
    j.codec = GC_GPU_CODEC_BZIP2;
    j.op = GC_GPU_DECODE;
    j.src = src.empty() ? (const uint8_t *)"" : src.data();
    j.src_len = src.size();
    j.grow = grow_cb;
    j.user = &gs;
    j.partial = 1;
    j.part_more = more;
    j.part = *st;
    gc_error e;
    memset(&e, 0, sizeof e);
    int brc = gc_gpu_run_batch(g_ctx, &j, 1, nullptr, &e);
    if (!batch_rc(brc, e, 1, "head", "head part")) {
        free(j.dst);
        return GC_E_DEVICE;
    }
    *je = j.err;
    if (j.status == GC_OK) {
        out.assign(j.dst, j.dst + j.dst_len);
        *st = j.part;
        *used = j.part_used;
    }
    free(j.dst);
    return j.status;
}

/*
 * The part of `in` from magic bit `from` to the byte holding bit `to` (more:
 * input follows), decoded from bz2_dstate_at_magic by the device and by
 * bz2_decompress_part: the same status, output, used bytes and state (head
 * fields included); and the decode of the input in front confirms the
 * device's state (bz2_dstate_follow) exactly when it confirms the CPU's.
 */
static void run_head_part(const std::string &name, const Bytes &in, uint64_t from, uint64_t to, bool more)
{
    size_t at = (size_t)(from / 8), end = (size_t)((to + 7) / 8);
    Bytes src(in.begin() + (long)at, in.begin() + (long)end), gout;
    bz2_dstate g, c;
    bz2_dstate_at_magic(&g, (unsigned)(from % 8));
    bz2_dstate_at_magic(&c, (unsigned)(from % 8));
    size_t gused = 0, cused = 0, cl = 0;
    gc_error ge, ce;
    memset(&ge, 0, sizeof ge);
    memset(&ce, 0, sizeof ce);
    int grc = gpu_part(src, more, &g, gout, &gused, &ge);
    if (grc == GC_E_DEVICE)
        return;
    uint8_t *co = nullptr;
    int crc = bz2_decompress_part(src.data(), src.size(), more, &c, 0, 1, nullptr, &co, &cl, &cused, &ce);
    std::string why;
    if (crc != GC_OK && grc == GC_OK)
        why = fmt("GPU decoded where the CPU failed %s \"%s\"", st_name(crc), ce.msg);
    else if (crc == GC_OK && grc != GC_OK)
        why = fmt("GPU %s \"%s\" where the CPU decoded", st_name(grc), ge.msg);
    else if (crc == GC_OK && (gout.size() != cl || (cl && memcmp(gout.data(), co, cl) != 0)))
        why = fmt("output %zu bytes, CPU %zu (or different bytes)", gout.size(), cl);
    else if (crc == GC_OK && (gused != cused || !same_state(c, g)))
        why = fmt("used %zu (CPU %zu); GPU %s; CPU %s", gused, cused, state_words(g).c_str(),
                  state_words(c).c_str());
    free(co);
    if (why.empty() && crc == GC_OK) {
        bz2_dstate pg, pc;
        memset(&pg, 0, sizeof pg);
        uint8_t *po = nullptr;
        size_t pl = 0, pu = 0;
        gc_error pe;
        if (bz2_decompress_part(in.data(), at + (from % 8 != 0), 1, &pg, 0, 1, nullptr, &po, &pl, &pu, &pe) ==
            GC_OK) {
            pc = pg;
            bool fg = bz2_dstate_follow(&pg, &g), fc = bz2_dstate_follow(&pc, &c);
            if (fg != fc)
                why = fmt("the decode in front %s the GPU's part, %s the CPU's", fg ? "confirms" : "refuses",
                          fc ? "confirms" : "refuses");
        }
        free(po);
    }
    result(why.empty(), "%s [head part]%s%s", name.c_str(), why.empty() ? "" : ": ", why.c_str());
}

/* Every real magic of in (block and end-of-stream), ascending. */
static std::vector<uint64_t> part_starts(const Bytes &in)
{
    std::vector<uint64_t> m;
    uint64_t bit;
    for (size_t from = 0; bz2_find_part_start(in.data(), in.size(), from, &bit) == GC_OK; from = bit / 8 + 1)
        m.push_back(bit);
    return m;
}

/* The 48 bits at bit `at` of in (a magic part_starts found: all inside in). */
static uint64_t magic_at(const Bytes &in, uint64_t at)
{
    uint64_t v = 0;
    for (uint64_t bit = at; bit < at + 48; bit++)
        v = v << 1 | ((in[bit / 8] >> (7 - bit % 8)) & 1u);
    return v;
}

/* Parts from every stride-th magic after the first to the next such one (the last to the end). */
static void run_head_parts(const char *name, const Bytes &in, size_t stride)
{
    std::vector<uint64_t> m = part_starts(in), cuts;
    for (size_t k = 1; k < m.size(); k += stride)
        cuts.push_back(m[k]);
    for (size_t k = 0; k < cuts.size() && !g_dead; k++) {
        bool more = k + 1 < cuts.size();
        run_head_part(
            fmt("%s, stride %zu, part %zu at bit %llu", name, stride, k + 1, (unsigned long long)cuts[k]), in,
            cuts[k], more ? cuts[k + 1] : (uint64_t)in.size() * 8, more);
    }
}

/* Streams of `piece` input bytes each, one after the other (pbzip2's layout). */
static Bytes many_streams(const Bytes &data, size_t piece, Enc e)
{
    Bytes all;
    for (size_t at = 0; at < data.size(); at += piece) {
        Bytes one(data.begin() + (long)at, data.begin() + (long)std::min(data.size(), at + piece)), s;
        compress(e, one, s);
        all.insert(all.end(), s.begin(), s.end());
    }
    return all;
}

static void test_head_parts(void)
{
    Bytes a1, a9;
    compress(E_OUR1, gen(K_TEXT, 700000, 91), a1);  /* blocks of <= 100000 bytes: 7 or 8 */
    compress(E_OUR9, gen(K_TEXT, 2600000, 92), a9); /* three blocks */
    Bytes pb = many_streams(gen(K_TEXT, g_quick ? 2000000 : 4500000, 93), 900000, E_LIB9);
    Bytes s1 = many_streams(gen(K_TEXT, 1500000, 94), 200000, E_OUR1); /* two blocks a stream */
    Bytes rnd = many_streams(gen(K_RANDOM, 600000, 95), 150000, E_LIB1);
    run_head_parts("ours -1", a1, 1);
    run_head_parts("ours -1", a1, 3);
    run_head_parts("ours -9", a9, 1);
    run_head_parts("pbzip2-like, 900 kB streams", pb, 1);
    run_head_parts("pbzip2-like, 900 kB streams", pb, 2);
    run_head_parts("200 kB streams at -1", s1, 1);
    run_head_parts("200 kB streams at -1", s1, 2);
    run_head_parts("200 kB streams at -1", s1, 5);
    run_head_parts("random, 150 kB streams at -1", rnd, 1);
    /* edges at an end marker: a part beginning at one, one ending at it, one ending just
     * after it (at the next stream's first block) and one beginning there */
    std::vector<uint64_t> m = part_starts(s1);
    for (size_t k = 1; k + 1 < m.size() && !g_dead; k++) {
        if (magic_at(s1, m[k]) != EOS_MAGIC)
            continue;
        uint64_t end = (uint64_t)s1.size() * 8;
        run_head_part(fmt("edge: from the end marker at bit %llu", (unsigned long long)m[k]), s1, m[k], end,
                      false);
        run_head_part("edge: up to the end marker", s1, m[k - 1], m[k], true);
        run_head_part("edge: across the end marker, up to the next stream's first block", s1, m[k - 1], m[k + 1],
                      true);
        run_head_part("edge: from the next stream's first block", s1, m[k + 1], end, false);
        break;
    }
    /* a wrong stored CRC of the head stream is recorded (the decode in front refuses it); one
     * after the head is a CRC failure on both */
    Bytes bad = cat({ &a1, &a1 });
    uint64_t eos = 0;
    for (uint64_t x : part_starts(bad))
        if (x < (uint64_t)a1.size() * 8 && magic_at(bad, x) == EOS_MAGIC)
            eos = x;
    if (eos) {
        bad[(eos + 60) / 8] ^= (uint8_t)(0x80u >> ((eos + 60) % 8));
        run_head_part("a wrong head stream CRC", bad, part_starts(bad)[1], (uint64_t)bad.size() * 8, false);
        Bytes bad2 = cat({ &a1, &a1 });
        bad2[bad2.size() - 2] ^= 0x10;
        run_head_part("a wrong CRC after the head stream", bad2, part_starts(bad2)[1], (uint64_t)bad2.size() * 8,
                      false);
    } else {
        result(false, "head parts: no end marker found in the first stream");
    }
}

int main(int argc, char **argv)
{
    const char *only = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            g_quick = true;
        else if (!strcmp(argv[i], "-v"))
            g_verbose = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--only NAME,...] [-v]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    crc_init();
    double t_start = now_s();
    int ndev = gc_gpu_device_count();
    printf("gc_gpu_device_count() = %d\n", ndev);
    if (ndev == 0) {
        printf("SKIP: no CUDA device\nbzip2 decode suite: 0 passed, 0 failed (0 class mismatches)\n");
        return 77;
    }
    gc_gpu_info info;
    gc_error e;
    if (gc_gpu_device_info(0, &info, &e) == GC_OK)
        printf("device 0: %s, %d SMs, cc %d.%d, %.1f GiB\n", info.name, info.sm_count, info.cc_major,
               info.cc_minor, info.total_mem / 1073741824.0);
    if (gc_gpu_open(0, nullptr, &g_ctx, &e) != GC_OK) {
        printf("FAIL gc_gpu_open: %s\nbzip2 decode suite: 0 passed, 1 failed (0 class mismatches)\n", e.msg);
        return 1;
    }
    struct {
        const char *name;
        void (*fn)(void);
        bool quick;
    } groups[] = {
        { "hostile blocks", test_hostile, true },
        { "multi-stream and trailing data", test_multistream, true },
        { "false positives", test_false_positives, true },
        { "randomised blocks", test_randomised, true },
        { "output limits", test_limits, true },
        { "mixed batch", test_mixed_batch, true },
        { "corrupt streams", test_corrupt, true },
        { "sizes x classes x encoders", test_matrix, true },
        { "waves (> 2048 blocks)", test_waves, false },
        { "stream parts", test_parts, true },
        { "head parts", test_head_parts, true },
    };
    for (auto &g : groups) {
        if (g_dead)
            break;
        if ((g_quick && !g.quick) || !selected(only, g.name))
            continue;
        double t0 = now_s();
        int f0 = g_fail, p0 = g_pass;
        g.fn();
        printf("-- %s: %d checks, %.1f s%s\n", g.name, g_pass + g_fail - p0 - f0, now_s() - t0,
               g_fail > f0 ? fmt(", %d failed", g_fail - f0).c_str() : "");
    }
    if (g_dead)
        printf("FAIL device: GC_E_DEVICE (or a CUDA error) seen; the remaining cases were not run\n");
    g_din.release();
    g_dout.release();
    if (!g_dead)
        gc_gpu_close(g_ctx);
    printf("total %.1f s\n", now_s() - t_start);
    printf("bzip2 decode suite: %d passed, %d failed (%d class mismatches)\n", g_pass, g_fail + (g_dead ? 1 : 0),
           g_mismatch);
    return g_fail || g_dead ? 1 : 0;
}
