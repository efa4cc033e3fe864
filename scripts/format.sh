#!/bin/bash
# Format the tree's C, C++ (.cc) and CUDA sources with .clang-format (generated protobuf-c
# files aside; files not yet added to git included), or with --check only report the files
# that differ (exit 1).
# Pinned to clang-format 14 (Debian 12's): other versions break lines differently,
# so with another version --check skips (exit 77) rather than fail.
# Usage: scripts/format.sh [--check]
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ] || ! "$fmt" --version | grep -q 'version 14\.'; then
    echo "format: clang-format 14 not found; skipped"
    exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "format: not a git checkout; skipped"
    exit 77
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cc' '*.cu' '*.cuh' | grep -v '\.pb-c\.')
if [ "${1:-}" != --check ]; then
    "$fmt" -i "${files[@]}"
    exit 0
fi
bad=0
for f in "${files[@]}"; do
    if ! "$fmt" "$f" | cmp -s - "$f"; then
        echo "format: $f differs from .clang-format (scripts/format.sh fixes it)"
        bad=1
    fi
done
[ "$bad" = 0 ] && echo "format: ${#files[@]} files as .clang-format says"
exit "$bad"
