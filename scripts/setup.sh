#!/bin/bash
# One command on a fresh Debian 12 machine: install dependencies, build, and
# run the main job (scripts/demo.sh: the daemon on a private socket serving a
# real compress/decompress through gpucomp).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
scripts/demo.sh build
