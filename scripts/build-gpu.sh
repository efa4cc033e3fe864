#!/bin/sh
# build-gpu.sh - build the CUDA suites and benchmarks (rle and bzip2) on a CPU
# machine (nvcc, no GPU needed) for a GPU host; see scripts/gpu-suite.sh and
# scripts/gpu-bzip2-bench.sh for the runs there.
#
#   scripts/build-gpu.sh              direct nvcc/gcc build into build-gpu/bin
#   scripts/build-gpu.sh --autotools  also configure --with-cuda in build-gpu/
#                                     and `make gpu-programs` (the product build)
#
# The direct build needs only this tree's engine folders and tests/ (so it works
# while the rest of the autotools build is in flux). Binaries are stripped and
# link the CUDA runtime statically: carry build-gpu/bin to the GPU host
# (test_gpu_bzip2 also links libbz2 dynamically, its oracle: the host has it).
# CUDA_ARCHS (default 90) picks the architectures.
set -eu
cd "$(dirname "$0")/.."
. scripts/engine-files.sh
NVCC=${NVCC:-nvcc}
ARCHS=${CUDA_ARCHS:-90}
GENCODE=""
for a in $ARCHS; do
    # warp reductions (__reduce_*_sync) and the b1 tensor-core CRC need sm_80+
    case $a in [1-7][0-9]) echo "CUDA_ARCHS: the CUDA backend needs sm_80 or later, not sm_$a" >&2; exit 1 ;; esac
    GENCODE="$GENCODE -gencode arch=compute_$a,code=sm_$a"
done
NVFLAGS="-std=c++17 -O3 $GENCODE -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings $(engine_includes)"
CFLAGS="-std=c11 -O2 -pthread -Wall -Wextra -Werror -D_GNU_SOURCE $(engine_includes)"
O=build-gpu/obj
B=build-gpu/bin
mkdir -p "$O" "$B"
pids=""
# the CPU engine: rle, and bzip2 (the reference of the bzip2 suite and benchmark, and
# what the CUDA bzip2 encoder may share with the CPU)
ENGINE=""
cpids=""
for f in $ENGINE_COMMON_SOURCES $(engine_rle_sources) $(engine_bz2_sources); do
    gcc $CFLAGS -c "$f" -o "$O/$(basename "$f" .c).o" &
    cpids="$cpids $!"
    ENGINE="$ENGINE $O/$(basename "$f" .c).o"
done
for p in $cpids; do wait "$p"; done
# the crafted stream the bzip2 decoder's suite checks (tests/bz2_oversub.h)
gcc $CFLAGS -c tests/bz2_oversub.c -o "$O/bz2_oversub.o"
gcc -std=c11 -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes $(engine_includes) \
    -c gpu/gpu_stub.c -o "$O/gpu_stub.o" # the CPU-only API must keep compiling too
CUDA_OBJS=""
for f in $(engine_cuda_sources); do
    $NVCC $NVFLAGS -c "$f" -o "$O/$(basename "$f" .cu).o" &
    pids="$pids $!"
    CUDA_OBJS="$CUDA_OBJS $O/$(basename "$f" .cu).o"
done
for p in $pids; do wait "$p"; done
# every engine .cu (named from the sources: no stale object of a removed file); not gpu_stub
rm -f "$O/libgccuda.a"
ar rcs "$O/libgccuda.a" $CUDA_OBJS
$NVCC $NVFLAGS -o "$B/test_gpu_rle" tests/gpu/test_gpu_rle.cu "$O/libgccuda.a" $ENGINE -lpthread &
p1=$!
$NVCC $NVFLAGS -o "$B/bench_gpu_rle" tests/bench/bench_gpu_rle.cu "$O/libgccuda.a" $ENGINE -lpthread &
p2=$!
$NVCC $NVFLAGS -o "$B/test_gpu_bzip2" tests/gpu/test_gpu_bzip2.cu "$O/libgccuda.a" $ENGINE -lbz2 -lpthread &
p3=$!
$NVCC $NVFLAGS -o "$B/bench_gpu_bzip2" tests/bench/bench_gpu_bzip2.cu "$O/libgccuda.a" $ENGINE -lpthread &
p4=$!
$NVCC $NVFLAGS -o "$B/test_gpu_bzip2_stages" tests/gpu/test_gpu_bzip2_stages.cu "$O/libgccuda.a" $ENGINE -lpthread &
p5=$!
# the bzip2 decoder's suite (libbz2 makes its streams) and benchmark
$NVCC $NVFLAGS -o "$B/test_gpu_bzip2_dec" tests/gpu/test_gpu_bzip2_dec.cu "$O/libgccuda.a" $ENGINE "$O/bz2_oversub.o" -lbz2 \
    -lpthread &
p6=$!
$NVCC $NVFLAGS -o "$B/bench_gpu_bzip2_dec" tests/bench/bench_gpu_bzip2_dec.cu "$O/libgccuda.a" $ENGINE -lpthread &
p7=$!
wait $p1
wait $p2
wait $p3
wait $p4
wait $p5
wait $p6
wait $p7
if [ -n "${GPU_VARIANT_FLAGS:-}" ]; then
    # a benchmark variant built with other kernel knobs (e.g. -DGC_ENC_MINB=4 -DGC_DEC_MINB=3)
    rm -rf "$O/var" && mkdir -p "$O/var" # no stale object may stand in for one that failed
    vpids=""
    for f in $(engine_cuda_sources); do
        $NVCC $NVFLAGS $GPU_VARIANT_FLAGS -c "$f" -o "$O/var/$(basename "$f" .cu).o" &
        vpids="$vpids $!"
    done
    for p in $vpids; do wait "$p"; done
    $NVCC $NVFLAGS $GPU_VARIANT_FLAGS -o "$B/bench_gpu_rle_variant" tests/bench/bench_gpu_rle.cu "$O"/var/*.o \
        $ENGINE -lpthread
    strip "$B/bench_gpu_rle_variant"
fi
strip "$B/test_gpu_rle" "$B/bench_gpu_rle" "$B/test_gpu_bzip2" "$B/bench_gpu_bzip2" "$B/test_gpu_bzip2_stages" \
    "$B/test_gpu_bzip2_dec" "$B/bench_gpu_bzip2_dec"
cp scripts/gpu-suite.sh scripts/gpu-bzip2-bench.sh scripts/gpu-bzip2-dec-bench.sh "$B/" 2>/dev/null || true
ls -l "$B"
if [ "${1:-}" = "--autotools" ]; then
    autoreconf -fi
    mkdir -p build-gpu && cd build-gpu
    ../configure --disable-shared --with-cuda
    make -j2 && make -j2 gpu-programs
    strip tests/gpu/test_gpu_rle tests/bench/bench_gpu_rle tests/gpu/test_gpu_bzip2 tests/bench/bench_gpu_bzip2 \
        tests/gpu/test_gpu_bzip2_stages tests/gpu/test_gpu_bzip2_dec tests/bench/bench_gpu_bzip2_dec
fi
