#!/bin/bash
# The main job, end to end: start gpucompd on a private socket, compress and
# decompress a sample file through `gpucomp` with each codec, verify the
# round trip, and print ratio, speed and which backend served.
# Speed is the sample's size over the wall time of the whole gpucomp command
# (process start, connection, file I/O included), measured here around it:
# what a user of the command gets, not the engine's rate alone.
# Usage: scripts/demo.sh [BUILDDIR] [FILE]   (default: build/, 32 MiB of a tar of /usr/include)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
work=$(mktemp -d /tmp/gpucomp-demo-XXXXXX)
sock="$work/gpucompd.sock"
pid=
trap '[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$work"' EXIT

if [ -n "${2:-}" ]; then
    cp "$2" "$work/sample"
else
    { tar -cf - -C /usr include 2>/dev/null || true; } | head -c 32M >"$work/sample"
fi
"$build/daemon/gpucompd" --socket "$sock" --log-level notice &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
gpucomp="$build/programs/gpucomp/gpucomp --socket $sock --no-fallback"
size=$(stat -c %s "$work/sample")
echo "sample: $size bytes"

now_ns() { date +%s%N; }

# "12.3 MB/s" for $size bytes in the nanoseconds between $1 and $2 (MB: 10^6 bytes).
rate() {
    awk -v b="$size" -v ns="$(($2 - $1))" 'BEGIN { if (ns < 1) ns = 1; printf "%.1f MB/s", b * 1000 / ns }'
}

for algo in bzip2 rle; do
    suffix=$([ $algo = bzip2 ] && echo bz2 || echo rle)
    t0=$(now_ns)
    $gpucomp -v -k -f -a "$algo" "$work/sample"
    t1=$(now_ns)
    mv "$work/sample" "$work/sample.orig"
    t2=$(now_ns)
    $gpucomp -v -d "$work/sample.$suffix"
    t3=$(now_ns)
    if ! cmp -s "$work/sample" "$work/sample.orig"; then
        echo "$algo: round trip FAILED: the decompressed file differs from the sample" >&2
        exit 1
    fi
    echo "$algo: round trip verified; compress $(rate "$t0" "$t1"), decompress $(rate "$t2" "$t3")" \
         "(of the sample's $size bytes, wall time of each gpucomp command)"
    mv "$work/sample.orig" "$work/sample"
done
$gpucomp --stats
