#!/bin/bash
# On a GPU host: where the GPU starts to pay for rle compress requests, the
# measurement behind gpucompd's --gpu-min-bytes default. For each
# request size, one daemon with every request on the GPU (--gpu-min-bytes 0)
# and one on the CPU engine (--gpu=off) each serve one client (latency) and
# 64 clients (aggregate throughput) through the buffer API, once with every
# request on the socket and once with every request through the library's
# staging memfds (GPUCOMP_MEMFD_THRESHOLD): the measurement behind the
# library's transport switch too.
#   scripts/gpu-breakeven.sh [BUILDDIR]   (default build-gpud, see gpu-bench.sh)
# Environment: SIZES (bytes, default 64K to 16M), CLIENTS (default 64).
set -u
B=${1:-build-gpud}
[ -f .device/env.sh ] && . .device/env.sh
sizes=${SIZES:-"65536 262144 1048576 2097152 4194304 8388608 16777216"}
clients=${CLIENTS:-64}
work=$(mktemp -d /tmp/gpucomp-breakeven-XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$work"' EXIT

start_daemon() {
    "$B/daemon/gpucompd" --socket "$work/sock" --log-level warning --memory-budget 32G "$@" &
    pid=$!
    for _ in $(seq 200); do [ -S "$work/sock" ] && return; sleep 0.05; done
    echo "gpucompd did not start"; exit 1
}
stop_daemon() { kill "$pid"; wait "$pid"; pid=; rm -f "$work/sock"; }

# rounds so that a run moves about `budget` bytes (at least `least` rounds)
rounds() { local r=$(( $2 / ($1 * $3) )); [ "$r" -lt "$4" ] && r=$4; [ "$r" -gt 400 ] && r=400; echo "$r"; }

# one engine and transport over every size: "size p50_1 gbps_64 p99_64" lines
# into $work/$1; $2 is the library's memfd threshold (GPUCOMP_MEMFD_THRESHOLD)
measure() {
    local name=$1 threshold=$2; shift 2
    export GPUCOMP_MEMFD_THRESHOLD=$threshold
    start_daemon "$@"
    for s in $sizes; do
        one=$("$B/tests/bench/bench_daemon" "$work/sock" small 1 "$s" "$(rounds 1 $((256 << 20)) "$s" 40)")
        many=$("$B/tests/bench/bench_daemon" "$work/sock" small "$clients" "$s" "$(rounds "$clients" $((2 << 30)) "$s" 2)")
        p50=$(sed -n 's/.*latency p50 \([0-9.]*\) ms.*/\1/p' <<<"$one" | head -1)
        gbs=$(sed -n 's/.*aggregate \([0-9.]*\) GB\/s.*/\1/p' <<<"$many" | head -1)
        p99=$(sed -n 's/.*p99 \([0-9.]*\) ms.*/\1/p' <<<"$many" | head -1)
        echo "$s ${p50:-?} ${gbs:-?} ${p99:-?}" >>"$work/$name"
    done
    stop_daemon
}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null) $(nproc) CPUs"
big=1099511627776 # 1 TiB: the socket for every size
measure cpu-socket $big --gpu=off
measure gpu-socket $big --gpu-min-bytes 0
measure cpu-memfd 1 --gpu=off
measure gpu-memfd 1 --gpu-min-bytes 0
for t in socket memfd; do
    echo
    echo "Transport: $t"
    echo
    echo "| request | 1 client p50 ms, CPU engine | 1 client p50 ms, GPU | $clients clients GB/s, CPU engine | $clients clients GB/s, GPU | $clients clients p99 ms, CPU / GPU |"
    echo "| --- | --- | --- | --- | --- | --- |"
    paste -d' ' "$work/cpu-$t" "$work/gpu-$t" | while read -r s c50 cgb c99 _ g50 ggb g99; do
        printf '| %s KiB | %s | %s | %s | %s | %s / %s |\n' $((s >> 10)) "$c50" "$g50" "$cgb" "$ggb" "$c99" "$g99"
    done
done
