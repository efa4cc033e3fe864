/*
 * gc_hd.h - GC_HD marks a small inline function that a format header shares
 * between C and CUDA: host and device code under nvcc, plain C elsewhere.
 */
#ifndef GC_HD_H
#define GC_HD_H

#ifdef __CUDACC__
#define GC_HD __host__ __device__
#else
#define GC_HD
#endif

#endif
