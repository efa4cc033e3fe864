#!/bin/sh
# Every C, C++ and CUDA source is as .clang-format formats it (skips without
# clang-format 14 or outside a git checkout, as in distcheck).
src=$(cd "$(dirname "$0")/.." && pwd)
exec bash "$src/scripts/format.sh" --check
