#!/bin/bash
# A/B of two gpucompd binaries on the memfd fast path (CPU engine), run
# alternately with the same bench client so both see the same machine load.
# Usage: scripts/daemon-ab.sh OLD_GPUCOMPD NEW_GPUCOMPD BENCH_DAEMON [ROUNDS]
# Prints bench_daemon's table rows under "== old|new round N".
set -uo pipefail
old=$1 new=$2 bench=$3 rounds=${4:-2}
for round in $(seq "$rounds"); do
    for v in old new; do
        bin=$old
        [ "$v" = new ] && bin=$new
        dir=$(mktemp -d)
        "$bin" --socket "$dir/sock" --gpu=off --log-level=err &
        pid=$!
        for _ in $(seq 100); do [ -S "$dir/sock" ] && break; sleep 0.1; done
        echo "== $v round $round"
        "$bench" "$dir/sock" large 256 | grep -v device
        "$bench" "$dir/sock" manyfd 8 16 4 | grep -v device
        "$bench" "$dir/sock" small 8 4096 200 | grep -v device
        kill "$pid"
        wait "$pid" 2>/dev/null
        rm -rf "$dir"
    done
done
