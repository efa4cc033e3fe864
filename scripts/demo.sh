#!/bin/bash
# The main job, end to end: start gpucompd on a private socket, compress and
# decompress a sample file through `gpucomp` with each codec, verify the
# round trip, and print ratio, speed and which backend served.
# Usage: scripts/demo.sh [BUILDDIR] [FILE]   (default: build/, 32 MiB of a tar of /usr/include)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
work=$(mktemp -d /tmp/gpucomp-demo-XXXXXX)
sock="$work/gpucompd.sock"
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT

if [ -n "${2:-}" ]; then
    cp "$2" "$work/sample"
else
    { tar -cf - -C /usr include 2>/dev/null || true; } | head -c 32M >"$work/sample"
fi
"$build/daemon/gpucompd" --socket "$sock" --log-level notice &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
gpucomp="$build/programs/gpucomp/gpucomp --socket $sock"
size=$(stat -c %s "$work/sample")
echo "sample: $size bytes"
for algo in bzip2 rle; do
    suffix=$([ $algo = bzip2 ] && echo bz2 || echo rle)
    $gpucomp -v -k -f -a "$algo" "$work/sample"
    mv "$work/sample" "$work/sample.orig"
    $gpucomp -v -d "$work/sample.$suffix"
    cmp "$work/sample" "$work/sample.orig" && echo "$algo: round trip verified"
    mv "$work/sample.orig" "$work/sample"
done
$gpucomp --stats
