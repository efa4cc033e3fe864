/*
 * test_gpu_bzip2_stages.cu - the CUDA bzip2 encoder compared with the CPU
 * engine stage by stage (docs/BZIP2.md section 10/11): block plan, RLE1 and
 * block CRCs, the BWT column and origPtr, MTF/RLE2 symbols, table choice and
 * selectors, then the whole stream of gc_gpu_bzip2_encode_device. A failure
 * names the first stage and block that differ, which the stream suite
 * (test_gpu_bzip2) cannot. Built by scripts/build-gpu.sh; run by
 * scripts/gpu-suite.sh, --quick also under compute-sanitizer racecheck (its
 * cases are small enough for that tool).
 *
 *   test_gpu_bzip2_stages [--quick | --big]
 * Exit status 0 when every case matches, 1 otherwise, 77 without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <string>
#include <chrono>

#include "bz2_gpu.cuh"
#include "bz2_internal.h" /* the CPU engine's stages: the reference */
#include "gpu_pipeline.cuh"

using namespace gcgpu;
#define CK(x)                                                    \
    do {                                                         \
        cudaError_t e_ = (x);                                    \
        if (e_ != cudaSuccess) {                                 \
            printf("CUDA %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                             \
        }                                                        \
    } while (0)

static std::vector<uint8_t> make(const std::string &kind, size_t n, unsigned seed)
{
    std::vector<uint8_t> v(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    auto rnd = [&]() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    if (kind == "random")
        for (auto &c : v)
            c = (uint8_t)rnd();
    else if (kind == "zero")
        for (auto &c : v)
            c = 0;
    else if (kind == "p2")
        for (size_t i = 0; i < n; i++)
            v[i] = "ab"[i % 2];
    else if (kind == "p7")
        for (size_t i = 0; i < n; i++)
            v[i] = "abcdefg"[i % 7];
    else if (kind == "rec") {
        std::vector<uint8_t> r(1024);
        for (auto &c : r)
            c = (uint8_t)rnd();
        for (size_t i = 0; i < n; i++)
            v[i] = r[i % 1024];
    } else if (kind == "fib") {
        std::string a = "a", b = "ab";
        while (b.size() < n) {
            std::string c = b + a;
            a = b;
            b = c;
        }
        memcpy(v.data(), b.data(), n);
    } else if (kind == "text") {
        const char *w[] = { "def ",    "self", ".x", " = ", "return ", "\n    ",
                            "import ", "os",   "(",  ")",   ":",       "for i in range(",
                            "if ",     "None", "0",  "1" };
        size_t i = 0;
        while (i < n) {
            const char *s = w[rnd() % 16];
            for (; *s && i < n; s++)
                v[i++] = *s;
        }
    } else if (kind == "runs") {
        size_t i = 0;
        while (i < n) {
            size_t r = rnd() % 300 + 1;
            uint8_t c = (uint8_t)(rnd() % 4);
            for (size_t k = 0; k < r && i < n; k++)
                v[i++] = c;
        }
    }
    return v;
}

static int check(const std::string &kind, size_t n, int level, gc_gpu_ctx *ctx, bool stages)
{
    std::vector<uint8_t> src = make(kind, n, 7);
    int bad = 0;
    uint8_t *d_src, *d_dst;
    void *scr;
    size_t piece = 64ull << 20;
    size_t scr_len = gc_gpu_bzip2_scratch_size(piece);
    CK(cudaMalloc(&d_src, n + 16));
    CK(cudaMalloc(&d_dst, n + n / 8 + (1 << 20)));
    CK(cudaMalloc(&scr, scr_len));
    CK(cudaMemcpy(d_src, src.data(), n, cudaMemcpyHostToDevice));
    if (stages && n <= piece) {
        Bz2Scratch s;
        gc_error err;
        if (bz2_scratch_carve(scr, scr_len, piece, &s, &err)) {
            printf("carve: %s\n", err.msg);
            return 1;
        }
        cudaStream_t st = 0;
        uint32_t limit = level * 100000 - 19, nb = 0;
        uint64_t rle_total = 0, used = 0;
        CK(cudaMemset(s.res, 0, sizeof(Bz2Result)));
        if (bz2_plan(d_src, n, limit, true, s, st, &nb, &rle_total, &used, &err)) {
            printf("plan: %s\n", err.msg);
            return 1;
        }
        if (bz2_rle1_crc(d_src, n, nb, rle_total, s, ctx->d_tab32, st, &err)) {
            printf("rle: %s\n", err.msg);
            return 1;
        }
        CK(cudaDeviceSynchronize());
        std::vector<Bz2Block> blk(nb);
        CK(cudaMemcpy(blk.data(), s.blk, nb * sizeof(Bz2Block), cudaMemcpyDeviceToHost));
        size_t *starts;
        size_t cnb = bz2_rle1_plan(src.data(), n, limit, 0, &starts);
        if (used != n) {
            printf("  PLAN covers %llu of %zu bytes\n", (unsigned long long)used, (size_t)n);
            bad++;
        }
        if (cnb != nb) {
            printf("  PLAN blocks gpu %u cpu %zu\n", nb, cnb);
            bad++;
        }
        std::vector<uint8_t> rle(rle_total);
        CK(cudaMemcpy(rle.data(), s.rle, rle_total, cudaMemcpyDeviceToHost));
        std::vector<std::vector<uint8_t>> crle(nb);
        for (uint32_t b = 0; b < nb && b < cnb && bad < 5; b++) {
            if (blk[b].in_start != starts[b] || blk[b].in_len != starts[b + 1] - starts[b]) {
                printf("  PLAN block %u gpu [%u,+%u) cpu [%zu,%zu)\n", b, blk[b].in_start, blk[b].in_len,
                       starts[b], starts[b + 1]);
                bad++;
                continue;
            }
            crle[b].resize(blk[b].in_len + blk[b].in_len / 4 + 8);
            size_t m = bz2_rle1_encode(src.data() + starts[b], blk[b].in_len, crle[b].data());
            crle[b].resize(m);
            if (m != blk[b].n || memcmp(crle[b].data(), rle.data() + blk[b].rle_off, m)) {
                size_t k = 0;
                while (k < m && k < blk[b].n && crle[b][k] == rle[blk[b].rle_off + k])
                    k++;
                printf("  RLE1 block %u n gpu %u cpu %zu first diff %zu\n", b, blk[b].n, m, k);
                bad++;
            }
            uint32_t crc = ~bz2_crc_update(0xffffffffu, src.data() + starts[b], blk[b].in_len);
            if (crc != blk[b].crc) {
                printf("  CRC block %u gpu %08x cpu %08x\n", b, blk[b].crc, crc);
                bad++;
            }
        }
        if (bad)
            return bad;
        auto t0 = std::chrono::steady_clock::now();
        if (bz2_bwt(nb, rle_total, s, st, &err)) {
            printf("bwt: %s\n", err.msg);
            return 1;
        }
        CK(cudaDeviceSynchronize());
        double bwt_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        CK(cudaMemcpy(blk.data(), s.blk, nb * sizeof(Bz2Block), cudaMemcpyDeviceToHost));
        std::vector<uint8_t> bwt(rle_total);
        CK(cudaMemcpy(bwt.data(), s.bwt, rle_total, cudaMemcpyDeviceToHost));
        std::vector<std::vector<uint8_t>> cbwt(nb);
        for (uint32_t b = 0; b < nb && bad < 5; b++) {
            cbwt[b].resize(blk[b].n);
            int32_t orig = bz2_bwt(crle[b].data(), (int32_t)blk[b].n, cbwt[b].data());
            if ((uint32_t)orig != blk[b].orig || memcmp(cbwt[b].data(), bwt.data() + blk[b].rle_off, blk[b].n)) {
                size_t k = 0;
                while (k < blk[b].n && cbwt[b][k] == bwt[blk[b].rle_off + k])
                    k++;
                printf("  BWT block %u n %u period %u orig gpu %u cpu %d first diff %zu\n", b, blk[b].n,
                       blk[b].period, blk[b].orig, orig, k);
                bad++;
            }
        }
        if (bad)
            return bad;
        if (bz2_mtf(nb, s, st, &err) || bz2_tables(nb, s, st, &err)) {
            printf("mtf/tables: %s\n", err.msg);
            return 1;
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(blk.data(), s.blk, nb * sizeof(Bz2Block), cudaMemcpyDeviceToHost));
        std::vector<uint16_t> sym(rle_total + nb);
        CK(cudaMemcpy(sym.data(), s.sym, sym.size() * 2, cudaMemcpyDeviceToHost));
        std::vector<uint8_t> sel(s.group_cap);
        CK(cudaMemcpy(sel.data(), s.sel, s.group_cap, cudaMemcpyDeviceToHost));
        for (uint32_t b = 0; b < nb && bad < 5; b++) {
            uint8_t in_use[256] = { 0 }, seq[256];
            int k = 0;
            for (uint32_t i = 0; i < blk[b].n; i++)
                in_use[cbwt[b][i]] = 1;
            for (int v = 0; v < 256; v++)
                if (in_use[v])
                    seq[v] = (uint8_t)k++;
            std::vector<uint16_t> cs(blk[b].n + 1);
            uint32_t freq[258];
            size_t ns = bz2_mtf_encode(cbwt[b].data(), blk[b].n, seq, k, cs.data(), freq);
            if (ns != blk[b].n_sym || memcmp(cs.data(), sym.data() + blk[b].rle_off + b, ns * 2)) {
                size_t q = 0;
                while (q < ns && cs[q] == sym[blk[b].rle_off + b + q])
                    q++;
                printf("  MTF block %u nsym gpu %u cpu %zu first diff %zu\n", b, blk[b].n_sym, ns, q);
                bad++;
                continue;
            }
            uint8_t len[6][258];
            std::vector<uint8_t> csel(ns / 50 + 2);
            int ng = bz2_table_count(ns);
            bz2_choose_tables(cs.data(), ns, freq, k + 2, ng, len, csel.data());
            uint64_t gb = bz2_group_base(blk[b], b);
            if ((int)blk[b].groups != ng || memcmp(csel.data(), sel.data() + gb, (ns + 49) / 50)) {
                printf("  TABLES block %u groups gpu %u cpu %d\n", b, blk[b].groups, ng);
                bad++;
            }
        }
        printf("  stages ok: %u blocks, rle %llu, bwt %.1f ms (%.2f GB/s)\n", nb, (unsigned long long)rle_total,
               bwt_ms, n / bwt_ms / 1e6);
        if (bad)
            return bad;
    }
    size_t cap = n + n / 8 + (1 << 20), dlen = 0;
    gc_error err;
    gc_gpu_bzip2_stages stg = {};
    auto t0 = std::chrono::steady_clock::now();
    int rc = gc_gpu_bzip2_encode_device(ctx, d_src, n, level, d_dst, cap, &dlen, scr, scr_len, &stg, &err);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rc) {
        printf("  encode_device: %d %s\n", rc, err.msg);
        return 1;
    }
    std::vector<uint8_t> g(dlen);
    CK(cudaMemcpy(g.data(), d_dst, dlen, cudaMemcpyDeviceToHost));
    bz2_options o = { level, 0, nullptr };
    uint8_t *c;
    size_t clen;
    bz2_compress(src.data(), n, &o, &c, &clen, &err);
    size_t k = 0;
    while (k < dlen && k < clen && g[k] == c[k])
        k++;
    printf("%-7s %10zu L%d: gpu %zu cpu %zu %s (diff at %zu) %.1f ms %.2f GB/s  plan %.1f bwt %.1f mtf %.1f tab "
           "%.1f pack %.1f\n",
           kind.c_str(), n, level, dlen, clen, (dlen == clen && k == dlen) ? "SAME" : "DIFFER", k, ms,
           n / ms / 1e6, stg.plan_ms, stg.bwt_ms, stg.mtf_ms, stg.tables_ms, stg.pack_ms);
    free(c);
    cudaFree(d_src);
    cudaFree(d_dst);
    cudaFree(scr);
    return (dlen == clen && k == dlen) ? bad : bad + 1;
}

int main(int argc, char **argv)
{
    gc_gpu_ctx *ctx;
    gc_error err;
    if (gc_gpu_device_count() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    if (gc_gpu_open(0, nullptr, &ctx, &err)) {
        printf("open: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    bool big = argc > 1 && !strcmp(argv[1], "--big");
    if (argc > 1 && !strcmp(argv[1], "--quick")) {
        const char *k2[] = { "random", "text", "runs", "zero", "p2", "p7", "rec", "fib" };
        for (const char *kd : k2) {
            bad += check(kd, 1000, 9, ctx, true);
            bad += check(kd, 150000, 1, ctx, true);
        }
        printf("%d cases, %d failed\n", 16, bad);
        gc_gpu_close(ctx);
        return bad != 0;
    }
    const char *kinds[] = { "random", "text", "runs", "zero", "p2", "p7", "rec", "fib" };
    for (const char *kd : kinds) {
        bad += check(kd, 1000, 9, ctx, true);
        bad += check(kd, 3000000, 9, ctx, true);
        bad += check(kd, 2500000, 1, ctx, true);
    }
    if (big)
        for (const char *kd : kinds) {
            bad += check(kd, 64u << 20, 9, ctx, false);
            bad += check(kd, 256u << 20, 9, ctx, false);
        }
    printf("%d cases, %d failed\n", big ? 40 : 24, bad);
    gc_gpu_close(ctx);
    return bad != 0;
}
