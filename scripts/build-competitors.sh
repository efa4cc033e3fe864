#!/bin/bash
# build-competitors.sh - build the GPU competitors libcubwt and bzip2gpu of the benchmark
# harness on a machine with nvcc (no GPU needed); run them on the GPU host with
# scripts/bench-gpu-libs.sh (scripts/bench.sh --competitors DIR does).
#
#   scripts/build-competitors.sh [--cubwt DIR] [--bzip2gpu DIR] [--out DIR]
#
#   --cubwt DIR     libcubwt source tree (libcubwt.cu, libcubwt.cuh); default third_party/libcubwt,
#                   cloned from https://github.com/IlyaGrebnov/libcubwt when absent
#   --bzip2gpu DIR  bzip2gpu source tree (Makefile, src/, include/); default third_party/bzip2gpu,
#                   cloned from https://github.com/weissenberger/bzip2gpu when absent
#   --out DIR       output folder (default build-comp; keep it git-ignored)
#
# Writes to OUT (stripped; carry OUT alone to the GPU host, a few MB):
#   bench_cubwt     tests/bench/bench_cubwt.cu (ours, -Wall -Wextra -Werror) linked with
#                   libcubwt.cu compiled with nvcc at its own defaults (-O3)
#   bz2gpu          bzip2gpu's demo program as its Makefile builds it (bz2gpu IN.bz2 OUT), with
#                   -arch=native replaced by the sm_XX below and -march=native dropped
#   bench_bzip2gpu  tests/bench/bench_bzip2gpu.cu (ours, -Werror) linked with bzip2gpu's objects
#                   (all but its main.o); times bz2gpu::decode_stream, checks the output
#   libgomp.so.1    bzip2gpu's OpenMP runtime, found through RPATH=$ORIGIN
#   BUILD.txt       what built, from which sources, and the errors of what did not
# bzip2gpu (2024) predates CUDA 13's CCCL 3, which dropped cub::CountingInputIterator,
# cub::TransformInputIterator and thrust::unary_function: the build force-includes a small
# header of ours (OUT/obj/cccl3_compat.h, written here) aliasing them to Thrust's iterators;
# its sources are compiled in a copy (OUT/obj/bzip2gpu) and never changed.
# A competitor that does not build is reported (here and in BUILD.txt) and the other is still
# built; exit status 1 only when neither built. Nothing of either project enters the repository.
# Environment: NVCC (default nvcc, else /usr/local/cuda/bin/nvcc), CUDA_ARCHS (default 90).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CUBWT=""
BZG=""
OUTD=build-comp
while [ $# -gt 0 ]; do
    case $1 in
    --cubwt) CUBWT=${2:?--cubwt DIR}; shift ;;
    --bzip2gpu) BZG=${2:?--bzip2gpu DIR}; shift ;;
    --out) OUTD=${2:?--out DIR}; shift ;;
    -h | --help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "build-competitors.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
NVCC=${NVCC:-nvcc}
command -v "$NVCC" > /dev/null 2>&1 || NVCC=/usr/local/cuda/bin/nvcc
ARCHS=${CUDA_ARCHS:-90}
GENCODE=""
for a in $ARCHS; do GENCODE="$GENCODE -gencode arch=compute_$a,code=sm_$a"; done

fetch_src() { # fetch_src DIR URL: clone when DIR is not there
    if [ ! -d "$1" ]; then
        echo "cloning $2 into $1"
        git clone -q --depth 1 "$2" "$1"
    fi
}
src_rev() { if [ -e "$1/.git" ]; then git -C "$1" rev-parse --short HEAD; else echo "tree without git metadata"; fi; }
if [ -z "$CUBWT" ]; then CUBWT=third_party/libcubwt; fetch_src "$CUBWT" https://github.com/IlyaGrebnov/libcubwt || true; fi
if [ -z "$BZG" ]; then BZG=third_party/bzip2gpu; fetch_src "$BZG" https://github.com/weissenberger/bzip2gpu || true; fi
CUBWT=$(cd "$CUBWT" 2> /dev/null && pwd || echo "$CUBWT")
BZG=$(cd "$BZG" 2> /dev/null && pwd || echo "$BZG")

mkdir -p "$OUTD/obj"
OUT=$(cd "$OUTD" && pwd)
OBJ=$OUT/obj
rm -f "$OUT/bench_cubwt" "$OUT/bz2gpu" "$OUT/bench_bzip2gpu" "$OUT/libgomp.so.1"

build_cubwt() {
    if [ ! -f "$CUBWT/libcubwt.cu" ] || [ ! -f "$CUBWT/libcubwt.cuh" ]; then echo "no libcubwt.cu/.cuh in $CUBWT"; return 1; fi
    # shellcheck disable=SC2086 # GENCODE: several words
    "$NVCC" -std=c++17 -O3 $GENCODE -c "$CUBWT/libcubwt.cu" -o "$OBJ/libcubwt.o" || return 1
    # shellcheck disable=SC2086
    "$NVCC" -std=c++17 -O3 $GENCODE -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -isystem "$CUBWT" \
        "$ROOT/tests/bench/bench_cubwt.cu" "$OBJ/libcubwt.o" -o "$OUT/bench_cubwt" || return 1
    strip "$OUT/bench_cubwt"
}

build_bzip2gpu() {
    if [ ! -f "$BZG/Makefile" ] || [ ! -d "$BZG/src" ] || [ ! -d "$BZG/include" ]; then echo "no Makefile/src/include in $BZG"; return 1; fi
    rm -rf "$OBJ/bzip2gpu"
    mkdir -p "$OBJ/bzip2gpu"
    cp -R "$BZG/Makefile" "$BZG/src" "$BZG/include" "$OBJ/bzip2gpu/" || return 1
    mkdir -p "$OBJ/bzip2gpu/bin"
    cat > "$OBJ/cccl3_compat.h" << 'EOF'
/* written by gpucompd's scripts/build-competitors.sh: names CCCL 3 (CUDA 13) removed */
#if defined(__CUDACC__)
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cstddef>
#if CCCL_MAJOR_VERSION >= 3
namespace cub {
template <typename T, typename Off = std::ptrdiff_t> using CountingInputIterator = thrust::counting_iterator<T>;
template <typename V, typename Op, typename It, typename Off = std::ptrdiff_t>
using TransformInputIterator = thrust::transform_iterator<Op, It, V, V>;
}
THRUST_NAMESPACE_BEGIN
template <typename A, typename R> struct unary_function { using argument_type = A; using result_type = R; };
THRUST_NAMESPACE_END
#endif
#endif
EOF
    # its Makefile's flags, with our architectures for -arch=native and no -march=native
    make -C "$OBJ/bzip2gpu" -j"$(nproc)" NVCC="$NVCC" \
        NVCCFLAGS="-std=c++17 -O3 $GENCODE -include $OBJ/cccl3_compat.h -Xcompiler \"-Wall -std=c++17 -O3 -fopenmp\"" \
        LDFLAGS="-lstdc++fs -lgomp -Xlinker -rpath -Xlinker '\$\$ORIGIN'" || return 1
    cp "$OBJ/bzip2gpu/bin/bz2gpu" "$OUT/bz2gpu" || return 1
    local objs="" o
    for o in "$OBJ"/bzip2gpu/bin/*.o "$OBJ"/bzip2gpu/bin/*.obj; do
        case $o in */main.o) ;; *) objs="$objs $o" ;; esac
    done
    # shellcheck disable=SC2086,SC2016 # GENCODE and objs: several words; $ORIGIN: the linker's
    "$NVCC" -std=c++17 -O3 $GENCODE -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
        -isystem "$OBJ/bzip2gpu/include" "$ROOT/tests/bench/bench_bzip2gpu.cu" $objs \
        -o "$OUT/bench_bzip2gpu" -lstdc++fs -lgomp -Xlinker -rpath -Xlinker '$ORIGIN' || return 1
    gomp=$(gcc -print-file-name=libgomp.so.1 2> /dev/null || true)
    case $gomp in /*) cp -L "$gomp" "$OUT/libgomp.so.1" ;; *) echo "libgomp.so.1 not found: the GPU host must have it" ;; esac
    strip "$OUT/bz2gpu" "$OUT/bench_bzip2gpu"
}

built=0
{
    echo "# build-competitors.sh $(date -u '+%Y-%m-%d %H:%M UTC'), $("$NVCC" --version | tail -1), archs $ARCHS"
} > "$OUT/BUILD.txt"
for c in cubwt bzip2gpu; do
    case $c in cubwt) src=$CUBWT ;; *) src=$BZG ;; esac
    echo "== building $c from $src ($(src_rev "$src"))"
    if "build_$c" > "$OBJ/$c.log" 2>&1; then
        built=$((built + 1))
        echo "$c: built from $src ($(src_rev "$src"))" | tee -a "$OUT/BUILD.txt"
    else
        echo "$c: did NOT build from $src ($(src_rev "$src")); last lines of $OBJ/$c.log:" | tee -a "$OUT/BUILD.txt" >&2
        grep -E 'error|Error' "$OBJ/$c.log" | head -n 15 | sed 's/^/  /' | tee -a "$OUT/BUILD.txt" >&2
        tail -n 5 "$OBJ/$c.log" | sed 's/^/  /' | tee -a "$OUT/BUILD.txt" >&2
    fi
done
ls -l "$OUT"/bench_* "$OUT"/bz2gpu "$OUT"/libgomp.so.1 2> /dev/null || true
echo "carry $OUTD without obj/ to the GPU host ($(du -sh --exclude=obj "$OUT" | cut -f1)); there: scripts/bench-gpu-libs.sh --bin $OUTD ..."
[ "$built" -gt 0 ]
