#!/bin/sh
# Build the Python module (python/) against the libgpucomp-client of a build
# tree, in place: python/gpucomp/_gpucomp*.so. Then
#     LD_LIBRARY_PATH=BUILD/libclient/.libs PYTHONPATH=python /usr/bin/python3 -c 'import gpucomp'
# Usage: scripts/build-python.sh [BUILD_DIR] (default: build). Exit 77 when
# python3's headers or setuptools are missing (python3-dev, python3-setuptools).
# The objects and the build log go to $PYTHON_WORK_DIR (default BUILD_DIR).
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import sysconfig, os, setuptools; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
    echo "build-python: $py has no headers or setuptools (install python3-dev python3-setuptools)" >&2
    exit 77
fi
work=${PYTHON_WORK_DIR:-$build}
cd "$top/python"
GPUCOMP_INCLUDE_DIR="$top/libclient" GPUCOMP_LIBRARY_DIR="$build/libclient/.libs" \
    "$py" setup.py -q build_ext --inplace --build-temp "$work/python-temp" >"$work/python-build.log" 2>&1 \
    || { cat "$work/python-build.log" >&2; exit 1; }
