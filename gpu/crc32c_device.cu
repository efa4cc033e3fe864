/*
 * crc32c_device.cu - the constant tables of the device CRC (built on the host
 * per (polynomial, geometry) and uploaded; see crc32c_device.cuh for the
 * method) and the whole-buffer CRC launcher.
 */
#include "crc32c_device.cuh"
#include "rle_cell.cuh"

#include <algorithm>

namespace gcgpu {

namespace {

/* x^(8n) mod P for any signed n (reflected), from the powers already built */
template <class Tab>
uint32_t xpow8_signed(const Tab *t, int64_t n)
{
    const uint32_t *pw = n >= 0 ? t->xp8 : t->xi8;
    uint64_t m = (uint64_t)(n >= 0 ? n : -n);
    uint32_t p = 0x80000000u; /* 1 */
    for (int k = 0; m; k++, m >>= 1)
        if (m & 1)
            p = gf2_mul<Tab::kPoly>(pw[k], p);
    return p;
}

/* The tables of warp_crc (see CrcTablesT::mb, mr and crc32c_device.cuh). */
template <class Tab>
void mma_tables_build(Tab *t)
{
    constexpr uint32_t P = Tab::kPoly;
    constexpr int kRow = 256;  /* bytes of data in one row of the A fragment: 4 lanes' cells */
    uint32_t bit_crc[kRow][8]; /* raw CRC, at the row's end, of one bit set at (byte, bit); 8 KiB of
                                  stack, not static: contexts may build their tables on several threads */
    for (int pos = 0; pos < kRow; pos++)
        for (int b = 0; b < 8; b++) {
            uint32_t c = t->t8[0][1u << b];
            for (int z = pos + 1; z < kRow; z++)
                c = t->t8[0][c & 255] ^ (c >> 8);
            bit_crc[pos][b] = c;
        }
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                for (int r = 0; r < 2; r++) {
                    /* b_r meets a0 (r = 0) or a2 (r = 1) of row g: words 4s, 4s + 2 */
                    const int cell = l & 3, out_bit = 8 * j + (l >> 2), byte = 16 * s + 8 * r;
                    uint32_t m = 0;
                    for (int i = 0; i < 32; i++)
                        m |= ((bit_crc[kCell * cell + byte + i / 8][i % 8] >> out_bit) & 1u) << i;
                    t->mb[2 * s + j / 2][l][2 * (j & 1) + r] = m;
                }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, tg = l & 3;
            /* row g + 8h (words 4s + h, 4s + 2 + h) ends 256 (g + 1) + 4 h bytes into the warp's 2 KiB */
            const uint32_t to_end = xpow8_signed(t, (int64_t)kCell * 32 - kRow * (g + 1) - 4 * h);
            for (int p = 0; p < 2; p++)
                for (uint32_t v = 0; v < 16; v++) {
                    uint32_t bits = 0;
                    for (int q = 0; q < 4; q++) /* bit q of v: CRC bit 8 (2p + q/2) + 2 tg + q%2 */
                        bits |= ((v >> q) & 1u) << (8 * (2 * p + q / 2) + 2 * tg + q % 2);
                    t->mr[2 * h + p][v][l] = gf2_mul<P>(to_end, bits);
                }
        }
}

/* Raw CRC of each window of len bytes at src into part[window]. */
template <class Tab>
__global__ void __launch_bounds__(Tab::kThreads)
    crc_windows_kernel(const uint8_t *src, int64_t len, const Tab *tab, uint32_t *part)
{
    __shared__ uint32_t red_words[64];
    BlockRed red{ red_words, 0 };
    const CrcSmem cs = load_crc_smem(dyn_smem, tab); /* kCrcSmemBytes */
    const uint32_t *wk = warp_shift_table(tab);
    __syncthreads();
    const int64_t nwin = (len + Tab::kWin - 1) / Tab::kWin;
    for (int64_t wi = blockIdx.x; wi < nwin; wi += gridDim.x) {
        uint32_t w[16];
        load_cell(src, wi * Tab::kWin + (int64_t)kCell * threadIdx.x, len, w);
        const uint32_t c = window_crc(cs, w, red, wk);
        if (threadIdx.x == 0)
            part[wi] = c;
    }
}

/* The windows' raw CRCs moved to the end of the last window, XORed, and
 * turned into the CRC of the len bytes. */
template <class Tab>
__global__ void __launch_bounds__(Tab::kThreads)
    crc_finish_kernel(int64_t len, const Tab *tab, const uint32_t *part, uint32_t *out)
{
    __shared__ uint32_t red_words[64];
    BlockRed red{ red_words, 0 };
    const int64_t nwin = (len + Tab::kWin - 1) / Tab::kWin, ref = nwin * Tab::kWin;
    uint32_t acc = 0;
    for (int64_t i = threadIdx.x; i < nwin; i += blockDim.x)
        acc ^= mul_xpow8(tab, part[i], (uint64_t)(ref - (i + 1) * Tab::kWin));
    acc = block_xor(acc, red);
    if (threadIdx.x == 0)
        *out = crc_at_ref(tab, acc, (uint64_t)(ref - len), (uint64_t)len);
}

} // namespace

template <uint32_t Poly, int Threads>
void crc_tables_build(CrcTablesT<Poly, Threads> *t)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ Poly : c >> 1;
        t->t8[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (int i = 0; i < 256; i++)
            t->t8[s][i] = (t->t8[s - 1][i] >> 8) ^ t->t8[0][t->t8[s - 1][i] & 255];
    /* reflected: bit 31 - e stands for x^e */
    t->xp8[0] = 0x00800000u;                /* x^8 */
    const uint32_t xinv = (Poly << 1) | 1u; /* x^-1 = (P + 1) / x: x^31 + (P - 1 - x^32) / x */
    uint32_t xi = 0x80000000u;
    for (int i = 0; i < 8; i++)
        xi = gf2_mul<Poly>(xinv, xi);
    t->xi8[0] = xi; /* x^-8 */
    for (int k = 1; k < 32; k++) {
        t->xp8[k] = gf2_mul<Poly>(t->xp8[k - 1], t->xp8[k - 1]);
        t->xi8[k] = gf2_mul<Poly>(t->xi8[k - 1], t->xi8[k - 1]);
    }
    for (int th = 0; th < Threads; th++)
        t->kcell[th] = xpow8_signed(t, (int64_t)kCell * (Threads - 1 - th));
    uint32_t span_pow[kSpanShifts]; /* x^(8*2048*m) */
    for (int m = 0; m < kSpanShifts; m++)
        span_pow[m] = xpow8_signed(t, (int64_t)kSpan * m);
    for (int n = 0; n < 8; n++)
        for (uint32_t v = 0; v < 16; v++) {
            for (int w = 0; w < Threads / 32; w++)
                t->wm[w][n][v] = gf2_mul<Poly>(t->kcell[32 * w + 31], v << (4 * n));
            for (int m = 0; m < kSpanShifts; m++)
                t->xsp[m][n][v] = gf2_mul<Poly>(span_pow[m], v << (4 * n));
            for (int k = 0; k < kPowNibbleBits; k++) {
                t->xpn[k][n][v] = gf2_mul<Poly>(t->xp8[k], v << (4 * n));
                t->xin[k][n][v] = gf2_mul<Poly>(t->xi8[k], v << (4 * n));
            }
        }
    mma_tables_build(t);
}

template <class Tab>
int crc_launch(const Tab *d_tab, const uint8_t *d_src, uint64_t len, uint32_t *d_crc, void *scratch,
               size_t scratch_len, cudaStream_t stream, gc_error *err)
{
    if (scratch_len < crc_scratch_bytes<Tab>(len))
        return gc_fail(err, GC_E_LIMIT, "gpu crc: %zu bytes of scratch needed, %zu given",
                       crc_scratch_bytes<Tab>(len), scratch_len);
    if ((uintptr_t)d_src & 15)
        return gc_fail(err, GC_E_INVALID, "gpu crc: the data must be 16-byte aligned");
    if (len > (uint64_t)INT64_MAX / 2)
        return gc_fail(err, GC_E_LIMIT, "gpu crc: %llu bytes is too long", (unsigned long long)len);
    uint32_t *part = (uint32_t *)scratch;
    const uint64_t nwin = (len + Tab::kWin - 1) / Tab::kWin;
    if (nwin) {
        int sms = 0;
        int rc = device_sm_count(&sms, err);
        if (rc != GC_OK)
            return rc;
        /* grid-stride: about a full wave of blocks */
        const int grid =
            (int)std::max<uint64_t>(1, std::min<uint64_t>(nwin, (uint64_t)sms * (2048 / Tab::kThreads)));
        crc_windows_kernel<Tab><<<grid, Tab::kThreads, kCrcSmemBytes, stream>>>(d_src, (int64_t)len, d_tab, part);
        GC_CUDA_LAUNCHED("crc_windows_kernel");
    }
    crc_finish_kernel<Tab><<<1, Tab::kThreads, 0, stream>>>((int64_t)len, d_tab, part, d_crc);
    GC_CUDA_LAUNCHED("crc_finish_kernel");
    return GC_OK;
}

/* The (polynomial, geometry) pairs in use: rle's CRC32C, and zlib's CRC-32 on
 * rle's geometry and on 128-thread blocks (tests/gpu/test_gpu_rle.cu). */
#define GC_CRC_INSTANTIATE(POLY, THREADS)                                                                  \
    template void crc_tables_build<POLY, THREADS>(CrcTablesT<POLY, THREADS> *);                            \
    template int crc_launch<CrcTablesT<POLY, THREADS>>(const CrcTablesT<POLY, THREADS> *, const uint8_t *, \
                                                       uint64_t, uint32_t *, void *, size_t, cudaStream_t, \
                                                       gc_error *);
GC_CRC_INSTANTIATE(kCrc32cPoly, kThreads)
GC_CRC_INSTANTIATE(kCrc32Poly, kThreads)
GC_CRC_INSTANTIATE(kCrc32Poly, 128)
#undef GC_CRC_INSTANTIATE

} // namespace gcgpu
