/*
 * bz2_enc_prof.cu - a tuning aid for the encoder's stages, apart from them:
 * with GC_BZ2_PROFILE set in the environment, bz2_prof waits for the stream
 * and prints the time since its last mark (bz2_gpu.cuh); otherwise it costs
 * one test of a flag.
 */
#include <stdio.h>
#include <stdlib.h>

#include <chrono>

#include "bz2_gpu.cuh"

namespace gcgpu {

void bz2_prof(cudaStream_t st, const char *what, uint64_t n)
{
    static const bool on = getenv("GC_BZ2_PROFILE") != nullptr;
    static thread_local std::chrono::steady_clock::time_point last;
    if (!on)
        return;
    (void)cudaStreamSynchronize(st);
    auto now = std::chrono::steady_clock::now();
    if (what)
        fprintf(stderr, "bz2prof %-22s %10llu %8.3f ms\n", what, (unsigned long long)n,
                std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
}

} // namespace gcgpu
