#!/bin/sh
# gpu-suite.sh - on a GPU host: the CUDA rle suite, the same suite's --quick
# mode under compute-sanitizer memcheck, racecheck and synccheck, and the
# benchmark; tables last.
#
#   scripts/gpu-suite.sh [BIN_DIR]      (default build-gpu/bin, made by
#                                        scripts/build-gpu.sh on any machine with nvcc)
# Environment: LOGDIR (default $OUT or /tmp/gpu-suite) keeps the full logs;
# SUITE_FLAGS (e.g. --big for 256 MiB cases), BENCH_FLAGS (e.g. --size 512),
# SKIP_MEMCHECK=1 (no sanitizer runs), MEMCHECK_TIMEOUT (s per tool, default 300),
# SUITE_TIMEOUT, BENCH_TIMEOUT (s, 1200).
# Exit status: non-zero if the suite, a sanitizer or the benchmark's checks failed.
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

# One compute-sanitizer tool over the suite's --quick cases; sets san_line.
# --report-api-errors no: the suite deliberately makes cudaHostRegister fail (a
# read-only memfd mapping) to test the staging fallback; that API error is expected.
sanitize() {
    tool=$1
    shift
    echo "== compute-sanitizer --tool $tool $BIN/test_gpu_rle --quick"
    t0=$(date +%s)
    timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --report-api-errors no \
        --error-exitcode 99 "$@" "$BIN/test_gpu_rle" --quick > "$LOGDIR/$tool.log" 2>&1
    src=$?
    grep -E '^(FAIL|=========)' "$LOGDIR/$tool.log" | head -30
    san_line="$(tail -1 "$LOGDIR/$tool.log") (exit $src, $(( $(date +%s) - t0 )) s)"
    echo "$tool: $san_line"
    [ $src -eq 0 ] || status=1
}
mem_line="not run"
race_line="not run"
sync_line="not run"
if [ "${SKIP_MEMCHECK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    sanitize memcheck --leak-check no
    mem_line=$san_line
    # racecheck: shared-memory hazards; synccheck: barriers and warp-wide
    # instructions (the CRC's mma.sync) reached by only part of a warp or block
    sanitize racecheck
    race_line=$san_line
    sanitize synccheck
    sync_line=$san_line
fi

echo "== benchmark: $BIN/bench_gpu_rle ${BENCH_FLAGS:-}"
timeout "${BENCH_TIMEOUT:-1200}" "$BIN/bench_gpu_rle" ${BENCH_FLAGS:-} > "$LOGDIR/bench.log" 2>&1
brc=$?
[ $brc -eq 0 ] || status=1
sed -n '1,/^### /p' "$LOGDIR/bench.log" | grep -v '^### ' | grep -v '^$'
echo
echo "suite: $suite_line"
echo "memcheck (--quick): $mem_line"
echo "racecheck (--quick): $race_line"
echo "synccheck (--quick): $sync_line"
sed -n '/^### /,$p' "$LOGDIR/bench.log"
exit $status
