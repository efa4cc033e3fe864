#!/bin/bash
# shellcheck disable=SC2317 # the measured commands are functions run through timed; cleanup runs from the trap
# bench.sh - one benchmark a user can repeat: gpucompd against the CPU tools (and
# nvCOMP when given) on the same deterministic corpora, in the same run; Markdown tables last,
# every row in OUT/results.csv (plot it with scripts/bench-plot.py OUT/results.csv IMGDIR).
#
#   scripts/bench.sh [--quick] [--bin DIR] [--gpu-bin DIR] [--nvcomp DIR] [--competitors DIR] [--env FILE]
#                    [--out DIR] [--with-bzip2] [--corpora "text tar ..."] [--workdir DIR]
#
#   --quick       64 MiB per corpus (a few minutes on a 16-core host); default 1 GiB per corpus
#   --bin DIR     build tree: daemon/gpucompd, programs/gpucomp/gpucomp, tests/bench/bench_daemon
#                 (tests/bench/bench_bzip2 used when present); default build-gpud, else build
#   --gpu-bin DIR build-gpu/bin of scripts/build-gpu.sh: bench_gpu_rle, bench_gpu_bzip2,
#                 bench_gpu_bzip2_dec (device-resident rows); optional
#   --nvcomp DIR  holds bench_nvcomp (and libnvcomp.so.6 beside it); optional
#   --env FILE    sourced first (on the GPU host .device/env.sh: lbzip2/pbzip2/zstd on PATH;
#                 .device/env.sh is sourced by itself when it exists and no --env is given)
#   --out DIR     results.csv, table.md and logs (default bench-out/DATE)
#   --with-bzip2  also bzip2 -9 (one thread: slow)
#   --corpora L   only these corpora (scripts/bench-corpora.sh names)
#   --workdir DIR corpora and outputs (default $TMPDIR or /tmp; needs about 3 x the corpora)
# Environment: THREADS (default nproc), SCALE_CLIENTS (default "1 2 4 8 16 32 64"),
#   SCALE_MIB (16), ADV_MIB (4), BENCH_MIB (MiB per corpus, overrides --quick's 64 / 1024), DAEMON_ARGS (default "--max-request 16G --max-output 16G"),
#   NVCOMP_ARGS (bench_nvcomp's options before --type: default none).
#
# What it runs (MB/s = 10^6 UNCOMPRESSED bytes per second of wall time, one run each, both
# directions; ratio = uncompressed / compressed; cpu_s_per_GB = user+sys CPU seconds per 10^9
# uncompressed bytes, of the tool, or of client + daemon for gpucompd):
#  1. corpora: scripts/bench-corpora.sh (what each is: its header), written to the work dir;
#  2. CPU tools on each corpus, FILE -> out, out -> back, cmp back FILE (outside the time):
#     lbzip2 -9 -n$THREADS, pbzip2 -9 -p$THREADS, zstd -3 -T0, zstd -19 -T0, xz -6 -T0
#     (those installed), bzip2 -9 with --with-bzip2; CPU time from bash's `times` (children);
#  3. gpucompd: its own daemon on a private socket, --gpu=auto, then again --gpu=off:
#     gpucomp -c FILE > out, gpucomp -dc out > back (streams), bzip2 -9 and rle (-a rle; width
#     4 for int32/float32); daemon CPU from /proc/PID/stat utime+stime before and after;
#     bench_bzip2 -b (the CPU engine in-process, all threads) when the build has it;
#  4. --gpu-bin: bench_gpu_bzip2 on each corpus (device-resident encoder), bench_gpu_bzip2_dec
#     on lbzip2's output of each corpus, bench_gpu_rle --no-pipeline (its own data classes:
#     the corpora are not read by it); RESULT lines parsed, raw tables kept in the log;
#  5. --nvcomp: bench_nvcomp NVCOMP_ARGS --type T FILE per corpus (T = i32 for int32, f32 for
#     float32, u8 otherwise); lines "nvcomp ALGO type=.. chunk=.. bytes=N comp_GBps=X
#     decomp_GBps=Y ratio=Z ok" parsed (device-resident GB/s, so cpu_s_per_GB is empty);
#  5b. --competitors DIR (scripts/build-competitors.sh's output; build-comp/ beside --bin's
#     folder is used by itself when it exists): scripts/bench-gpu-libs.sh, libcubwt's BWT and
#     bzip2gpu's decoder (on bzip2 -9 copies) per corpus, where they built; its table is appended;
#  6. small requests: bench_daemon small 1 4096 2000 and small 8 4096 500 and small 1 65536 500
#     (rle, short-run data: latency p50/p99), with the --gpu=auto daemon;
#  7. scaling: bench_daemon bzip2-many (text corpus, SCALE_MIB-MiB slices, level 9) and
#     manyfd (rle, mean-8 runs, SCALE_MIB MiB, memfds) for SCALE_CLIENTS clients, --gpu=auto;
#     decompression too: bzip2-dec-many (the same slices as CPU-engine -9 streams) and
#     manyfd-dec (rle frames of the same data), MB/s of decompressed bytes.
# CSV columns: corpus,tool,options,direction,MBps,ratio,cpu_s_per_GB,bytes (bytes: uncompressed
# bytes per run). Exit status: 0, 1 if a round trip differed or a command failed, 2 bad usage.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
export LC_ALL=C

usage() { sed -n '7,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN=${BIN:-}
GPU_BIN=""
NVCOMP=""
COMPETITORS=""
ENVFILE=""
OUT=""
QUICK=0
WITH_BZIP2=0
CORPORA=""
WORKDIR=${TMPDIR:-/tmp}
while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1 ;;
    --bin) BIN=${2:?--bin DIR}; shift ;;
    --bin=*) BIN=${1#*=} ;;
    --gpu-bin) GPU_BIN=${2:?--gpu-bin DIR}; shift ;;
    --gpu-bin=*) GPU_BIN=${1#*=} ;;
    --nvcomp) NVCOMP=${2:?--nvcomp DIR}; shift ;;
    --nvcomp=*) NVCOMP=${1#*=} ;;
    --competitors) COMPETITORS=${2:?--competitors DIR}; shift ;;
    --competitors=*) COMPETITORS=${1#*=} ;;
    --env) ENVFILE=${2:?--env FILE}; shift ;;
    --env=*) ENVFILE=${1#*=} ;;
    --out) OUT=${2:?--out DIR}; shift ;;
    --out=*) OUT=${1#*=} ;;
    --with-bzip2) WITH_BZIP2=1 ;;
    --corpora) CORPORA=${2:?--corpora LIST}; shift ;;
    --corpora=*) CORPORA=${1#*=} ;;
    --workdir) WORKDIR=${2:?--workdir DIR}; shift ;;
    --workdir=*) WORKDIR=${1#*=} ;;
    -h | --help) usage ;;
    *) echo "bench.sh: unknown argument $1" >&2; usage ;;
    esac
    shift
done
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "$BIN" ]; then
    for d in build-gpud build; do [ -x "$d/daemon/gpucompd" ] && { BIN=$d; break; }; done
    BIN=${BIN:-build}
fi
GPUCOMPD=$BIN/daemon/gpucompd
GPUCOMP=$BIN/programs/gpucomp/gpucomp
BENCH_DAEMON=$BIN/tests/bench/bench_daemon
BENCH_BZIP2=$BIN/tests/bench/bench_bzip2
for b in "$GPUCOMPD" "$GPUCOMP"; do
    [ -x "$b" ] || { echo "no $b (--bin DIR: a build tree)" >&2; exit 2; }
done
if [ -n "$GPU_BIN" ] && [ ! -d "$GPU_BIN" ]; then echo "--gpu-bin: no directory $GPU_BIN" >&2; exit 2; fi
if [ -n "$NVCOMP" ] && [ ! -x "$NVCOMP/bench_nvcomp" ]; then echo "--nvcomp: no $NVCOMP/bench_nvcomp" >&2; exit 2; fi
if [ -n "$ENVFILE" ]; then
    # shellcheck disable=SC1090
    . "$ENVFILE" || { echo "could not source $ENVFILE" >&2; exit 2; }
    echo "sourced $ENVFILE"
elif [ -f .device/env.sh ]; then
    # shellcheck disable=SC1091
    . .device/env.sh
    echo "sourced .device/env.sh"
fi
THREADS=${THREADS:-$(nproc)}
DAEMON_ARGS=${DAEMON_ARGS:---max-request 16G --max-output 16G}
SCALE_CLIENTS=${SCALE_CLIENTS:-1 2 4 8 16 32 64}
SCALE_MIB=${SCALE_MIB:-16}
ADV_MIB=${ADV_MIB:-4}
NVCOMP_ARGS=${NVCOMP_ARGS:-}
if [ "$QUICK" = 1 ]; then SIZE=64; else SIZE=1024; fi
SIZE=${BENCH_MIB:-$SIZE}
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
OUT=${OUT:-bench-out/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/log
mkdir -p "$LOG"
W=$(mktemp -d "$WORKDIR/bench.XXXXXX") || exit 2
DPID=""
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
t_start=$(now)
fsize() { stat -c %s "$1" 2>/dev/null || echo 0; }
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$GPU_NAME" ] || GPU_NAME="no GPU"
CPU_NAME=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)
COMMIT=$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && [ -n "$(git -C "$HERE" status --porcelain --untracked-files=no 2>/dev/null | head -1)" ]; then
    COMMIT="$COMMIT with changes not committed there"
fi
MACHINE="$GPU_NAME, $(nproc) CPUs${CPU_NAME:+ ($CPU_NAME)}, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "== $DATE; $MACHINE; $SIZE MiB per corpus; bin $BIN; commit $COMMIT; out $OUT"
fail=0
notes=""
skipped=""
have() {
    command -v "$1" > /dev/null 2>&1 && return 0
    case " $skipped " in *" $1 "*) ;; *) skipped="$skipped $1" ;; esac
    return 1
}
CSV=$OUT/results.csv
echo "corpus,tool,options,direction,MBps,ratio,cpu_s_per_GB,bytes" > "$CSV"
# csv CORPUS TOOL OPTIONS DIRECTION MBPS RATIO CPU BYTES
csv() { printf '%s,%s,%s,%s,%s,%s,%s,%s\n' "$1" "$2" "${3//,/;}" "$4" "$5" "$6" "$7" "$8" >> "$CSV"; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? n / s / 1e6 : 0) }'; }
ratio() { awk -v n="$1" -v z="$2" 'BEGIN { printf "%.3f", (z > 0 ? n / z : 0) }'; }
per_gb() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.2f", (n > 0 ? c / (n / 1e9) : 0) }'; }
TICK=$(getconf CLK_TCK 2>/dev/null || echo 100)
# daemon_cpu: utime+stime of the daemon in seconds
daemon_cpu() {
    [ -n "$DPID" ] || { echo 0; return; }
    awk -v t="$TICK" '{ sub(/^.*\) /, ""); print ($12 + $13) / t }' "/proc/$DPID/stat" 2>/dev/null || echo 0
}
# timed CMD...: runs it in a subshell; sets T_SECS (wall), T_CPU (user+sys of its children,
# from bash's times), T_RC; the command's own redirections are inside CMD (a function)
timed() {
    local t0 t1 line
    t0=$(now)
    # times prints the subshell's own line, then its children's (not through a pipe: a forked
    # times would report its own, empty, children)
    line=$("$@" 3>&- 4>&- > /dev/null; rc=$?; times; echo "$rc")
    t1=$(now)
    T_RC=$(echo "$line" | tail -1)
    T_CPU=$(echo "$line" | sed -n 2p | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } print s }')
    T_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
}

# ---- corpora ----
echo "== corpora ($SIZE MiB each, adversarial $ADV_MIB MiB) in $W"
C=$W/corpora
"$HERE/bench-corpora.sh" "$C" --size "$SIZE" --adv-size "$ADV_MIB" ${CORPORA:+--only "$CORPORA"} | tee "$LOG/corpora.log" || fail=1
cp "$C/corpora.txt" "$OUT/corpora.txt" 2>/dev/null
CORPUS_LIST=$(cut -f1 "$C/corpora.txt")
[ -n "$CORPUS_LIST" ] || { echo "no corpora" >&2; exit 1; }

# check NAME FILE ORIG: compares, notes a failure
check() {
    if ! cmp "$2" "$3" > "$W/cmp.out" 2>&1; then
        echo "  $1: round trip DIFFERS: $(head -c 200 "$W/cmp.out")" >&2
        fail=1
        return 1
    fi
}
# ---- CPU tools ----
TOOLS=()
have lbzip2 && TOOLS+=("lbzip2|-9 -n$THREADS|lbzip2 -9 -n $THREADS -c|lbzip2 -d -n $THREADS -c")
have pbzip2 && TOOLS+=("pbzip2|-9 -p$THREADS|pbzip2 -9 -p$THREADS -c|pbzip2 -d -p$THREADS -c")
if have zstd; then
    TOOLS+=("zstd|-3 -T0|zstd -q -3 -T0 -c|zstd -q -d -c")
    TOOLS+=("zstd|-19 -T0|zstd -q -19 -T0 -c|zstd -q -d -c")
fi
have xz && TOOLS+=("xz|-6 -T0|xz -6 -T0 -c|xz -d -T0 -c")
if [ "$WITH_BZIP2" = 1 ]; then
    have bzip2 && TOOLS+=("bzip2|-9|bzip2 -9 -c|bzip2 -d -c")
else
    notes="${notes}bzip2 -9 (one thread) not run (--with-bzip2). "
fi
ROWS=$W/rows.tsv # corpus tool options c_MBps d_MBps ratio c_cpu d_cpu
: > "$ROWS"
run_c() { "${CMD[@]}" < "$F" > "$Z"; }
run_d() { "${CMD[@]}" < "$Z" > "$W/back"; }
echo "== CPU tools: ${TOOLS[*]%%|*}"
for corpus in $CORPUS_LIST; do
    F=$C/$corpus.dat
    N=$(fsize "$F")
    for t in "${TOOLS[@]}"; do
        IFS='|' read -r tool opts ccmd dcmd <<< "$t"
        Z=$W/out.$tool
        read -ra CMD <<< "$ccmd"
        timed run_c
        crc=$T_RC cs=$T_SECS cc=$T_CPU
        zb=$(fsize "$Z")
        read -ra CMD <<< "$dcmd"
        timed run_d
        ok=1
        if [ "$crc" != 0 ] || [ "$T_RC" != 0 ]; then echo "  $corpus $tool $opts: exit $crc / $T_RC" >&2; fail=1; ok=0; fi
        check "$corpus $tool $opts" "$W/back" "$F" || ok=0
        # lbzip2's output is kept for the GPU decoder's rows
        if [ "$tool" = lbzip2 ] && [ -n "$GPU_BIN" ]; then mv "$Z" "$W/$corpus.lbzip2.bz2"; fi
        rm -f "$Z" "$W/back"
        r=$(ratio "$N" "$zb")
        [ "$ok" = 1 ] || r="FAILED"
        csv "$corpus" "$tool" "$opts" compress "$(mbs "$N" "$cs")" "$r" "$(per_gb "$cc" "$N")" "$N"
        csv "$corpus" "$tool" "$opts" decompress "$(mbs "$N" "$T_SECS")" "$r" "$(per_gb "$T_CPU" "$N")" "$N"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$corpus" "$tool" "$opts" "$(mbs "$N" "$cs")" "$(mbs "$N" "$T_SECS")" \
            "$r" "$(per_gb "$cc" "$N")" "$(per_gb "$T_CPU" "$N")" >> "$ROWS"
        echo "  $corpus $tool $opts: $(mbs "$N" "$cs") / $(mbs "$N" "$T_SECS") MB/s, ratio $r"
    done
done

# ---- gpucompd through its own daemon ----
SOCK=$W/gpucompd.sock
start_daemon() {
    rm -f "$SOCK"
    # shellcheck disable=SC2086
    "$GPUCOMPD" --socket="$SOCK" --log-level=err --gpu="$1" $DAEMON_ARGS 2>> "$LOG/gpucompd-$1.log" &
    DPID=$!
    for _ in $(seq 1200); do # 60 s: a GPU daemon initialises its devices first
        if [ -S "$SOCK" ] && "$GPUCOMP" --socket="$SOCK" --ping > /dev/null 2>&1; then return 0; fi
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "gpucompd --gpu=$1 did not start (see $LOG/gpucompd-$1.log)" >&2
    DPID=""
    return 1
}
stop_daemon() { [ -n "$DPID" ] && { kill "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }; DPID=""; }
backend() { grep -oE '\((gpu|cpu)\)' "$W/cli.err" 2>/dev/null | tail -1 | tr -d '()'; }
g_c() { "$GPUCOMP" --socket="$SOCK" --no-fallback -v "${COPT[@]}" -c "$F" > "$Z" 2> "$W/cli.err"; }
g_d() { "$GPUCOMP" --socket="$SOCK" --no-fallback -dc "$Z" > "$W/back" 2> "$W/cli.err"; }
SMALL=$W/small.tsv SCALE=$W/scale.tsv
: > "$SMALL"
: > "$SCALE"
for mode in auto off; do
    start_daemon "$mode" || { fail=1; continue; }
    echo "== gpucompd --gpu=$mode (pid $DPID): $("$GPUCOMP" --socket="$SOCK" --ping 2>&1 | head -1)"
    # warm-up: one untimed round trip per codec (GPU init, pinned buffers)
    for codec in bzip2 rle; do
        head -c $((16 << 20)) "$C/$(echo "$CORPUS_LIST" | head -1).dat" | "$GPUCOMP" --socket="$SOCK" -a "$codec" -c 2>/dev/null \
            | "$GPUCOMP" --socket="$SOCK" -dc > /dev/null 2>&1
    done
    for corpus in $CORPUS_LIST; do
        F=$C/$corpus.dat
        N=$(fsize "$F")
        for codec in bzip2 rle; do
            COPT=(-a "$codec")
            opts="-9"
            if [ "$codec" = bzip2 ]; then COPT+=(-9); else
                case $corpus in int32 | float32) COPT+=(-w 4); opts="-w4" ;; *) opts="-w1" ;; esac
            fi
            Z=$W/out.g
            d0=$(daemon_cpu); timed g_c; d1=$(daemon_cpu)
            crc=$T_RC cs=$T_SECS
            cc=$(awk -v a="$T_CPU" -v x="$d0" -v y="$d1" 'BEGIN { print a + y - x }')
            be=$(backend)
            zb=$(fsize "$Z")
            d0=$(daemon_cpu); timed g_d; d1=$(daemon_cpu)
            dc=$(awk -v a="$T_CPU" -v x="$d0" -v y="$d1" 'BEGIN { print a + y - x }')
            ok=1
            if [ "$crc" != 0 ] || [ "$T_RC" != 0 ]; then
                echo "  $corpus gpucomp $codec: exit $crc / $T_RC: $(head -c 300 "$W/cli.err")" >&2
                fail=1 ok=0
            fi
            check "$corpus gpucomp $codec --gpu=$mode" "$W/back" "$F" || ok=0
            rm -f "$Z" "$W/back"
            r=$(ratio "$N" "$zb")
            [ "$ok" = 1 ] || r="FAILED"
            tool="gpucomp $codec gpu=$mode"
            o="$opts stream via daemon; backend ${be:-?}"
            csv "$corpus" "$tool" "$o" compress "$(mbs "$N" "$cs")" "$r" "$(per_gb "$cc" "$N")" "$N"
            csv "$corpus" "$tool" "$o" decompress "$(mbs "$N" "$T_SECS")" "$r" "$(per_gb "$dc" "$N")" "$N"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$corpus" "$tool" "$opts (${be:-?})" "$(mbs "$N" "$cs")" \
                "$(mbs "$N" "$T_SECS")" "$r" "$(per_gb "$cc" "$N")" "$(per_gb "$dc" "$N")" >> "$ROWS"
            echo "  $corpus $tool $opts: $(mbs "$N" "$cs") / $(mbs "$N" "$T_SECS") MB/s, ratio $r, backend ${be:-?}"
        done
    done
    if [ "$mode" = auto ] && [ -x "$BENCH_DAEMON" ]; then
        echo "== small requests and scaling (bench_daemon, --gpu=auto)"
        for spec in "1 4096 2000" "8 4096 500" "1 65536 500"; do
            read -r cl sz rd <<< "$spec"
            line=$("$BENCH_DAEMON" "$SOCK" small "$cl" "$sz" "$rd" 2>> "$LOG/bench_daemon.err" | tee -a "$LOG/bench_daemon.log" | grep '^| small:')
            [ -n "$line" ] || { echo "  small $spec: failed (see $LOG/bench_daemon.err)" >&2; fail=1; continue; }
            rps=$(echo "$line" | sed -n 's/.* \([0-9.]*\) req\/s.*/\1/p')
            p50=$(echo "$line" | sed -n 's/.*p50 \([0-9.]*\) ms.*/\1/p')
            p99=$(echo "$line" | sed -n 's/.*p99 \([0-9.]*\) ms.*/\1/p')
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$cl" "$sz" "$rps" "$p50" "$p99" "$(awk -v r="$rps" -v z="$sz" 'BEGIN { printf "%.1f", r * z / 1e6 }')" >> "$SMALL"
            csv small-requests "bench_daemon small rle" "clients=$cl size=$sz p50_ms=$p50 p99_ms=$p99 req_s=$rps" compress \
                "$(awk -v r="$rps" -v z="$sz" 'BEGIN { printf "%.1f", r * z / 1e6 }')" "" "" "$((sz * cl * rd))"
            echo "  small $cl x $sz B: $rps req/s, p50 $p50 ms, p99 $p99 ms"
        done
        ROUNDS=2
        [ "$QUICK" = 1 ] && ROUNDS=1
        TEXT=$C/text.dat
        [ -f "$TEXT" ] || TEXT=$C/$(echo "$CORPUS_LIST" | head -1).dat
        for cl in $SCALE_CLIENTS; do
            # decompression: each client's slice as a CPU-engine -9 stream (made untimed), sent ROUNDS times
            for dir in compress decompress; do
                m=bzip2-many level=9
                [ "$dir" = decompress ] && m=bzip2-dec-many level=
                # shellcheck disable=SC2086 # level: one word or none
                line=$("$BENCH_DAEMON" "$SOCK" "$m" "$TEXT" "$cl" "$SCALE_MIB" $level "$ROUNDS" 2>> "$LOG/bench_daemon.err" \
                    | tee -a "$LOG/bench_daemon.log" | grep "^| $m:")
                v=$(echo "$line" | sed -n 's/.*aggregate \([0-9.]*\) MB\/s.*/\1/p')
                r=$(echo "$line" | sed -n 's/.*ratio \([0-9.]*\).*/\1/p')
                g=$(echo "$line" | sed -n 's/.*gpu \([0-9]* of [0-9]*\) requests.*/\1/p')
                [ -n "$v" ] || { echo "  $m $cl: failed (see $LOG/bench_daemon.err)" >&2; fail=1; v=FAILED; }
                printf 'bzip2 -9 (%s)\t%s\t%s\t%s\t%s\n' "$(basename "$TEXT" .dat)" "$dir" "$cl" "$v" "${r:-}; gpu ${g:-?}" >> "$SCALE"
                csv scaling "gpucompd bzip2 gpu=auto" "clients=$cl slice=${SCALE_MIB}MiB memfd" "$dir" "$v" "${r:-}" "" "$((cl * ROUNDS * SCALE_MIB << 20))"
                echo "  $m $cl clients: $v MB/s"
            done
            for dir in compress decompress; do
                m=manyfd
                [ "$dir" = decompress ] && m=manyfd-dec
                line=$("$BENCH_DAEMON" "$SOCK" "$m" "$cl" "$SCALE_MIB" "$ROUNDS" 2>> "$LOG/bench_daemon.err" \
                    | tee -a "$LOG/bench_daemon.log" | grep "^| $m:")
                # MB/s: from GB/s (two decimals), or from req/s (whole) when that is finer
                g=$(echo "$line" | sed -n 's/.*aggregate \([0-9.]*\) GB\/s.*/\1/p')
                v=$(echo "$line" | sed -n 's/.* \([0-9.]*\) req\/s.*/\1/p')
                if [ -n "$v" ] && [ -n "$g" ]; then
                    v=$(awk -v g="$g" -v r="$v" -v m="$SCALE_MIB" 'BEGIN { b = r * m * 1048576 / 1e6
                        printf "%.1f", (g >= 1 || r >= 100 ? g * 1000 : b) }')
                else
                    echo "  $m $cl: failed (see $LOG/bench_daemon.err)" >&2; fail=1; v=FAILED; fi
                printf 'rle (runs mean 8)\t%s\t%s\t%s\t%s\n' "$dir" "$cl" "$v" "" >> "$SCALE"
                csv scaling "gpucompd rle gpu=auto" "clients=$cl size=${SCALE_MIB}MiB memfd" "$dir" "$v" "" "" "$((cl * ROUNDS * SCALE_MIB << 20))"
                echo "  $m (rle) $cl clients: $v MB/s"
            done
        done
    elif [ "$mode" = auto ]; then
        notes="${notes}No small-request or scaling rows: no $BENCH_DAEMON. "
    fi
    stop_daemon
done
if [ -x "$BENCH_BZIP2" ]; then
    echo "== bench_bzip2 -b (CPU engine in-process, $THREADS threads)"
    for corpus in $CORPUS_LIST; do
        F=$C/$corpus.dat
        N=$(fsize "$F")
        read -r cm dm zb < <("$BENCH_BZIP2" -b -l 9 -t "$THREADS" -r 1 "$F" 2>> "$LOG/bench_bzip2.err") || true
        [ -n "${cm:-}" ] || continue
        r=$(ratio "$N" "$zb")
        csv "$corpus" "gpucompd CPU engine in-process" "-9 -t$THREADS" compress "$cm" "$r" "" "$N"
        csv "$corpus" "gpucompd CPU engine in-process" "-9 -t$THREADS" decompress "$dm" "$r" "" "$N"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$corpus" "CPU engine in-process" "-9 -t$THREADS" "$cm" "$dm" "$r" "-" "-" >> "$ROWS"
    done
else
    notes="${notes}No in-process CPU engine rows: the build has no tests/bench/bench_bzip2 (a build older than its make target: make tests/bench/bench_bzip2). "
fi

# ---- device-resident (--gpu-bin) ----
DEV=$W/dev.tsv # corpus tool direction MBps ratio
: > "$DEV"
if [ -n "$GPU_BIN" ]; then
    if [ -x "$GPU_BIN/bench_gpu_bzip2" ]; then
        echo "== bench_gpu_bzip2 (device-resident encoder)"
        files=()
        for corpus in $CORPUS_LIST; do files+=("$C/$corpus.dat"); done
        "$GPU_BIN/bench_gpu_bzip2" --level 9 --reps 3 --no-jobs-check "${files[@]}" > "$LOG/bench_gpu_bzip2.log" 2>&1 || { echo "bench_gpu_bzip2 failed (exit $?)" >&2; fail=1; }
        # RESULT file bytes tool MB/s stream_bytes identical
        awk -F'\t' '$1 == "RESULT" { n = split($2, p, "/"); c = p[n]; sub(/\.dat$/, "", c)
            printf "%s\tbench_gpu_bzip2 %s\tcompress\t%s\t%s\n", c, $4, $5, ($6 > 0 ? sprintf("%.3f", $3 / $6) : "") }' \
            "$LOG/bench_gpu_bzip2.log" >> "$DEV"
    fi
    if [ -x "$GPU_BIN/bench_gpu_bzip2_dec" ]; then
        files=()
        for corpus in $CORPUS_LIST; do [ -f "$W/$corpus.lbzip2.bz2" ] && files+=("$W/$corpus.lbzip2.bz2"); done
        if [ "${#files[@]}" -gt 0 ]; then
            echo "== bench_gpu_bzip2_dec (device-resident decoder, lbzip2 -9 streams)"
            "$GPU_BIN/bench_gpu_bzip2_dec" --reps 3 "${files[@]}" > "$LOG/bench_gpu_bzip2_dec.log" 2>&1 || { echo "bench_gpu_bzip2_dec failed (exit $?)" >&2; fail=1; }
            awk -F'\t' '$1 == "RESULT" { n = split($2, p, "/"); c = p[n]; sub(/\.lbzip2\.bz2$/, "", c)
                printf "%s\tbench_gpu_bzip2_dec %s\tdecompress\t%s\t\n", c, $4, $5 }' "$LOG/bench_gpu_bzip2_dec.log" >> "$DEV"
        else
            notes="${notes}No GPU decoder rows: no lbzip2 streams to decode. "
        fi
    fi
    if [ -x "$GPU_BIN/bench_gpu_rle" ]; then
        echo "== bench_gpu_rle --no-pipeline (its own device-generated classes)"
        rs=1024
        [ "$QUICK" = 1 ] && rs=256
        "$GPU_BIN/bench_gpu_rle" --size "$rs" --no-pipeline > "$LOG/bench_gpu_rle.log" 2>&1 || { echo "bench_gpu_rle failed" >&2; fail=1; }
        # | data | width | frame/input | encode GB/s | decode GB/s | CUB ... |
        awk -F'|' 'NF > 9 && $4 ~ /^ *[0-9.]+ *$/ && $5 ~ /^ *[0-9.]+ *$/ { gsub(/^ +| +$/, "", $2); gsub(/ /, "", $3)
            r = ($4 > 0 ? sprintf("%.3f", 1 / $4) : ""); c = "rle:" $2 " w" $3
            printf "%s\tbench_gpu_rle\tcompress\t%.1f\t%s\n%s\tbench_gpu_rle\tdecompress\t%.1f\t%s\n", c, $5 * 1000, r, c, $6 * 1000, r }' \
            "$LOG/bench_gpu_rle.log" >> "$DEV"
    fi
    while IFS=$'\t' read -r c t d m r; do csv "$c" "$t" "device-resident" "$d" "$m" "$r" "" ""; done < "$DEV"
fi

# ---- nvCOMP ----
NV=$W/nv.tsv # corpus algo type comp_MBps decomp_MBps ratio
: > "$NV"
if [ -n "$NVCOMP" ]; then
    echo "== nvCOMP ($NVCOMP/bench_nvcomp)"
    for corpus in $CORPUS_LIST; do
        case $corpus in int32) ty=i32 ;; float32) ty=f32 ;; *) ty=u8 ;; esac
        # shellcheck disable=SC2086 # NVCOMP_ARGS: options, split on purpose
        LD_LIBRARY_PATH="$NVCOMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$NVCOMP/bench_nvcomp" $NVCOMP_ARGS --type "$ty" "$C/$corpus.dat" \
            > "$LOG/nvcomp-$corpus.log" 2>&1 || { echo "  bench_nvcomp $corpus: exit $?" >&2; fail=1; }
        awk -v c="$corpus" '$1 == "nvcomp" { a = $2; ty = ""; ch = ""; cg = ""; dg = ""; r = ""; ok = $NF
            for (i = 3; i <= NF; i++) { split($i, kv, "=")
                if (kv[1] == "type") ty = kv[2]; else if (kv[1] == "chunk") ch = kv[2]
                else if (kv[1] == "comp_GBps") cg = kv[2]; else if (kv[1] == "decomp_GBps") dg = kv[2]
                else if (kv[1] == "ratio") r = kv[2] }
            printf "%s\t%s\t%s chunk=%s %s\t%.1f\t%.1f\t%s\n", c, a, ty, ch, ok, cg * 1000, dg * 1000, r }' \
            "$LOG/nvcomp-$corpus.log" | tee -a "$NV" | sed 's/^/  /'
    done
    while IFS=$'\t' read -r c a o cm dm r; do
        csv "$c" "nvcomp $a" "$o device-resident" compress "$cm" "$r" "" ""
        csv "$c" "nvcomp $a" "$o device-resident" decompress "$dm" "$r" "" ""
    done < "$NV"
fi

# ---- GPU library competitors (--competitors DIR, else build-comp/ beside --bin's folder) ----
[ -z "$COMPETITORS" ] && [ -d "$(dirname "$BIN")/build-comp" ] && COMPETITORS=$(dirname "$BIN")/build-comp
if [ -n "$COMPETITORS" ]; then
    echo "== GPU library competitors: scripts/bench-gpu-libs.sh --bin $COMPETITORS"
    "$HERE/bench-gpu-libs.sh" --bin "$COMPETITORS" --corpora "$C" --out "$OUT" > "$LOG/gpu-libs.log" 2>&1 \
        || { echo "  bench-gpu-libs.sh: exit $? (see $LOG/gpu-libs.log)" >&2; fail=1; }
    grep '^  .* MB/s, correct ' "$LOG/gpu-libs.log"
fi

# ---- tables ----
[ -n "$skipped" ] && echo "note: not installed here, skipped:$skipped"
elapsed=$(awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
{
    echo
    echo "### gpucompd against the CPU tools: $MACHINE, $DATE (commit $COMMIT)"
    echo
    echo "Command: \`scripts/bench.sh$([ "$QUICK" = 1 ] && echo " --quick") --bin $BIN${GPU_BIN:+ --gpu-bin $GPU_BIN}${NVCOMP:+ --nvcomp $NVCOMP}\`;"
    echo "$SIZE MiB per corpus (adversarial: $ADV_MIB MiB; scripts/bench-corpora.sh says what each is), $elapsed s in all."
    echo "MB/s: 10^6 uncompressed bytes per second of wall time, file to file, one run each; CPU s/GB:"
    echo "user+sys seconds per 10^9 uncompressed bytes (gpucomp: client + daemon). Every round trip was"
    echo "compared with the original. ${notes}"
    [ -n "$skipped" ] && echo "Not installed on this host, skipped:$skipped."
    echo
    echo "| corpus | tool | options | compress MB/s | decompress MB/s | ratio | CPU s/GB c | CPU s/GB d |"
    echo "|---|---|---|---|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$ROWS"
    if [ -s "$DEV" ]; then
        echo
        echo "### Device-resident (--gpu-bin $GPU_BIN: input already in GPU memory; raw tables in log/)"
        echo
        echo "| corpus | bench | direction | MB/s | ratio |"
        echo "|---|---|---|---|---|"
        awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$DEV"
    elif [ -n "$GPU_BIN" ]; then
        echo
        echo "Device-resident: nothing parsed from $GPU_BIN's benches (see log/)."
    fi
    if [ -s "$NV" ]; then
        echo
        echo "### nvCOMP (device-resident, batched C API; bench_nvcomp $NVCOMP_ARGS)"
        echo
        echo "| corpus | algorithm | type, chunk | compress MB/s | decompress MB/s | ratio |"
        echo "|---|---|---|---|---|---|"
        awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$NV"
    fi
    if [ -s "$SMALL" ]; then
        echo
        echo "### Small requests (bench_daemon small: rle, short-run data, buffer API; gpucompd --gpu=auto)"
        echo
        echo "| clients | bytes per request | requests/s | latency p50 ms | latency p99 ms | MB/s |"
        echo "|---|---|---|---|---|---|"
        awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$SMALL"
    fi
    if [ -s "$SCALE" ]; then
        echo
        echo "### Scaling with clients (bench_daemon bzip2-many / bzip2-dec-many / manyfd / manyfd-dec, $SCALE_MIB MiB per client per request, memfds; gpucompd --gpu=auto)"
        echo
        echo "MB/s: 10^6 uncompressed bytes per second, all clients together (decompress: bytes out)."
        echo
        echo "| codec (data) | direction | clients | aggregate MB/s | ratio; requests on the GPU |"
        echo "|---|---|---|---|---|"
        sort -s -t "$(printf '\t')" -k1,2 "$SCALE" | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }'
    fi
} > "$OUT/table.md"
if [ -n "$COMPETITORS" ] && [ -s "$OUT/gpu-libs.md" ]; then cat "$OUT/gpu-libs.md" >> "$OUT/table.md"; fi
cat "$OUT/table.md"
echo
echo "results: $CSV; plots: python3 $HERE/bench-plot.py $CSV IMGDIR; exit $fail"
exit $fail
