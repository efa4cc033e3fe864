#!/bin/bash
# shellcheck disable=SC2317,SC2002 # the measured commands are functions run through run_measured; cat | is the row
# stream-bench.sh - gpucomp's streams (a file, a pipe) against one whole-buffer request of the
# same file, and lbzip2/pbzip2: MB/s and peak memory of the client and of gpucompd; one
# Markdown table last. Builds nothing: the binaries come from --bin (a build made elsewhere).
#
#   scripts/stream-bench.sh [--bin DIR] [--size MIB | --sizes "1024 5120"] [--codec bzip2|rle|both]
#                           [--gpu auto|off] [--quick] [--with-bzip2] [--env FILE] [--workdir DIR]
#
#   --bin DIR     holds daemon/gpucompd, programs/gpucomp/gpucomp, tests/bench/bench_daemon (a build
#                 tree; default $BIN, else build-gpud, else build)
#   --size N      MiB of corpus (default 1024); --sizes "N M ...": several sizes, one after another
#   --codec C     bzip2 (-9), rle (width 1, 1 MiB chunks) or both (default)
#   --gpu MODE    passed to gpucompd --gpu=MODE (auto, off; emulate for testing); default auto
#   --quick       256 MiB, bzip2 only (unless --size/--sizes/--codec say otherwise)
#   --with-bzip2  also bzip2 -9 / bzip2 -d (one thread: slow, several minutes per GiB)
#   --env FILE    sourced first (on the GPU host: .device/env.sh, which puts lbzip2/pbzip2 on PATH;
#                 .device/env.sh is sourced by itself when it exists and no --env is given)
#   --workdir DIR where the corpus and outputs go (default $TMPDIR or /tmp); removed at the end
#   --pipe-only   no corpus file: only the pipe rows, their input generated on the fly
# Environment: DAEMON_ARGS (extra gpucompd options, default "--max-request 16G --max-output 16G":
#   the whole-buffer rows need requests over the 2 GiB default), THREADS (default nproc: lbzip2
#   -n, pbzip2 -p), LOGDIR (default $OUT or the work dir: logs and table.md; kept only if given).
#
# Corpus, deterministic on a given host: the *.py files under /usr/lib/python3* (Debian 12's
# python3.11 standard library plus dist-packages; about 30 MiB), sorted by path (LC_ALL=C) and
# concatenated, then repeated whole and cut to SIZE MiB; a host with no Python gets the files
# under /usr/share (under 1 MiB each, the first 20000 by path) instead. The repeat period is far
# over bzip2's 900 kB block, so bzip2 sees text, not copies; rle (meant for runs) barely
# compresses text: its rows measure the plumbing, not the codec.
# The corpus FILE is written only if the work dir has room for about 2.5 x SIZE (FILE, the
# outputs, the round trip); otherwise (a 5 GiB row on a small disk) only the pipe rows run, their
# input generated on the fly by the same definition (the base text repeated through head -c), and
# their decompressed output compared with a second such generator.
#
# Rows, per size and codec (MB/s = 10^6 bytes of UNCOMPRESSED data per second of wall time,
# both directions; each command timed from just before its start to its end, one run, after one
# untimed 64 MiB round trip that warms the daemon up):
#   file   gpucomp -c FILE > out; gpucomp -dc out > back; cmp back FILE (cmp outside the time)
#   pipe   cat FILE | gpucomp -c > out; gpucomp -dc < out | cmp - FILE (cmp inside the time)
#   whole  bench_daemon SOCKET whole FILE OUT c|d: all of FILE in one memfd, ONE request
#          (gpucomp_compress_fd / gpucomp_decompress_fd, as the pre-stream CLI and the library do
#          for large buffers), the result written to OUT; the note gives the request's own MB/s
#          (without reading FILE into the memfd and writing OUT); bzip2's output is compared with
#          the streamed one (it must be byte for byte the same), decompress's with FILE.
#   lbzip2 -9 -n$THREADS, pbzip2 -9 -p$THREADS (and bzip2 -9 with --with-bzip2) on FILE,
#          compress to a file and decompress their own output to a file, compared with FILE.
# Memory: "client peak RSS" is the VmHWM of the measured process (gpucomp, bench_daemon or the
# competitor; not cat or cmp): ru_maxrss from /usr/bin/time when present (the same figure,
# exact), else VmHWM read from /proc/PID/status every 100 ms (the last read before it exits).
# "daemon peak RSS" is the largest VmRSS of the one gpucompd of the run, read every 100 ms while
# the row's command runs (VmHWM would be the daemon's whole life, every earlier row included);
# the note gives its VmRSS when the row began: memory kept from earlier rows (allocator caches,
# the GPU's pinned buffers) counts in the peak, so the rows run streams first, whole last.
# Exit status: 0, or 1 if a round trip differed or a command under test failed, 2 bad usage.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi # `sh stream-bench.sh` works too
set -u

usage() { sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN=${BIN:-}
SIZES=""
CODEC=""
GPU_MODE=auto
QUICK=0
WITH_BZIP2=0
PIPE_ONLY=0
ENVFILE=""
WORKDIR=${TMPDIR:-/tmp}
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=${2:?--bin DIR}; shift ;;
    --bin=*) BIN=${1#*=} ;;
    --size) SIZES=${2:?--size MIB}; shift ;;
    --size=*) SIZES=${1#*=} ;;
    --sizes) SIZES=${2:?--sizes LIST}; shift ;;
    --sizes=*) SIZES=${1#*=} ;;
    --codec) CODEC=${2:?--codec bzip2|rle|both}; shift ;;
    --codec=*) CODEC=${1#*=} ;;
    --gpu) GPU_MODE=${2:?--gpu auto|off}; shift ;;
    --gpu=*) GPU_MODE=${1#*=} ;;
    --quick) QUICK=1 ;;
    --with-bzip2) WITH_BZIP2=1 ;;
    --env) ENVFILE=${2:?--env FILE}; shift ;;
    --env=*) ENVFILE=${1#*=} ;;
    --workdir) WORKDIR=${2:?--workdir DIR}; shift ;;
    --workdir=*) WORKDIR=${1#*=} ;;
    --pipe-only) PIPE_ONLY=1 ;;
    -h | --help) usage ;;
    *) echo "stream-bench.sh: unknown argument $1" >&2; usage ;;
    esac
    shift
done
if [ "$QUICK" = 1 ]; then
    SIZES=${SIZES:-256}
    CODEC=${CODEC:-bzip2}
fi
SIZES=${SIZES:-1024}
CODEC=${CODEC:-both}
case $CODEC in
bzip2 | rle) CODECS=$CODEC ;;
both) CODECS="bzip2 rle" ;;
*) echo "--codec: bzip2, rle or both" >&2; exit 2 ;;
esac
for s in $SIZES; do
    case $s in '' | *[!0-9]*) echo "--size/--sizes: whole MiB, not '$s'" >&2; exit 2 ;; esac
    [ "$s" -gt 0 ] || { echo "--size: more than 0" >&2; exit 2; }
done
if [ -z "$BIN" ]; then
    for d in build-gpud build; do [ -x "$d/daemon/gpucompd" ] && { BIN=$d; break; }; done
    BIN=${BIN:-build}
fi
GPUCOMPD=$BIN/daemon/gpucompd
GPUCOMP=$BIN/programs/gpucomp/gpucomp
BENCH_DAEMON=$BIN/tests/bench/bench_daemon
for b in "$GPUCOMPD" "$GPUCOMP"; do
    [ -x "$b" ] || { echo "no $b (--bin DIR: a build tree)" >&2; exit 2; }
done
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

W=$(mktemp -d "$WORKDIR/stream-bench.XXXXXX") || exit 2
LOGDIR=${LOGDIR:-${OUT:-}}
[ -n "$LOGDIR" ] || LOGDIR=$W
mkdir -p "$LOGDIR"
DPID=""
JOB=""
stop_daemon() {
    if [ -n "$DPID" ]; then
        kill "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        DPID=""
    fi
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    [ -n "$JOB" ] && kill "$JOB" 2>/dev/null
    stop_daemon
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
fsize() { stat -c %s "$1" 2>/dev/null || echo 0; }
t_start=$(now)
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$GPU_NAME" ] || GPU_NAME="no GPU (nvidia-smi: none)"
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
# A copy of a working tree (the device machine's) may carry a stale .git: say when files differ.
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)" ]; then
    COMMIT="$COMMIT with changes not committed there"
fi
echo "== $DATE; $GPU_NAME; $(nproc) CPUs; sizes $SIZES MiB; codecs $CODECS; gpucompd --gpu=$GPU_MODE; bin $BIN"
fail=0
notes=""
skipped=""
have() {
    command -v "$1" > /dev/null 2>&1 && return 0
    case " $skipped " in *" $1 "*) ;; *) skipped="$skipped $1" ;; esac
    return 1
}
rows=$W/rows.txt
: > "$rows"

# ---- measuring one command ----
# The wrapper writes the measured process's pid (it execs it, so the pid stays) for the sampler;
# with GNU time it also leaves that process's ru_maxrss (KiB) in the second file.
M=$W/measure.sh
if [ -x /usr/bin/time ] && /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then
    MEM_HOW="client: ru_maxrss from /usr/bin/time"
    cat > "$M" <<'EOF'
#!/bin/sh
pf=$1 tf=$2
shift 2
exec /usr/bin/time -f %M -o "$tf" sh -c 'echo $$ > "$0"; exec "$@"' "$pf" "$@"
EOF
else
    MEM_HOW="client: VmHWM read every 100 ms"
    cat > "$M" <<'EOF'
#!/bin/sh
pf=$1
shift 2
echo $$ > "$pf"
exec "$@"
EOF
fi
chmod +x "$M"
PF=$W/pid
TF=$W/time
# kib FIELD PID: that field of /proc/PID/status in KiB (0 if gone); builtins only
kib() {
    local k v _
    while read -r k v _; do
        [ "$k" = "$1:" ] && { echo "$v"; return; }
    done 2> /dev/null < "/proc/$2/status"
    echo 0
}
# The commands measured (F: the corpus, Z: the compressed file, G: gpucomp and its options,
# copt: the codec's options); each starts the measured process through "$M" "$PF" "$TF".
file_c() { "$M" "$PF" "$TF" "${G[@]}" -v "${copt[@]}" -c "$F" > "$Z" 2> "$W/cli.err"; }
file_d() { "$M" "$PF" "$TF" "${G[@]}" -dc "$Z" > "$W/back" 2> "$W/cli.err"; }
pipe_c() { cat "$F" | "$M" "$PF" "$TF" "${G[@]}" -v "${copt[@]}" -c > "$Z" 2> "$W/cli.err"; }
gen_c() { gen "$N" | "$M" "$PF" "$TF" "${G[@]}" -v "${copt[@]}" -c > "$Z" 2> "$W/cli.err"; }
pipe_d() { "$M" "$PF" "$TF" "${G[@]}" -dc < "$Z" 2> "$W/cli.err" | cmp - "$F" > "$W/cmp.out" 2>&1; }
gen_d() { "$M" "$PF" "$TF" "${G[@]}" -dc < "$Z" 2> "$W/cli.err" | cmp - <(gen "$N") > "$W/cmp.out" 2>&1; }
# whole IN OUT c|d CODEC LEVEL: bench_daemon's whole mode
whole() { "$M" "$PF" "$TF" "$BENCH_DAEMON" "$SOCK" whole "$@" > "$W/whole.out" 2> "$W/whole.err"; }
# to OUT cmd...: cmd's stdout to OUT
to() { local o=$1; shift; "$M" "$PF" "$TF" "$@" > "$o"; }
# run_measured CMD [ARGS...]: runs it (in the background, timed from inside) while sampling.
# Sets R_RC, R_SECS, R_CLIENT_KIB, R_DAEMON_KIB, R_DAEMON_START_KIB.
run_measured() {
    local cpid="" v
    rm -f "$PF" "$TF" "$W/t0" "$W/t1"
    sleep 0.5 # the daemon may still be unmapping the last row's memfds after its answer
    R_CLIENT_KIB=0
    R_DAEMON_START_KIB=$(kib VmRSS "$DPID")
    R_DAEMON_KIB=$R_DAEMON_START_KIB
    (set -o pipefail; now > "$W/t0"; "$@"; rc=$?; now > "$W/t1"; exit $rc) &
    JOB=$!
    while kill -0 "$JOB" 2>/dev/null; do
        [ -z "$cpid" ] && [ -s "$PF" ] && read -r cpid < "$PF"
        if [ -n "$cpid" ]; then
            v=$(kib VmHWM "$cpid")
            [ "$v" -gt "$R_CLIENT_KIB" ] && R_CLIENT_KIB=$v
        fi
        v=$(kib VmRSS "$DPID")
        [ "$v" -gt "$R_DAEMON_KIB" ] && R_DAEMON_KIB=$v
        sleep 0.1
    done
    wait "$JOB"
    R_RC=$?
    JOB=""
    if [ -s "$TF" ]; then
        v=$(tail -1 "$TF")
        case $v in '' | *[!0-9]*) ;; *) [ "$v" -gt "$R_CLIENT_KIB" ] && R_CLIENT_KIB=$v ;; esac
    fi
    R_SECS=$(awk -v a="$(cat "$W/t0" 2>/dev/null)" -v b="$(cat "$W/t1" 2>/dev/null)" 'BEGIN { print (a > 0 && b > 0) ? b - a : 0 }')
}
mib() { awk -v k="$1" 'BEGIN { printf "%.0f MiB", k / 1024 }'; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? n / s / 1e6 : 0) }'; }
# row codec input mode size_mib bytes [daemon:yes|no] [note]: one table row from the last run_measured
row() {
    local d="-" note=${7:-} m
    if [ "$6" = yes ]; then
        d=$(mib "$R_DAEMON_KIB")
        note="daemon at start $(mib "$R_DAEMON_START_KIB")${note:+; $note}"
    fi
    if [ "$R_RC" != 0 ]; then
        note="FAILED (exit $R_RC)${note:+; $note}"
        fail=1
    fi
    m=$(mbs "$5" "$R_SECS")
    printf '%s\t%s\t%s\t%s MiB\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$m" "$(mib "$R_CLIENT_KIB")" "$d" "$note" >> "$rows"
    echo "  $1 $2 $3 $4 MiB: $m MB/s, client $(mib "$R_CLIENT_KIB"), daemon $d${note:+ ($note)}"
}
mismatch() {
    echo "  $1: output DIFFERS from the original: $(head -c 300 "$W/cmp.out")" >&2
    fail=1
}
ratio() { awk -v n="$1" -v z="$2" 'BEGIN { printf "ratio %.3f", (z > 0 ? n / z : 0) }'; }
backend() { grep -oE '\((gpu|cpu)\)' "$1" 2>/dev/null | tail -1 | tr -d '()'; }

# ---- the daemon: one for the whole run ----
SOCK=$W/gpucompd.sock
# shellcheck disable=SC2086
"$GPUCOMPD" --socket="$SOCK" --log-level=err --gpu="$GPU_MODE" $DAEMON_ARGS 2>> "$LOGDIR/gpucompd.log" &
DPID=$!
ok=0
for _ in $(seq 1200); do # 60 s: a GPU daemon initialises its devices first
    if [ -S "$SOCK" ] && "$GPUCOMP" --socket="$SOCK" --ping > /dev/null 2>&1; then ok=1; break; fi
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.05
done
if [ "$ok" != 1 ]; then
    echo "gpucompd --gpu=$GPU_MODE did not start (see $LOGDIR/gpucompd.log):" >&2
    tail -5 "$LOGDIR/gpucompd.log" >&2
    exit 1
fi
echo "gpucompd (pid $DPID) answers on $SOCK: $("$GPUCOMP" --socket="$SOCK" --ping 2>&1)"
export GPUCOMP_SOCKET=$SOCK
G=("$GPUCOMP" --socket="$SOCK" --no-fallback)
WHOLE=0
if [ -x "$BENCH_DAEMON" ] && "$BENCH_DAEMON" 2>&1 | grep -q 'whole FILE'; then
    WHOLE=1
else
    notes="${notes}No whole-buffer rows: $BENCH_DAEMON is missing or has no whole mode. "
fi

# ---- corpus ----
BASE=$W/base
find /usr/lib/python3* -name '*.py' -type f -print0 2>/dev/null | LC_ALL=C sort -z > "$W/list"
CORPUS_HOW="the *.py of /usr/lib/python3*"
if [ ! -s "$W/list" ]; then
    find /usr/share -type f -size -1M -print0 2>/dev/null | LC_ALL=C sort -z | head -z -n 20000 > "$W/list"
    CORPUS_HOW="files under /usr/share"
fi
xargs -0 -r cat < "$W/list" > "$BASE" 2>/dev/null
[ -s "$BASE" ] || { echo "no corpus: no *.py under /usr/lib/python3* and nothing under /usr/share" >&2; exit 2; }
CORPUS_HOW="$CORPUS_HOW ($(tr -cd '\0' < "$W/list" | wc -c) files, $(( $(fsize "$BASE") >> 20 )) MiB, sorted by path), repeated"
rm -f "$W/list"
echo "corpus: $CORPUS_HOW"
# gen BYTES: the corpus of that size on stdout (the base text repeated, cut)
gen() { while cat "$BASE"; do :; done | head -c "$1"; }

# ---- warm-up: one untimed 64 MiB round trip per codec (GPU init, pinned buffers) ----
for codec in $CODECS; do
    if ! gen $((64 << 20)) | "${G[@]}" -a "$codec" -c 2>> "$LOGDIR/warmup.log" | "${G[@]}" -dc 2>> "$LOGDIR/warmup.log" \
        | cmp - <(gen $((64 << 20))) > "$W/cmp.out" 2>&1; then
        mismatch "warm-up $codec"
    fi
done

# ---- rows ----
for size in $SIZES; do
    N=$((size << 20))
    F=$W/corpus
    avail=$(( $(df -Pk "$W" | awk 'NR == 2 { print $4 }') * 1024 ))
    have_file=0
    if [ "$PIPE_ONLY" = 1 ]; then
        echo "== $size MiB: --pipe-only: pipe rows only, input generated on the fly"
    elif [ "$avail" -gt $((N * 5 / 2)) ]; then
        t0=$(now)
        gen "$N" > "$F"
        have_file=1
        echo "== $size MiB: corpus file written in $(since "$t0") s"
    else
        echo "== $size MiB: $(( avail >> 20 )) MiB free in $W, under 2.5 x $size: pipe rows only, input generated on the fly"
        notes="${notes}$size MiB: no room for the corpus file: pipe rows only, input generated. "
    fi
    for codec in $CODECS; do
        copt=(-a "$codec")
        [ "$codec" = bzip2 ] && copt+=(-9)
        Z=$W/out.$codec
        if [ "$have_file" = 1 ]; then
            # file, streamed
            run_measured file_c
            z=$(fsize "$Z")
            row "$codec" file "gpucomp -c (stream) compress" "$size" "$N" yes "$(ratio "$N" "$z"); backend $(backend "$W/cli.err")"
            run_measured file_d
            row "$codec" file "gpucomp -dc (stream) decompress" "$size" "$N" yes
            cmp "$W/back" "$F" > "$W/cmp.out" 2>&1 || mismatch "$codec file stream"
            rm -f "$W/back"
            mv "$Z" "$Z.file"
            # pipe
            run_measured pipe_c
        else
            run_measured gen_c
        fi
        z=$(fsize "$Z")
        note="$(ratio "$N" "$z"); backend $(backend "$W/cli.err")"
        [ "$have_file" = 1 ] || note="$note; input generated (no file)"
        if [ -f "$Z.file" ]; then
            if cmp "$Z" "$Z.file" > /dev/null 2>&1; then note="$note; = the file's output"; else note="$note; DIFFERS from the file's output"; fi
        fi
        if [ "$have_file" = 1 ]; then m="cat FILE | gpucomp -c compress"; else m="generated | gpucomp -c compress"; fi
        row "$codec" pipe "$m" "$size" "$N" yes "$note"
        rm -f "$Z.file"
        if [ "$have_file" = 1 ]; then
            run_measured pipe_d
        else
            run_measured gen_d
        fi
        [ "$R_RC" != 0 ] && mismatch "$codec pipe stream"
        row "$codec" pipe "gpucomp -dc < out | cmp decompress" "$size" "$N" yes "cmp in the time"
        # whole-buffer: one request
        if [ "$have_file" = 1 ] && [ "$WHOLE" = 1 ]; then
            lvl=0
            [ "$codec" = bzip2 ] && lvl=9
            run_measured whole "$F" "$Z.whole" c "$codec" "$lvl"
            [ "$R_RC" != 0 ] && cat "$W/whole.err" >&2
            zb=0 rs=0 be=""
            read -r _ _ _ zb rs be < <(grep '^WHOLE' "$W/whole.out") || true
            note="request $(mbs "$N" "${rs:-0}") MB/s; $(ratio "$N" "${zb:-0}"); backend ${be:-?}"
            if [ "$codec" = bzip2 ]; then
                if cmp "$Z.whole" "$Z" > /dev/null 2>&1; then note="$note; = the stream's output"; else note="$note; DIFFERS from the stream's output"; fail=1; fi
            fi
            row "$codec" file "whole-buffer request compress" "$size" "$N" yes "$note"
            run_measured whole "$Z.whole" "$W/back" d "$codec" "$lvl"
            [ "$R_RC" != 0 ] && cat "$W/whole.err" >&2
            rs=0 be=""
            read -r _ _ _ _ rs be < <(grep '^WHOLE' "$W/whole.out") || true
            row "$codec" file "whole-buffer request decompress" "$size" "$N" yes "request $(mbs "$N" "${rs:-0}") MB/s; backend ${be:-?}"
            cmp "$W/back" "$F" > "$W/cmp.out" 2>&1 || mismatch "$codec whole-buffer"
            rm -f "$W/back" "$Z.whole"
        fi
        rm -f "$Z"
        # competitors (bzip2 only; their own output back, compared with FILE)
        if [ "$codec" != bzip2 ] || [ "$have_file" != 1 ]; then continue; fi
        tools=""
        have lbzip2 && tools="$tools lbzip2"
        have pbzip2 && tools="$tools pbzip2"
        [ "$WITH_BZIP2" = 1 ] && have bzip2 && tools="$tools bzip2"
        for t in $tools; do
            case $t in
            lbzip2) c=(lbzip2 -9 -n "$THREADS"); d=(lbzip2 -d -n "$THREADS"); label="lbzip2 -9 -n$THREADS" ;;
            pbzip2) c=(pbzip2 -9 "-p$THREADS"); d=(pbzip2 -d "-p$THREADS"); label="pbzip2 -9 -p$THREADS" ;;
            bzip2) c=(bzip2 -9); d=(bzip2 -d); label="bzip2 -9" ;;
            esac
            run_measured to "$Z.$t" "${c[@]}" -c "$F"
            row bzip2 file "$label compress" "$size" "$N" no "$(ratio "$N" "$(fsize "$Z.$t")")"
            run_measured to "$W/back" "${d[@]}" -c "$Z.$t"
            row bzip2 file "${label/ -9/ -d} decompress" "$size" "$N" no "own output"
            cmp "$W/back" "$F" > "$W/cmp.out" 2>&1 || mismatch "$t"
            rm -f "$W/back" "$Z.$t"
        done
    done
    rm -f "$F"
done
stop_daemon
[ -n "$skipped" ] && echo "note: not installed here, skipped:$skipped"
[ "$WITH_BZIP2" = 1 ] || notes="${notes}bzip2 -9 (one thread) not run (--with-bzip2). "

# ---- table ----
{
    echo
    echo "### Streams against whole-buffer requests: $GPU_NAME + $(nproc) CPUs, $DATE (commit $COMMIT)"
    echo
    echo "gpucompd --gpu=$GPU_MODE $DAEMON_ARGS, one daemon for the run. Corpus: $CORPUS_HOW to the size."
    echo "MB/s = 10^6 uncompressed bytes per second of wall time, one run each (after a 64 MiB warm-up)."
    echo "Peak RSS: $MEM_HOW (the measured process only); daemon: largest VmRSS sampled every 100 ms"
    echo "during the row (its VmRSS at the row's start in the note). Every output was compared with the"
    echo "original. ${notes}"
    [ -n "$skipped" ] && echo "Not installed on this host, skipped:$skipped."
    echo
    echo "| codec | input | mode | size | MB/s | client peak RSS | daemon peak RSS | note |"
    echo "|---|---|---|---|---|---|---|---|"
    # a | inside a cell (cat FILE | gpucomp) is written \| (GitHub Markdown)
    awk -F'\t' '{ for (i = 1; i <= 8; i++) gsub(/\|/, "\\|", $i)
        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$rows"
} | tee "$W/table.md"
[ "$LOGDIR" != "$W" ] && cp "$W/table.md" "$LOGDIR/table.md"
echo
echo "total $(since "$t_start") s; exit $fail"
exit $fail
