#!/bin/sh
# gpu-suite.sh - on a GPU host: the CUDA rle suite, the same suite's --quick
# mode under compute-sanitizer memcheck, racecheck and synccheck, the same for
# the bzip2 encoder's suite (test_gpu_bzip2) and decoder's (test_gpu_bzip2_dec),
# and the rle benchmark; tables last.
# (The bzip2 benchmark against the CPU tools is scripts/gpu-bzip2-bench.sh.)
#
#   scripts/gpu-suite.sh [BIN_DIR]      (default build-gpu/bin, made by
#                                        scripts/build-gpu.sh on any machine with nvcc)
# Environment: LOGDIR (default $OUT or /tmp/gpu-suite) keeps the full logs;
# SUITE_FLAGS (e.g. --big for 256 MiB cases; both suites), BENCH_FLAGS (e.g. --size 512),
# SKIP_MEMCHECK=1 (no sanitizer runs), MEMCHECK_TIMEOUT (s per tool, default 300),
# SUITE_TIMEOUT, BENCH_TIMEOUT (s, 1200).
# SKIP_BZIP2=1 (no bzip2 suite; skipped anyway, with a note, without $BIN/test_gpu_bzip2).
# Exit status: non-zero if a suite, a sanitizer or the benchmark's checks failed.
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

# One compute-sanitizer tool over a suite's --quick cases; sets san_line.
# Usage: [SAN_PROG_ARGS="program options"] sanitize TOOL PROGRAM LOGNAME [sanitizer options...]
# --report-api-errors no: the rle suite deliberately makes cudaHostRegister fail (a
# read-only memfd mapping) to test the staging fallback; that API error is expected.
sanitize() {
    tool=$1
    prog=$2
    log=$LOGDIR/$3.log
    shift 3
    echo "== compute-sanitizer --tool $tool $BIN/$prog --quick"
    t0=$(date +%s)
    timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --report-api-errors no \
        --error-exitcode 99 "$@" "$BIN/$prog" --quick ${SAN_PROG_ARGS:-} > "$log" 2>&1
    src=$?
    grep -E '^(FAIL|=========)' "$log" | head -30
    san_line="$(tail -1 "$log") (exit $src, $(( $(date +%s) - t0 )) s)"
    echo "$tool: $san_line"
    [ $src -eq 0 ] || status=1
}
mem_line="not run"
race_line="not run"
sync_line="not run"
if [ "${SKIP_MEMCHECK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    sanitize memcheck test_gpu_rle memcheck --leak-check no
    mem_line=$san_line
    # racecheck: shared-memory hazards; synccheck: barriers and warp-wide
    # instructions (the CRC's mma.sync) reached by only part of a warp or block
    sanitize racecheck test_gpu_rle racecheck
    race_line=$san_line
    sanitize synccheck test_gpu_rle synccheck
    sync_line=$san_line
fi

# The bzip2 encoder: its suite (byte identity with the CPU engine, libbz2 oracle),
# then its --quick cases under the same three sanitizer tools.
bz_line="not run"
bz_mem_line="not run"
bz_race_line="not run"
bz_sync_line="not run"
if [ "${SKIP_BZIP2:-0}" = 1 ]; then
    bz_line="skipped (SKIP_BZIP2=1)"
elif [ ! -x "$BIN/test_gpu_bzip2" ]; then
    bz_line="skipped: no $BIN/test_gpu_bzip2"
    echo "== bzip2 suite $bz_line"
else
    echo "== GPU suite: $BIN/test_gpu_bzip2 ${SUITE_FLAGS:-}"
    t0=$(date +%s)
    timeout "${SUITE_TIMEOUT:-1200}" "$BIN/test_gpu_bzip2" ${SUITE_FLAGS:-} > "$LOGDIR/bzip2-suite.log" 2>&1
    rc=$?
    grep -E '^(FAIL|SKIP|device|-- )' "$LOGDIR/bzip2-suite.log" | head -60
    bz_line="$(tail -1 "$LOGDIR/bzip2-suite.log") (exit $rc, $(( $(date +%s) - t0 )) s)"
    echo "bzip2 suite: $bz_line"
    [ $rc -eq 0 ] || status=1
    if [ -x "$BIN/test_gpu_bzip2_stages" ]; then
        echo "== GPU stage test: $BIN/test_gpu_bzip2_stages"
        timeout "${SUITE_TIMEOUT:-1200}" "$BIN/test_gpu_bzip2_stages" > "$LOGDIR/bzip2-stages.log" 2>&1
        rc=$?
        grep -E '^  ' "$LOGDIR/bzip2-stages.log" | grep -v 'stages ok' | head -20
        bz_line="$bz_line; stages: $(tail -1 "$LOGDIR/bzip2-stages.log") (exit $rc)"
        [ $rc -eq 0 ] || status=1
    fi
    if [ "${SKIP_MEMCHECK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
        sanitize memcheck test_gpu_bzip2 bzip2-memcheck --leak-check no
        bz_mem_line=$san_line
        # racecheck runs the stage test's --quick (16 small cases reaching every kernel,
        # about 200 s on an H100): the stream suite's --quick does not finish under it
        if [ -x "$BIN/test_gpu_bzip2_stages" ]; then
            sanitize racecheck test_gpu_bzip2_stages bzip2-racecheck
            bz_race_line="stages: $san_line"
        fi
        sanitize synccheck test_gpu_bzip2 bzip2-synccheck
        bz_sync_line=$san_line
    fi
fi

# The bzip2 decoder: its suite (every way in against the CPU engine, corrupt and
# hostile streams), then its --quick cases under the three sanitizer tools.
dec_line="not run"
dec_mem_line="not run"
dec_race_line="not run"
dec_sync_line="not run"
if [ "${SKIP_BZIP2:-0}" = 1 ]; then
    dec_line="skipped (SKIP_BZIP2=1)"
elif [ ! -x "$BIN/test_gpu_bzip2_dec" ]; then
    dec_line="skipped: no $BIN/test_gpu_bzip2_dec"
else
    echo "== GPU suite: $BIN/test_gpu_bzip2_dec"
    t0=$(date +%s)
    timeout "${SUITE_TIMEOUT:-1200}" "$BIN/test_gpu_bzip2_dec" > "$LOGDIR/bzip2-dec-suite.log" 2>&1
    rc=$?
    grep -E '^(FAIL|SKIP|device|-- )' "$LOGDIR/bzip2-dec-suite.log" | head -40
    dec_line="$(tail -1 "$LOGDIR/bzip2-dec-suite.log") (exit $rc, $(( $(date +%s) - t0 )) s)"
    echo "bzip2 decode suite: $dec_line"
    [ $rc -eq 0 ] || status=1
    if [ "${SKIP_MEMCHECK:-0}" != 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
        sanitize memcheck test_gpu_bzip2_dec bzip2-dec-memcheck --leak-check no
        dec_mem_line=$san_line
        # racecheck: two groups that reach every kernel (randomised blocks, a mixed
        # batch); the whole --quick set does not finish under it in 170 s
        SAN_PROG_ARGS="--only randomised,mixed" sanitize racecheck test_gpu_bzip2_dec bzip2-dec-racecheck
        dec_race_line="randomised + mixed batch: $san_line"
        sanitize synccheck test_gpu_bzip2_dec bzip2-dec-synccheck
        dec_sync_line=$san_line
    fi
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
echo "bzip2 suite: $bz_line"
echo "bzip2 memcheck (--quick): $bz_mem_line"
echo "bzip2 racecheck (--quick): $bz_race_line"
echo "bzip2 synccheck (--quick): $bz_sync_line"
echo "bzip2 decode suite: $dec_line"
echo "bzip2 decode memcheck (--quick): $dec_mem_line"
echo "bzip2 decode racecheck (--quick): $dec_race_line"
echo "bzip2 decode synccheck (--quick): $dec_sync_line"
sed -n '/^### /,$p' "$LOGDIR/bench.log"
exit $status
