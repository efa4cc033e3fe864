#!/bin/bash
# Configure and build into a build directory (default: build/).
# Usage: scripts/build.sh [BUILDDIR] [configure options...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
shift || true
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$top/configure" "$@" >configure.out || { tail -30 configure.out; exit 1; }
grep -A5 'configured$' configure.out || true
make -j"$(nproc)" >make.out 2>&1 || { tail -60 make.out; exit 1; }
echo "build: $dir ok"
