#!/bin/sh
# build-nvcomp-bench.sh - build tests/bench/bench_nvcomp.cu (nvCOMP 6.0, the GPU
# competitor of the benchmark harness) on a CPU machine with nvcc.
#
#   scripts/build-nvcomp-bench.sh
#
# Downloads NVIDIA's wheel nvidia-libnvcomp-cu13==6.0.0.12 from the Python
# package registry into third_party/nvcomp/ (ignored; skipped when the wheel is
# already there), unzips it, and builds build-nvcomp/bench_nvcomp with
# RPATH=$ORIGIN next to a copy of libnvcomp.so.6 (it links the CUDA runtime
# statically and needs only glibc/libstdc++). Carry build-nvcomp/ (~26 MB) to
# the GPU host and run there:
#   build-nvcomp/bench_nvcomp FILE [--chunk BYTES] [--algos a,b] [--type u8|i32|f32] [--iters N]
# Nothing of nvCOMP goes into the repository.
# Environment: NVCC (default nvcc, else /usr/local/cuda/bin/nvcc), CUDA_ARCHS (default 90),
# PIP (default: python3 -m pip).
set -eu
cd "$(dirname "$0")/.."
VER=6.0.0.12
TP=third_party/nvcomp
B=build-nvcomp
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null 2>&1 || NVCC=/usr/local/cuda/bin/nvcc
ARCHS=${CUDA_ARCHS:-90}
GENCODE=""
for a in $ARCHS; do GENCODE="$GENCODE -gencode arch=compute_$a,code=sm_$a"; done

mkdir -p "$TP" "$B"
WHL=$(ls "$TP"/nvidia_libnvcomp_cu13-$VER-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$WHL" ]; then
    ${PIP:-python3 -m pip} download --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
        -d "$TP" "nvidia-libnvcomp-cu13==$VER"
    WHL=$(ls "$TP"/nvidia_libnvcomp_cu13-$VER-*.whl | head -n 1)
fi
ROOT=$TP/wheel/nvidia/libnvcomp
if [ ! -f "$ROOT/lib64/libnvcomp.so.6" ] || [ ! -f "$ROOT/include/nvcomp.h" ] || [ "$WHL" -nt "$ROOT/include/nvcomp.h" ]; then
    rm -rf "$TP/wheel"
    python3 -m zipfile -e "$WHL" "$TP/wheel"
fi
test -f "$ROOT/lib64/libnvcomp.so.6" || { echo "no libnvcomp.so.6 in $WHL" >&2; exit 1; }

# what the library needs beyond the C/C++ runtime (the GPU host has the CUDA 13 driver)
EXTRA=$(readelf -d "$ROOT/lib64/libnvcomp.so.6" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' |
    grep -v -E '^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so' || true)

cp -f "$ROOT/lib64/libnvcomp.so.6" "$B/"
for lib in $EXTRA; do
    case $lib in
    libcuda.so*) ;; # the driver: the GPU host's own
    *)
        src=$(ls /usr/local/cuda/lib64/"$lib" /usr/local/cuda/targets/x86_64-linux/lib/"$lib" 2>/dev/null | head -n 1 || true)
        if [ -z "$src" ]; then echo "libnvcomp.so.6 needs $lib, not found here" >&2; exit 1; fi
        cp -fL "$src" "$B/"
        ;;
    esac
done

"$NVCC" -std=c++17 -O3 $GENCODE -Xcompiler -Wall,-Wextra -I"$ROOT/include" \
    tests/bench/bench_nvcomp.cu -o "$B/bench_nvcomp" \
    -L"$ROOT/lib64" -l:libnvcomp.so.6 -Xlinker -rpath -Xlinker '$ORIGIN'

# the binary must find libnvcomp beside itself
if ! ldd "$B/bench_nvcomp" | grep -q "libnvcomp.so.6 => .*$B/libnvcomp.so.6"; then
    echo "build-nvcomp-bench: bench_nvcomp does not resolve libnvcomp.so.6 from $B:" >&2
    ldd "$B/bench_nvcomp" >&2
    exit 1
fi
echo "built $B/bench_nvcomp ($(du -sh "$B" | cut -f1) in $B/: carry the folder to the GPU host)"
