/*
 * device_query.cu - device discovery for the daemon: how many GPUs, and what
 * they are. Never aborts: no driver or no device is simply 0 devices.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "gpu_internal.cuh"

extern "C" int gc_gpu_device_count(void)
{
    int n = 0;
    /* cudaGetDeviceCount honours CUDA_VISIBLE_DEVICES; no driver -> error -> 0 */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the non-sticky error */
        return 0;
    }
    return n < 0 ? 0 : n;
}

extern "C" int gc_gpu_device_info(int dev, gc_gpu_info *info, gc_error *err)
{
    int n = gc_gpu_device_count();
    if (!info || dev < 0 || dev >= n)
        return gc_fail(err, GC_E_INVALID, "gpu: device %d does not exist (%d visible)", dev, n);
    memset(info, 0, sizeof *info);
    cudaDeviceProp p;
    GC_CUDA(cudaGetDeviceProperties(&p, dev));
    snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof p.name, p.name);
    info->total_mem = p.totalGlobalMem;
    info->sm_count = p.multiProcessorCount;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->pci_bus_id = p.pciBusID;
    /* only for placing the daemon's threads near the device: not worth failing over */
    if (cudaDeviceGetPCIBusId(info->pci_address, (int)sizeof info->pci_address, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        info->pci_address[0] = '\0';
    }
    int cur = 0;
    GC_CUDA(cudaGetDevice(&cur));
    GC_CUDA(cudaSetDevice(dev));
    size_t fr = 0, tot = 0;
    cudaError_t rc = cudaMemGetInfo(&fr, &tot);
    (void)cudaSetDevice(cur);
    GC_CUDA(rc);
    info->free_mem = fr;
    gc_error_clear(err);
    return GC_OK;
}

namespace gcgpu {

int device_sm_count(int *sms, gc_error *err)
{
    static std::atomic<int> cache[64];
    int dev = 0;
    GC_CUDA(cudaGetDevice(&dev));
    int n = dev >= 0 && dev < 64 ? cache[dev].load(std::memory_order_relaxed) : 0;
    if (n <= 0) {
        GC_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
        if (n <= 0)
            return gc_fail(err, GC_E_DEVICE, "cuda: device %d reports %d SMs", dev, n);
        if (dev >= 0 && dev < 64)
            cache[dev].store(n, std::memory_order_relaxed);
    }
    *sms = n;
    return GC_OK;
}

namespace {

struct Occupancy {
    const void *func;
    int dev;
    size_t dyn_smem;
    int per_sm;
};

std::mutex occupancy_lock;
Occupancy occupancy_cache[64]; /* a few kernels x widths x devices; full: not cached */
int occupancy_used;

bool occupancy_lookup(const void *func, int dev, size_t dyn_smem, int *per_sm)
{
    std::lock_guard<std::mutex> hold(occupancy_lock);
    for (int i = 0; i < occupancy_used; i++) {
        const Occupancy &o = occupancy_cache[i];
        if (o.func == func && o.dev == dev && o.dyn_smem == dyn_smem) {
            *per_sm = o.per_sm;
            return true;
        }
    }
    return false;
}

void occupancy_store(const void *func, int dev, size_t dyn_smem, int per_sm)
{
    std::lock_guard<std::mutex> hold(occupancy_lock);
    if (occupancy_used < 64)
        occupancy_cache[occupancy_used++] = Occupancy{ func, dev, dyn_smem, per_sm };
}

} // namespace

int resident_blocks_per_sm(const void *func, size_t dyn_smem, int *per_sm, gc_error *err)
{
    int dev = 0;
    GC_CUDA(cudaGetDevice(&dev));
    if (occupancy_lookup(func, dev, dyn_smem, per_sm))
        return GC_OK;
    GC_CUDA(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn_smem));
    int n = 0;
    GC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, func, kThreads, dyn_smem));
    if (n < 1)
        return gc_fail(err, GC_E_DEVICE, "gpu rle: a kernel does not fit on one SM (%zu bytes of shared memory)",
                       dyn_smem);
    occupancy_store(func, dev, dyn_smem, n);
    *per_sm = n;
    return GC_OK;
}

} // namespace gcgpu
