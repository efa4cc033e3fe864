#!/bin/bash
# A/B of two gpucompd binaries on the memfd fast path, run alternately with
# the same bench client so both see the same machine (and the same load).
# Usage: scripts/daemon-ab.sh OLD_GPUCOMPD NEW_GPUCOMPD BENCH_DAEMON [ROUNDS]
# Environment: ARGS (daemon options, default "--gpu=off"), LARGE_MIB (256),
#   MANY ("8 16 4": clients, MiB, rounds; run as manyfd and manyreg),
#   SMALL ("8 4096 200": clients, bytes, rounds).
# On a GPU host: ARGS="--max-request 16G --max-output 16G --memory-budget 32G"
#   LARGE_MIB=4096 MANY="64 16 8" SMALL="64 4096 200".
# Prints bench_daemon's table rows under "== old|new round N".
set -uo pipefail
old=$1 new=$2 bench=$3 rounds=${4:-2}
args=${ARGS:---gpu=off}
read -r m_clients m_mib m_rounds <<<"${MANY:-8 16 4}"
read -r s_clients s_bytes s_rounds <<<"${SMALL:-8 4096 200}"
for round in $(seq "$rounds"); do
    for v in old new; do
        bin=$old
        [ "$v" = new ] && bin=$new
        dir=$(mktemp -d)
        # shellcheck disable=SC2086
        "$bin" --socket "$dir/sock" --log-level=err $args &
        pid=$!
        for _ in $(seq 200); do [ -S "$dir/sock" ] && break; sleep 0.05; done
        echo "== $v round $round"
        "$bench" "$dir/sock" large "${LARGE_MIB:-256}" | grep -v device
        "$bench" "$dir/sock" manyfd "$m_clients" "$m_mib" "$m_rounds" | grep -v device
        "$bench" "$dir/sock" manyreg "$m_clients" "$m_mib" "$m_rounds" | grep -v device
        "$bench" "$dir/sock" small "$s_clients" "$s_bytes" "$s_rounds" | grep -v device
        kill "$pid"
        wait "$pid" 2>/dev/null
        rm -rf "$dir"
    done
done
