#!/bin/bash
# On a GPU host: the end-to-end benchmark through gpucompd, with the
# CPU engine and the CPU tools users would otherwise run on the same data.
#   scripts/gpu-bench.sh [BUILDDIR]     (default build-gpud: configure --disable-shared --with-cuda)
# Prepare on any machine with nvcc:  scripts/build-gpu.sh && scripts/build-gpud.sh
# Environment: LARGE_MIB (default 4096), MANY="64 16 8" (clients, MiB, rounds),
#              SMALL="64 4096 200" (clients, bytes, rounds).
set -u
B=${1:-build-gpud}
[ -f .device/env.sh ] && . .device/env.sh
large=${LARGE_MIB:-4096}
read -r m_clients m_mib m_rounds <<<"${MANY:-64 16 8}"
read -r s_clients s_bytes s_rounds <<<"${SMALL:-64 4096 200}"
work=$(mktemp -d /tmp/gpucomp-bench-XXXXXX)
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT

start_daemon() {
    "$B/daemon/gpucompd" --socket "$work/sock" --log-level notice --max-request 16G \
        --max-output 16G --memory-budget 32G "$@" &
    pid=$!
    for _ in $(seq 200); do [ -S "$work/sock" ] && return; sleep 0.05; done
    echo "gpucompd did not start"; exit 1
}
stop_daemon() { kill "$pid"; wait "$pid"; }
bench() { "$B/tests/bench/bench_daemon" "$work/sock" "$@" || echo "| $* | FAILED |"; }

echo "== $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null) $(nproc) CPUs"
echo "| run | result |"
echo "| --- | --- |"
# Byte-identity through the whole daemon path: the same file compressed by the
# GPU and by the CPU engine must give the same frame.
"$B/tests/bench/bench_daemon" "$work/ident" gen 256
start_daemon
"$B/programs/gpucomp/gpucomp" --socket "$work/sock" -a rle -c "$work/ident" >"$work/ident.gpu.rle"
"$B/programs/gpucomp/gpucomp" --socket "$work/sock" --stats | grep -i 'requests ok' | sed 's/^/| GPU daemon after the identity run | /; s/$/ |/'
bench large "$large"
bench many "$m_clients" "$m_mib" "$m_rounds"
bench manywarm "$m_clients" "$m_mib" "$m_rounds"
bench manyfd "$m_clients" "$m_mib" "$m_rounds"
bench manyreg "$m_clients" "$m_mib" "$m_rounds"
"$B/programs/gpucomp/gpucomp" --socket "$work/sock" --stats | grep -i registered | sed "s/^/| GPU daemon after manyreg | /; s/$/ |/"
bench small "$s_clients" "$s_bytes" "$s_rounds"
stop_daemon
start_daemon --gpu=off
"$B/programs/gpucomp/gpucomp" --socket "$work/sock" -a rle -c "$work/ident" >"$work/ident.cpu.rle"
if cmp -s "$work/ident.gpu.rle" "$work/ident.cpu.rle"; then
    echo "| 256 MiB through gpucomp, GPU daemon vs CPU daemon | frames byte-identical ($(stat -c %s "$work/ident.cpu.rle") bytes) |"
else
    echo "| 256 MiB through gpucomp, GPU daemon vs CPU daemon | FRAMES DIFFER |"
fi
bench large 1024 | sed 's/^| large/| cpu engine: large/'
bench many "$m_clients" "$m_mib" 2 | sed 's/^| many/| cpu engine: many/'
stop_daemon
# Competitors on the same data (1 GiB): what users run today.
"$B/tests/bench/bench_daemon" "$work/data" gen 1024
for tool in "zstd -1 -T0 -q -c" "lbzip2 -9 -c"; do
    command -v ${tool%% *} >/dev/null || continue
    t0=$(date +%s.%N)
    $tool "$work/data" >"$work/out" || continue
    t1=$(date +%s.%N)
    awk -v t="$tool" -v a="$t0" -v b="$t1" -v z="$(stat -c %s "$work/out")" \
        'BEGIN { printf "| %s, 1 GiB same data | %.2f GB/s compress, ratio %.2f |\n", t, 1073741824 / (b - a) / 1e9, 1073741824 / z }'
done
