/*
 * host_register.cu - long-lived page-locking of caller buffers (gpu.h).
 *
 * The batch pipeline checks every buffer with cudaPointerGetAttributes and
 * sends registered ones straight over DMA, so registering a reused buffer
 * once removes the host staging copy from every later request.
 */
#include "gpu_internal.cuh"

extern "C" int gc_gpu_host_register(void *p, size_t len, int read_only, gc_error *err)
{
    unsigned flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0u);
    cudaError_t rc = cudaHostRegister(p, len, flags);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it so later calls do not see it */
        return gc_fail(err, GC_E_DEVICE, "cuda: cannot register %zu bytes of host memory: %s", len,
                       cudaGetErrorString(rc));
    }
    return GC_OK;
}

extern "C" void gc_gpu_host_unregister(void *p)
{
    if (cudaHostUnregister(p) != cudaSuccess)
        (void)cudaGetLastError();
}
