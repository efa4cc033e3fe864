#!/bin/sh
# bench-stream-pipe.sh - the socket-stream transport through a pipe, measured
# alone: SIZE_MIB of short-run data through `cat | gpucomp -a rle` both ways,
# with the cheapest codec on the CPU engine, so what limits the MB/s is the
# transport (client loop, socket or ring, the daemon's event loop), not the
# codec. Prints MB/s (10^6 input bytes per second, compress; output bytes,
# decompress) and the CPU seconds of the daemon's event-loop thread (its main
# thread) and of gpucomp over the run. gpucomp writes into a pipe, as in
# `gpucomp -dc < F | ...`; a cat behind it writes the file, so the kernel's
# cost of a file's dirty pages (which made gpucomp's own CPU seconds for the
# same decompressed GiB vary from 0.4 to 2.1) lands on cat. Every output is checked: a decompressed
# one against the original, a compressed one by decompressing it on this CPU
# (--local): compressed bytes are compared only with the daemon's file path,
# since daemons before the fix for a trailing empty rle frame give a pipe's
# input other bytes from run to run (docs/DECISIONS.md, "Ring streams").
#
#   scripts/bench-stream-pipe.sh [BUILD_DIR] [SIZE_MIB] [GPUCOMPD] [GPUCOMP]
#
# GPUCOMPD and GPUCOMP default to BUILD_DIR's; pass older binaries to compare.
set -eu
build=${1:-build}
size=${2:-1024}
daemon=${3:-$build/daemon/gpucompd}
cli=${4:-$build/programs/gpucomp/gpucomp}
bench=$build/tests/bench/bench_daemon
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT INT TERM
sock=$dir/sock
"$daemon" --socket="$sock" --gpu=off >"$dir/log" 2>&1 &
pid=$!
i=0
until "$cli" --socket="$sock" --ping >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "gpucompd did not start" >&2; cat "$dir/log" >&2; exit 1; }
    sleep 0.1
done
if [ -x "$bench" ]; then
    "$bench" "$dir/in" gen "$size" >/dev/null
else
    head -c $((size * 1048576)) /dev/urandom | od -An -v -tx1 | tr -d ' \n' | head -c $((size * 1048576)) >"$dir/in"
fi
"$cli" --socket="$sock" -a rle -c "$dir/in" >"$dir/in.rle"
"$cli" --local -d -c "$dir/in.rle" | cmp - "$dir/in" || { echo "the reference does not decompress to the input" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$1/task/$1/stat"; }
hz=$(getconf CLK_TCK)

# run NAME INPUT EXPECTED ARGS...: time one pipe run, compare its output.
run() {
    name=$1 input=$2 expect=$3
    shift 3
    before=$(ticks "$pid")
    t0=$(date +%s.%N)
    rm -f "$dir/rc"
    { cat "$input" | /usr/bin/time -f '%U %S' -o "$dir/time" "$cli" --socket="$sock" "$@" || echo $? >"$dir/rc"; } |
        cat >"$dir/out"
    t1=$(date +%s.%N)
    after=$(ticks "$pid")
    [ ! -e "$dir/rc" ] || { echo "$name: gpucomp failed (exit $(cat "$dir/rc"))" >&2; exit 1; }
    if [ "$name" = compress ]; then
        "$cli" --local -d -c "$dir/out" | cmp - "$input" >&2
    else
        cmp "$dir/out" "$expect" >&2
    fi || { echo "$name: output differs" >&2; ls -l "$dir" >&2; exit 1; }
    cmp -s "$dir/out" "$expect" || echo "$name: output decompresses to the input but differs from the file path's" >&2
    bytes=$(stat -c %s "$expect")
    [ "$name" = compress ] && bytes=$(stat -c %s "$input")
    awk -v n="$name" -v b="$bytes" -v t0="$t0" -v t1="$t1" -v l=$((after - before)) -v hz="$hz" \
        -v c="$(cat "$dir/time")" 'BEGIN { split(c, u, " ");
        printf "| %-10s | %8.0f | %8.2f | %8.2f |\n", n, b / (t1 - t0) / 1e6, l / hz, u[1] + u[2] }'
}
echo "| rle pipe   | MB/s     | loop CPU s | gpucomp CPU s |"
echo "|---|---|---|---|"
run compress "$dir/in" "$dir/in.rle" -a rle -c
run decompress "$dir/in.rle" "$dir/in" -d -a rle -c
