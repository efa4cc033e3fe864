#!/bin/bash
# bench-gpu-libs.sh - the GPU library competitors of the benchmark harness, on the
# GPU host: libcubwt's BWT and bzip2gpu's decoder on each corpus, where they built and run.
#
#   scripts/bench-gpu-libs.sh --bin DIR --corpora DIR --out DIR [--reps N]
#
#   --bin DIR      what scripts/build-competitors.sh wrote (build-comp): bench_cubwt,
#                  bench_bzip2gpu (with libgomp.so.1 beside it), BUILD.txt
#   --corpora DIR  NAME.dat files (scripts/bench-corpora.sh DIR writes them and corpora.txt,
#                  whose order is kept; without corpora.txt every *.dat)
#   --out DIR      appends rows to DIR/results.csv (header written when new: bench.sh's
#                  columns) and writes DIR/gpu-libs.md and logs in DIR/log/
#   --reps N       timed runs per measurement after one warm-up, median (default 3)
# Environment: COMP_TIMEOUT (seconds per program run, default 600), WORKDIR (the bzip2 -9 copies;
#   default $TMPDIR or /tmp).
#
# Per corpus (MB/s = 10^6 input bytes per second of wall time, median of N):
#   bench_cubwt FILE: libcubwt_bwt on the whole file as one string (cut to what libcubwt and
#     the device hold) and in 900,000-byte blocks; libcubwt's API takes host pointers, so the
#     time includes the H2D/D2H copies of pinned buffers (xfer_ms: those copies alone); every
#     output inverted on the CPU and compared (tests/bench/bench_cubwt.cu says more);
#   bench_bzip2gpu FILE.bz2 FILE on a -9 copy (lbzip2 -9, or bzip2 -9 without it; untimed): one
#     bz2gpu::decode_stream call (host parser + GPU stages, output left on the device); the
#     output compared with FILE after every run (tests/bench/bench_bzip2gpu.cu says more).
#     bzip2gpu takes streams of under 2^31 decompressed bytes: a larger corpus is skipped.
# A competitor that did not build, crashed, timed out or gave a wrong output is a row saying
# so (correct: no) and no rate; this script still exits 0 then. Exit 2: bad usage.
# CSV rows: corpus, tool (libcubwt / bzip2gpu), options (what is timed), direction (bwt for
# libcubwt, decompress for bzip2gpu), MBps (empty when not correct), ratio (bzip2 -9's for
# bzip2gpu, FAILED when not correct), cpu_s_per_GB (empty: device-resident), bytes.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
export LC_ALL=C
usage() { sed -n '5,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN="" CORP="" OUT="" REPS=3
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=${2:?--bin DIR}; shift ;;
    --corpora) CORP=${2:?--corpora DIR}; shift ;;
    --out) OUT=${2:?--out DIR}; shift ;;
    --reps) REPS=${2:?--reps N}; shift ;;
    -h | --help) usage ;;
    *) echo "bench-gpu-libs.sh: unknown argument $1" >&2; usage ;;
    esac
    shift
done
if [ -z "$BIN" ] || [ -z "$CORP" ] || [ -z "$OUT" ]; then usage; fi
[ -d "$BIN" ] || { echo "bench-gpu-libs.sh: no directory $BIN" >&2; exit 2; }
[ -d "$CORP" ] || { echo "bench-gpu-libs.sh: no directory $CORP" >&2; exit 2; }
BIN=$(cd "$BIN" && pwd)
mkdir -p "$OUT/log" || exit 2
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/log
TMO=${COMP_TIMEOUT:-600}
W=$(mktemp -d "${WORKDIR:-${TMPDIR:-/tmp}}/gpu-libs.XXXXXX") || exit 2
trap 'rm -rf "$W"' EXIT
CSV=$OUT/results.csv
[ -s "$CSV" ] || echo "corpus,tool,options,direction,MBps,ratio,cpu_s_per_GB,bytes" > "$CSV"
csv() { printf '%s,%s,%s,%s,%s,%s,%s,%s\n' "$1" "$2" "${3//,/;}" "$4" "$5" "$6" "$7" "$8" >> "$CSV"; }
ROWS=$W/rows.tsv # corpus tool timed MBps correct
: > "$ROWS"
# row CORPUS TOOL TIMED DIRECTION MBPS CORRECT(yes/no) RATIO BYTES
row() {
    local r=$7
    [ "$6" = yes ] || r=FAILED
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${5:--}" "$6" >> "$ROWS"
    csv "$1" "$2" "$3" "$4" "$5" "$r" "" "$8"
    echo "  $1 $2: ${5:--} MB/s, correct $6 ($3)"
}
# why LOGFILE RC: one line on a failed run
why() {
    local l
    l=$(grep -m1 -E 'FAIL|CUDA error|rror' "$1" 2> /dev/null | cut -c1-160)
    case $2 in
    124 | 137) echo "timed out after ${TMO}s" ;;
    0) echo "${l:-no result line}" ;;
    *) echo "exit $2${l:+: $l}" ;;
    esac
}
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< " $2"; }
fsize() { stat -c %s "$1" 2> /dev/null || echo 0; }

if [ -f "$CORP/corpora.txt" ]; then LIST=$(cut -f1 "$CORP/corpora.txt"); else LIST=$(find "$CORP" -maxdepth 1 -name '*.dat' | sort | sed 's|.*/||; s/\.dat$//'); fi
[ -n "$LIST" ] || { echo "bench-gpu-libs.sh: no corpora in $CORP" >&2; exit 2; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
echo "== GPU library competitors ($BIN) on ${GPU:-no GPU}, corpora $CORP"
[ -f "$BIN/BUILD.txt" ] && sed 's/^/  build: /' "$BIN/BUILD.txt"
notbuilt() { # notbuilt NAME BINARY: why it is absent
    local l
    l=$(grep -m1 "^$1: did NOT build" "$BIN/BUILD.txt" 2> /dev/null | cut -c1-120)
    echo "${l:-no $2 in $BIN}"
}

for corpus in $LIST; do
    F=$CORP/$corpus.dat
    [ -f "$F" ] || continue
    N=$(fsize "$F")
    # ---- libcubwt ----
    if [ -x "$BIN/bench_cubwt" ]; then
        lg=$LOG/cubwt-$corpus.log
        timeout "$TMO" "$BIN/bench_cubwt" --reps "$REPS" "$F" > "$lg" 2>&1
        rc=$?
        line=$(grep -m1 '^cubwt whole_MBps=' "$lg")
        if [ "$rc" = 0 ] && [ -n "$line" ] && [ "${line##* }" = ok ]; then
            wb=$(kv whole_bytes "$line") xm=$(kv xfer_ms "$line") bb=$(kv blocks_bytes "$line")
            row "$corpus" libcubwt "libcubwt_bwt whole input as one string ($wb bytes); pinned host in/out incl. PCIe copies (alone ${xm} ms)" \
                bwt "$(kv whole_MBps "$line")" yes "" "$wb"
            row "$corpus" libcubwt "libcubwt_bwt per 900000-byte block ($(kv blocks "$line") blocks; $bb bytes); pinned host in/out incl. PCIe copies" \
                bwt "$(kv blocks900k_MBps "$line")" yes "" "$bb"
        else
            row "$corpus" libcubwt "libcubwt_bwt: $(why "$lg" "$rc")" bwt "" no "" "$N"
        fi
    else
        row "$corpus" libcubwt "not built: $(notbuilt cubwt bench_cubwt)" bwt "" no "" "$N"
    fi
    # ---- bzip2gpu ----
    if [ ! -x "$BIN/bench_bzip2gpu" ]; then
        row "$corpus" bzip2gpu "not built: $(notbuilt bzip2gpu bench_bzip2gpu)" decompress "" no "" "$N"
    elif [ "$N" -ge 2147483648 ]; then
        row "$corpus" bzip2gpu "not run: $N bytes is over bzip2gpu's 2^31-1 limit" decompress "" no "" "$N"
    elif ! command -v bzip2 > /dev/null 2>&1; then
        row "$corpus" bzip2gpu "not run: no bzip2 here to make the stream" decompress "" no "" "$N"
    else
        Z=$W/$corpus.bz2
        # lbzip2 writes the same format (one stream, -9 blocks) in a fraction of bzip2's time
        if command -v lbzip2 > /dev/null; then
            lbzip2 -9 -c < "$F" > "$Z"
        else
            bzip2 -9 -c < "$F" > "$Z"
        fi || { row "$corpus" bzip2gpu "not run: making the -9 stream failed" decompress "" no "" "$N"; continue; }
        ratio=$(awk -v n="$N" -v z="$(fsize "$Z")" 'BEGIN { printf "%.3f", (z > 0 ? n / z : 0) }')
        lg=$LOG/bzip2gpu-$corpus.log
        timeout "$TMO" "$BIN/bench_bzip2gpu" "$Z" "$F" --reps "$REPS" > "$lg" 2>&1
        rc=$?
        line=$(grep -m1 '^bzip2gpu decode_MBps=' "$lg")
        if [ "$rc" = 0 ] && [ -n "$line" ] && [ "${line##* }" = ok ]; then
            row "$corpus" bzip2gpu "bz2gpu::decode_stream of a bzip2 -9 stream: host parse ($(kv host_parse_ms "$line") ms) + H2D of the stream + GPU stages; output left on the device" \
                decompress "$(kv decode_MBps "$line")" yes "$ratio" "$N"
        else
            row "$corpus" bzip2gpu "bz2gpu::decode_stream of a bzip2 -9 stream: $(why "$lg" "$rc")" decompress "" no "$ratio" "$N"
        fi
        rm -f "$Z"
    fi
done

{
    echo
    echo "### GPU library competitors: libcubwt and bzip2gpu (${GPU:-no GPU}; scripts/bench-gpu-libs.sh)"
    echo
    echo "MB/s: 10^6 input bytes (bzip2gpu: decompressed bytes) per second of wall time, median of $REPS after a warm-up;"
    echo "correct: the output was checked (libcubwt: inverted on the CPU; bzip2gpu: compared with the corpus)."
    echo
    echo "| corpus | tool | what is timed | MB/s | correct |"
    echo "|---|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$ROWS"
} > "$OUT/gpu-libs.md"
cat "$OUT/gpu-libs.md"
exit 0
