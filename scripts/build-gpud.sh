#!/bin/bash
# Build the daemon, CLI and the daemon and CPU-engine benchmarks with CUDA as real executables
# (--disable-shared) into build-gpud/, stripped, for copying to a GPU host.
set -euo pipefail
cd "$(dirname "$0")/.."
../shared/device/bundle.sh .device >/dev/null 2>&1 || [ -f .device/env.sh ]
scripts/build.sh build-gpud --disable-shared --with-cuda
cd build-gpud
make -j2 tests/bench/bench_daemon tests/bench/bench_bzip2 >/dev/null
strip daemon/gpucompd programs/gpucomp/gpucomp tests/bench/bench_daemon tests/bench/bench_bzip2
du -sh daemon/gpucompd tests/bench/bench_daemon tests/bench/bench_bzip2
