#!/bin/bash
# The long soak of "memory goes back when clients leave": 64 clients of whole
# requests and streams against a fresh gpucompd for SECONDS (default 300), then
# the daemon's private memory (Private_Dirty) at the baseline, the peak, and once
# back within 50 MB of the baseline (or 10 s after the end). It is
# tests/check_memory with a longer soak, so it fails the same way.
# Usage: scripts/soak.sh [SECONDS] [BUILDDIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-300}
build=$(cd "${2:-$top/build}" && pwd)
make -C "$build" -s tests/check_memory daemon/gpucompd programs/gpucomp/gpucomp >/dev/null
GPUCOMP_SOAK_SECONDS=$seconds GPUCOMPD="$build/daemon/gpucompd" GPUCOMP="$build/programs/gpucomp/gpucomp" \
    "$build/tests/check_memory" 2>&1 | grep -E '^soak:|%:|check_memory.c'
