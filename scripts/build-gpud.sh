#!/bin/bash
# Build the daemon, CLI and the daemon and CPU-engine benchmarks with CUDA as real executables
# (--disable-shared) into build-gpud/, stripped, for copying to a GPU host.
set -euo pipefail
cd "$(dirname "$0")/.."
../shared/device/bundle.sh .device >/dev/null 2>&1 || [ -f .device/env.sh ]
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p build-gpud
cd build-gpud
[ -f Makefile ] || ../configure --disable-shared --with-cuda >configure.out
# only the programs: `make all` would also build libgpucomp-bz2, a shared library by nature
make -j2 $(sed -n "s/^BUILT_SOURCES = //p" Makefile) daemon/gpucompd programs/gpucomp/gpucomp tests/bench/bench_daemon tests/bench/bench_bzip2 >make.out 2>&1 ||
    { tail -40 make.out; exit 1; }
strip daemon/gpucompd programs/gpucomp/gpucomp tests/bench/bench_daemon tests/bench/bench_bzip2
du -sh daemon/gpucompd tests/bench/bench_daemon tests/bench/bench_bzip2
