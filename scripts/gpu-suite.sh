#!/bin/sh
# gpu-suite.sh - on a GPU host: the CUDA rle suite, the same suite's --quick
# mode under compute-sanitizer memcheck, and the benchmark; tables last.
#
#   scripts/gpu-suite.sh [BIN_DIR]      (default build-gpu/bin, made by
#                                        scripts/build-gpu.sh on any machine with nvcc)
# Environment: LOGDIR (default $OUT or /tmp/gpu-suite) keeps the full logs;
# SUITE_FLAGS (e.g. --big for 256 MiB cases), BENCH_FLAGS (e.g. --size 512),
# SKIP_MEMCHECK=1, MEMCHECK_TIMEOUT (s, default 300), SUITE_TIMEOUT, BENCH_TIMEOUT (s, 1200).
# Exit status: non-zero if the suite, memcheck or the benchmark's checks failed.
set -u
BIN=${1:-build-gpu/bin}
LOGDIR=${LOGDIR:-${OUT:-/tmp/gpu-suite}}
mkdir -p "$LOGDIR"
status=0
echo "== $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"

echo "== GPU suite: $BIN/test_gpu_rle ${SUITE_FLAGS:-}"
t0=$(date +%s)
timeout "${SUITE_TIMEOUT:-1200}" "$BIN/test_gpu_rle" ${SUITE_FLAGS:-} > "$LOGDIR/suite.log" 2>&1
rc=$?
grep -E '^(FAIL|SKIP|device)' "$LOGDIR/suite.log" | head -40
suite_line=$(tail -1 "$LOGDIR/suite.log")
echo "suite: $suite_line (exit $rc, $(( $(date +%s) - t0 )) s)"
[ $rc -eq 0 ] || status=1

if [ "${SKIP_MEMCHECK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    echo "== compute-sanitizer --tool memcheck $BIN/test_gpu_rle --quick"
    t0=$(date +%s)
    # --report-api-errors no: the suite deliberately makes cudaHostRegister fail (a
    # read-only memfd mapping) to test the staging fallback; that API error is expected.
    timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool memcheck --report-api-errors no \
        --leak-check no --error-exitcode 99 \
        "$BIN/test_gpu_rle" --quick > "$LOGDIR/memcheck.log" 2>&1
    mrc=$?
    grep -E '^(FAIL|=========)' "$LOGDIR/memcheck.log" | head -30
    mem_line="$(tail -1 "$LOGDIR/memcheck.log") (exit $mrc, $(( $(date +%s) - t0 )) s)"
    echo "memcheck: $mem_line"
    [ $mrc -eq 0 ] || status=1
else
    mem_line="not run"
fi

echo "== benchmark: $BIN/bench_gpu_rle ${BENCH_FLAGS:-}"
timeout "${BENCH_TIMEOUT:-1200}" "$BIN/bench_gpu_rle" ${BENCH_FLAGS:-} > "$LOGDIR/bench.log" 2>&1
brc=$?
[ $brc -eq 0 ] || status=1
sed -n '1,/^### /p' "$LOGDIR/bench.log" | grep -v '^### ' | grep -v '^$'
echo
echo "suite: $suite_line"
echo "memcheck (--quick): $mem_line"
sed -n '/^### /,$p' "$LOGDIR/bench.log"
exit $status
