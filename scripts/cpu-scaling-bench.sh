#!/bin/bash
# shellcheck disable=SC2317 # cleanup runs from the trap
# cpu-scaling-bench.sh - the CPU engine against lbzip2 and pbzip2 at each thread count:
# in-process, through the daemon (--gpu=off), lbzip2, pbzip2, on a text corpus and a mixed tar.
#
#   scripts/cpu-scaling-bench.sh [--bin DIR] [--corpora DIR] [--out DIR] [--quick]
#                                [--threads "1 2 4"] [--reps R] [--median] [--only "text tar"]
#                                [--env FILE]
#
#   --bin DIR      build tree holding daemon/gpucompd, programs/gpucomp/gpucomp, tests/bench/bench_bzip2
#                  (default build-gpud, else build, whichever has daemon/gpucompd)
#   --corpora DIR  text.dat and tar.dat of scripts/bench-corpora.sh: reused when they have the
#                  size asked for, made there otherwise (default: a temporary folder, removed)
#   --out DIR      table.md, cpu-scaling.csv and logs (default cpu-scaling-out/DATE)
#   --quick        32 MiB per corpus (default 256 MiB: 268 MB, at least 256 MB)
#   --threads L    thread counts (default: powers of two up to nproc, and nproc)
#   --reps R       runs per measure (default 3); best of them, or the median with --median
#   --only L       these corpora of the two (default "text tar"; one per call splits a long
#                  full run; reuse --corpora DIR between calls)
#   --env FILE     sourced first (default .device/env.sh, in the current folder or the
#                  tree's root, when there is one: lbzip2 and pbzip2 on the GPU host)
#
# At each N every command runs under `taskset -c` on the first N CPUs this process may use
# (every CPU it may use when N exceeds them; no pinning when taskset is missing):
#   in-process  bench_bzip2 -b -l 9 -t N -r R FILE (the CPU engine, no daemon)
#   daemon      gpucompd --gpu=off --workers=N --codec-threads=N on a private socket, pinned;
#               gpucomp --no-fallback -9 -c FILE > out.bz2 and gpucomp -dc out.bz2 > /dev/null,
#               the client pinned to the same CPUs
#   lbzip2      lbzip2 -9 -nN -c FILE > out; lbzip2 -d -nN -c out > /dev/null
#   pbzip2      pbzip2 -9 -pN -c FILE > out; pbzip2 -d -pN -c out > /dev/null
# Each tool decompresses its own output. Every round trip is compared with the input once per N
# (cmp, untimed). MB/s = 10^6 bytes of UNCOMPRESSED data per second of wall time. A tool that is
# not there gives "absent" cells; a failed command or a differing round trip "FAILED" (exit 1).
# CSV columns: corpus,threads,tool,direction,MBps,ratio,bytes,runs,statistic.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
export LC_ALL=C

usage() { sed -n '6,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN=""
CORPORA=""
OUT=""
QUICK=0
THREADS=""
REPS=3
MEDIAN=0
ENVFILE=""
ONLY="text tar"
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=${2:?--bin DIR}; shift ;;
    --bin=*) BIN=${1#*=} ;;
    --corpora) CORPORA=${2:?--corpora DIR}; shift ;;
    --corpora=*) CORPORA=${1#*=} ;;
    --out) OUT=${2:?--out DIR}; shift ;;
    --out=*) OUT=${1#*=} ;;
    --quick) QUICK=1 ;;
    --threads) THREADS=${2:?--threads LIST}; shift ;;
    --threads=*) THREADS=${1#*=} ;;
    --reps) REPS=${2:?--reps R}; shift ;;
    --reps=*) REPS=${1#*=} ;;
    --median) MEDIAN=1 ;;
    --only) ONLY=${2:?--only LIST}; shift ;;
    --only=*) ONLY=${1#*=} ;;
    --env) ENVFILE=${2:?--env FILE}; shift ;;
    --env=*) ENVFILE=${1#*=} ;;
    -h | --help) usage ;;
    *) echo "cpu-scaling-bench.sh: unknown argument $1" >&2; usage ;;
    esac
    shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
case $REPS in '' | *[!0-9]* | 0) echo "--reps wants a whole number over 0" >&2; exit 2 ;; esac
for c in $ONLY; do
    case $c in text | tar) ;; *) echo "--only: text and tar, not '$c'" >&2; exit 2 ;; esac
done
for n in $THREADS; do
    case $n in *[!0-9]* | 0) echo "--threads wants whole numbers over 0, not '$n'" >&2; exit 2 ;; esac
done
if [ -n "$ENVFILE" ]; then
    # shellcheck disable=SC1090
    . "$ENVFILE" || { echo "could not source $ENVFILE" >&2; exit 2; }
    echo "sourced $ENVFILE"
else
    for e in .device/env.sh "$ROOT/.device/env.sh"; do
        if [ -f "$e" ]; then
            # shellcheck disable=SC1090
            . "$e" && echo "sourced $e"
            break
        fi
    done
fi
if [ -z "$BIN" ]; then
    for d in build-gpud build "$ROOT/build-gpud" "$ROOT/build"; do
        [ -x "$d/daemon/gpucompd" ] && { BIN=$d; break; }
    done
    BIN=${BIN:-build}
fi
GPUCOMPD=$BIN/daemon/gpucompd
GPUCOMP=$BIN/programs/gpucomp/gpucomp
BENCH_BZIP2=$BIN/tests/bench/bench_bzip2
if [ "$QUICK" = 1 ]; then SIZE=32; else SIZE=256; fi

# the CPUs this process may use, in order (taskset -c takes them as a list)
ALLOWED=()
if command -v taskset > /dev/null 2>&1; then
    list=$(taskset -cp $$ 2>/dev/null | sed 's/.*: *//')
    IFS=, read -ra parts <<< "$list"
    for p in "${parts[@]}"; do
        case $p in
        *-*) for ((c = ${p%-*}; c <= ${p#*-}; c++)); do ALLOWED+=("$c"); done ;;
        [0-9]*) ALLOWED+=("$p") ;;
        esac
    done
fi
NCPU=$(nproc)
if [ -z "$THREADS" ]; then
    THREADS=""
    for ((n = 1; n <= NCPU; n *= 2)); do THREADS="$THREADS $n"; done
    case " $THREADS " in *" $NCPU "*) ;; *) THREADS="$THREADS $NCPU" ;; esac
fi
# pin N: the taskset prefix for N threads (sets PIN_CPUS for the table)
PIN=()
pin() {
    local n=$1 k cpus=""
    PIN=()
    PIN_CPUS="unpinned"
    [ "${#ALLOWED[@]}" -gt 0 ] || return 0
    ((n > ${#ALLOWED[@]})) && n=${#ALLOWED[@]}
    for ((k = 0; k < n; k++)); do cpus="$cpus${cpus:+,}${ALLOWED[k]}"; done
    PIN=(taskset -c "$cpus")
    PIN_CPUS=$cpus
}

OUT=${OUT:-cpu-scaling-out/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/log" || exit 2
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/log
W=$(mktemp -d "${TMPDIR:-/tmp}/cpu-scaling.XXXXXX") || exit 2
DPID=""
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -z "$CORPORA" ]; then CORPORA=$W/corpora; fi
mkdir -p "$CORPORA" || exit 2

MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
[ -n "$MODEL" ] || MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
CORES=$(lscpu 2>/dev/null | awk -F': *' '/^Core\(s\) per socket/ { c = $2 } /^Socket\(s\)/ { s = $2 } END { if (c && s) print c * s }')
ONLINE=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo "$NCPU")
HOST="$NCPU CPUs usable (${ONLINE} online${CORES:+, $CORES physical cores}), ${MODEL:-unknown model}"
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
STAT=best
[ "$MEDIAN" = 1 ] && STAT=median
# other work on the host skews every figure: its load is in the table
LOAD0=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)
echo "== $DATE; $HOST; $SIZE MiB per corpus; threads:$THREADS; $STAT of $REPS; bin $BIN; commit $COMMIT; out $OUT"

fail=0
have() { command -v "$1" > /dev/null 2>&1; }

# ---- corpora ----
# what each is: bench-corpora.sh's corpora.txt line, kept as DIR/NAME.how (corpora.txt holds the
# last run's corpora only)
for c in $ONLY; do
    if [ "$(stat -c %s "$CORPORA/$c.dat" 2>/dev/null || echo 0)" != $((SIZE << 20)) ]; then
        "$HERE/bench-corpora.sh" "$CORPORA" --size "$SIZE" --only "$c" | tee -a "$LOG/corpora.log" || fail=1
        awk -F'\t' -v c="$c" '$1 == c { print $3 }' "$CORPORA/corpora.txt" > "$CORPORA/$c.how" 2>/dev/null
    else
        echo "  $c: reusing $CORPORA/$c.dat"
    fi
done

# ---- measuring ----
clock() { if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME/,/.}"; else date +%s.%N; fi; }
# timed OUTFILE CMD...: runs CMD < /dev/null > OUTFILE REPS times; sets TIMES (seconds, one per
# run) and RC (0, or the first failing run's status)
timed() {
    local to=$1 t0 t1 r rc
    shift
    TIMES="" RC=0
    for ((r = 0; r < REPS; r++)); do
        t0=$(clock)
        "$@" < /dev/null > "$to" 2>> "$LOG/commands.err"
        rc=$?
        t1=$(clock)
        if [ "$rc" != 0 ]; then
            echo "  exit $rc: $*" >&2
            RC=$rc
            return
        fi
        TIMES="$TIMES $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    done
}
# rate BYTES: MB/s from TIMES (best, or median with --median)
rate() {
    echo "$TIMES" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk -v n="$1" -v med="$MEDIAN" '
        { t[NR] = $1 } END { if (NR == 0) { print "FAILED"; exit }
            s = t[1]; if (med) s = (NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2)
            printf "%.1f", (s > 0 ? n / s / 1e6 : 0) }'
}
ratio() { awk -v n="$1" -v z="$2" 'BEGIN { printf "%.3f", (z > 0 ? n / z : 0) }'; }
CSV=$OUT/cpu-scaling.csv
echo "corpus,threads,tool,direction,MBps,ratio,bytes,runs,statistic" > "$CSV"
RES=$W/res.tsv # corpus N tool c d ratio
: > "$RES"
# record CORPUS N TOOL C D RATIO BYTES
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" >> "$RES"
    printf '%s,%s,%s,compress,%s,%s,%s,%s,%s\n' "$1" "$2" "$3" "$4" "$6" "$7" "$REPS" "$STAT" >> "$CSV"
    printf '%s,%s,%s,decompress,%s,%s,%s,%s,%s\n' "$1" "$2" "$3" "$5" "$6" "$7" "$REPS" "$STAT" >> "$CSV"
    echo "  $1 N=$2 $3: $4 / $5 MB/s, ratio $6"
}
# verify NAME: cmp of $W/back with $F; notes a failure
verify() {
    if ! cmp "$W/back" "$F" > "$W/cmp.out" 2>&1; then
        echo "  $1: round trip DIFFERS: $(head -c 200 "$W/cmp.out")" >&2
        fail=1
        return 1
    fi
}
# tool_row CORPUS N NAME "compress cmd" "decompress cmd": CMDs as strings, split on spaces; the
# compress command writes stdout, the decompress command reads $W/z
tool_row() {
    local corpus=$1 n=$2 name=$3 c d zb r
    read -ra cc <<< "$4"
    read -ra dc <<< "$5"
    timed "$W/z" "${PIN[@]}" "${cc[@]}" "$F"
    if [ "$RC" != 0 ]; then record "$corpus" "$n" "$name" FAILED FAILED FAILED "$N"; fail=1; return; fi
    c=$(rate "$N")
    zb=$(stat -c %s "$W/z")
    timed /dev/null "${PIN[@]}" "${dc[@]}" "$W/z"
    if [ "$RC" != 0 ]; then record "$corpus" "$n" "$name" "$c" FAILED FAILED "$N"; fail=1; return; fi
    d=$(rate "$N")
    r=$(ratio "$N" "$zb")
    "${PIN[@]}" "${dc[@]}" "$W/z" < /dev/null > "$W/back" 2>> "$LOG/commands.err"
    verify "$corpus N=$n $name" || r=FAILED
    rm -f "$W/z" "$W/back"
    record "$corpus" "$n" "$name" "$c" "$d" "$r" "$N"
}

SOCK=$W/gpucompd.sock
start_daemon() { # N
    rm -f "$SOCK"
    "${PIN[@]}" "$GPUCOMPD" --socket="$SOCK" --gpu=off --workers="$1" --codec-threads="$1" --log-level=err \
        --max-request=16G --max-output=16G 2>> "$LOG/gpucompd.log" &
    DPID=$!
    for _ in $(seq 600); do
        if [ -S "$SOCK" ] && "$GPUCOMP" --socket="$SOCK" --ping > /dev/null 2>&1; then return 0; fi
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "gpucompd --workers=$1 did not start (see $LOG/gpucompd.log)" >&2
    DPID=""
    return 1
}
stop_daemon() { [ -n "$DPID" ] && { kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }; DPID=""; }

for corpus in $ONLY; do
    F=$CORPORA/$corpus.dat
    [ -s "$F" ] || { echo "no corpus $F" >&2; fail=1; continue; }
    N=$(stat -c %s "$F")
    echo "== $corpus ($N bytes)"
    for n in $THREADS; do
        pin "$n"
        echo "  N=$n on CPUs $PIN_CPUS"
        # (a) in-process: bench_bzip2 times R runs itself (and checks every round trip)
        if [ -x "$BENCH_BZIP2" ]; then
            m=""
            [ "$MEDIAN" = 1 ] && m=-m
            if read -r c d zb < <("${PIN[@]}" "$BENCH_BZIP2" -b -l 9 -t "$n" -r "$REPS" $m "$F" 2>> "$LOG/bench_bzip2.err") \
                && [ -n "${zb:-}" ]; then
                record "$corpus" "$n" in-process "$(printf %.1f "$c")" "$(printf %.1f "$d")" "$(ratio "$N" "$zb")" "$N"
            else
                echo "  bench_bzip2 failed (see $LOG/bench_bzip2.err)" >&2
                record "$corpus" "$n" in-process FAILED FAILED FAILED "$N"
                fail=1
            fi
        else
            record "$corpus" "$n" in-process absent absent "" "$N"
        fi
        # (b) through the daemon
        if [ -x "$GPUCOMPD" ] && [ -x "$GPUCOMP" ]; then
            if start_daemon "$n"; then
                # warm-up: one untimed round trip
                head -c $((4 << 20)) "$F" | "${PIN[@]}" "$GPUCOMP" --socket="$SOCK" -9 -c 2>/dev/null \
                    | "${PIN[@]}" "$GPUCOMP" --socket="$SOCK" -dc > /dev/null 2>&1
                tool_row "$corpus" "$n" daemon "$GPUCOMP --socket=$SOCK --no-fallback -9 -c" \
                    "$GPUCOMP --socket=$SOCK --no-fallback -dc"
                stop_daemon
            else
                record "$corpus" "$n" daemon FAILED FAILED FAILED "$N"
                fail=1
            fi
        else
            record "$corpus" "$n" daemon absent absent "" "$N"
        fi
        # (c), (d)
        if have lbzip2; then
            tool_row "$corpus" "$n" lbzip2 "lbzip2 -9 -n$n -c" "lbzip2 -d -n$n -c"
        else
            record "$corpus" "$n" lbzip2 absent absent "" "$N"
        fi
        if have pbzip2; then
            tool_row "$corpus" "$n" pbzip2 "pbzip2 -9 -p$n -c" "pbzip2 -d -p$n -c"
        else
            record "$corpus" "$n" pbzip2 absent absent "" "$N"
        fi
    done
done

# ---- tables ----
{
    echo
    echo "### The bzip2 CPU engine by thread count: $HOST, $DATE (commit $COMMIT)"
    echo
    echo "Command: \`scripts/cpu-scaling-bench.sh$([ "$QUICK" = 1 ] && echo " --quick") --bin $BIN --threads \"${THREADS# }\" --reps $REPS$([ "$MEDIAN" = 1 ] && echo " --median") --only \"$ONLY\"\`."
    echo "MB/s: 10^6 uncompressed bytes per second of wall time, $STAT of $REPS runs, compress / decompress;"
    echo "level 9; each tool decompresses its own output; at N every command (daemon and client too)"
    echo "runs under taskset on N CPUs; daemon: gpucompd --gpu=off --workers=N --codec-threads=N,"
    echo "gpucomp -9 -c FILE and gpucomp -dc on files. Every round trip compared with the input."
    echo "Load average (1 min) at the start / end: ${LOAD0:-?} / $(cut -d' ' -f1 /proc/loadavg 2>/dev/null)."
    for corpus in $ONLY; do
        F=$CORPORA/$corpus.dat
        [ -s "$F" ] || continue
        echo
        how=$(cat "$CORPORA/$corpus.how" 2>/dev/null)
        echo "#### $corpus: $(stat -c %s "$F") bytes${how:+ ($how)}"
        echo
        echo "| N | in-process c / d | daemon c / d | lbzip2 c / d | pbzip2 c / d | daemon ÷ lbzip2 c / d | in-process ÷ lbzip2 c / d |"
        echo "|---|---|---|---|---|---|---|"
        awk -F'\t' -v corpus="$corpus" '
            function cell(t) { return (!(t in C) || C[t] == "absent") ? "absent" : C[t] " / " D[t] }
            function q(a, b) { return (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) ? sprintf("%.2f", a / b) : "-" }
            function row(n) {
                printf "| %s | %s | %s | %s | %s | %s / %s | %s / %s |\n", n, cell("in-process"), cell("daemon"),
                    cell("lbzip2"), cell("pbzip2"), q(C["daemon"], C["lbzip2"]), q(D["daemon"], D["lbzip2"]),
                    q(C["in-process"], C["lbzip2"]), q(D["in-process"], D["lbzip2"])
            }
            $1 != corpus { next }
            $2 != cur { if (cur != "") row(cur); cur = $2; delete C; delete D }
            { C[$3] = $4; D[$3] = $5 }
            END { if (cur != "") row(cur) }' "$RES"
    done
} > "$OUT/table.md"
cat "$OUT/table.md"
echo
echo "results: $CSV; exit $fail"
exit $fail
