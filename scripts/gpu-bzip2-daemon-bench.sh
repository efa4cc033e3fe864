#!/bin/bash
# gpu-bzip2-daemon-bench.sh - on a GPU host: bzip2 compression THROUGH gpucompd (the daemon
# sends bzip2 compress requests of --gpu-min-bytes-bzip2 and more to the GPU) against the
# CPU bzip2 compressors, on the same corpora in the same run; one Markdown table last.
#
#   scripts/gpu-bzip2-daemon-bench.sh          (from the repo root; binaries from $BIN_DIR,
#                                               default build-gpud, made by scripts/build-gpud.sh)
#
# Corpora (deterministic on a given host; made in a temp dir, or reused from / kept in CORPUS_DIR):
#   text   the host's *.py files (find / -xdev, temporary and per-run trees pruned, sorted by
#          path), concatenated and repeated up to SIZE_MIB
#   mixed  a tar (names sorted, owner and mtime zeroed) of usr/bin usr/include usr/lib usr/share
#          (those present), cut to SIZE_MIB (repeated if the host has less)
# Per corpus, level $LEVEL:
#   (a) gpucompd --gpu=$GPU_MODE: bench_daemon bzip2-large (the whole file as one memfd request,
#       $LARGE_ROUNDS rounds, best and median) and bzip2-many ($MANY: clients, MiB each, rounds;
#       every client its own slice of the file, all at once, aggregate)
#   (b) gpucompd --gpu=off (the CPU engine, all CPUs): bzip2-large, $CPU_ROUNDS rounds
#   (c) gpucomp -$LEVEL -c FILE > /dev/null through the (a) daemon: the CLI end to end, wall time
#   (d) lbzip2 -$LEVEL -n$THREADS, pbzip2 -$LEVEL -p$THREADS on the whole file; bzip2 -$LEVEL
#       (one thread: slow) on the first $SLICE_MIB MiB only; missing tools are skipped with a note
#   (e) the (a) daemon's output (gpucomp -$LEVEL -c) is byte-identical to gpucomp --local -$LEVEL
#       (the CPU engine in-process; also timed), checked with cmp on every corpus; bzip2 -t
#       decodes it (text only by default: one thread; BZIP2_T_ALL=1 for every corpus)
# bench_daemon itself decodes every daemon output once with the CPU engine and compares.
# MB/s = 10^6 input bytes per second of wall time; ratio = input / output bytes; "vs lbzip2" =
# MB/s over lbzip2 -n$THREADS's MB/s on the same corpus in this run.
# A bundle made by ../shared/device/bundle.sh in .device/ is sourced first (lbzip2, pbzip2).
#
# Environment: BIN_DIR (build-gpud), SIZE_MIB (1024; e.g. 64 for a quick run), LEVEL (9),
#   GPU_MODE (auto: the daemon's default; off or emulate to run the script without a GPU),
#   LARGE_ROUNDS (3), CPU_ROUNDS (2), MANY ("64 16 2"), THREADS (16), SLICE_MIB (64),
#   DAEMON_ARGS ("--max-request 16G --max-output 16G --memory-budget 32G"),
#   CORPUS_DIR (reuse text/mixed there if SIZE_MIB long, else make and keep them there),
#   LOGDIR (default $OUT or /tmp/gpu-bzip2-daemon-bench: logs and table.md).
# Default run: about 4-6 minutes on an H100 host with 16 cores (most of it the CPU tools).
# Exit status: non-zero if a check failed (a daemon output not identical to the CPU engine's,
# not decoding, or a bench_daemon/gpucomp failure).
set -u
BIN_DIR=${BIN_DIR:-build-gpud}
SIZE_MIB=${SIZE_MIB:-1024}
LEVEL=${LEVEL:-9}
GPU_MODE=${GPU_MODE:-auto}
LARGE_ROUNDS=${LARGE_ROUNDS:-3}
CPU_ROUNDS=${CPU_ROUNDS:-2}
read -r M_CLIENTS M_MIB M_ROUNDS <<<"${MANY:-64 16 2}"
THREADS=${THREADS:-16}
SLICE_MIB=${SLICE_MIB:-64}
DAEMON_ARGS=${DAEMON_ARGS:---max-request 16G --max-output 16G --memory-budget 32G}
LOGDIR=${LOGDIR:-${OUT:-/tmp/gpu-bzip2-daemon-bench}}
GPUCOMPD=$BIN_DIR/daemon/gpucompd
GPUCOMP=$BIN_DIR/programs/gpucomp/gpucomp
BENCH=$BIN_DIR/tests/bench/bench_daemon
for b in "$GPUCOMPD" "$GPUCOMP" "$BENCH"; do
    if [ ! -x "$b" ]; then
        echo "no $b (build with scripts/build-gpud.sh, or set BIN_DIR to a build directory)" >&2
        exit 2
    fi
done
mkdir -p "$LOGDIR"
if [ -f .device/env.sh ]; then
    # shellcheck disable=SC1091
    . .device/env.sh
    echo "sourced .device/env.sh"
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bzip2-daemon.XXXXXX")
DPID=""
stop_daemon() {
    if [ -n "$DPID" ]; then
        kill "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        DPID=""
    fi
}
trap 'stop_daemon; rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", n / s / 1e6 }'; }
t_start=$(now)
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$GPU_NAME" ] || GPU_NAME="no GPU (nvidia-smi: none)"
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
echo "== $DATE; $GPU_NAME; $(nproc) CPUs; gpucompd --gpu=$GPU_MODE; level $LEVEL; SIZE_MIB $SIZE_MIB"
SIZE=$(( SIZE_MIB << 20 ))
fail=0
notes=""
rows="$LOGDIR/rows.txt"
: > "$rows"
# row corpus label MB/s ratio note
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$rows"; echo "$1: $2: $3 MB/s, ratio $4${5:+ ($5)}"; }

# ---- corpora ----
CDIR=${CORPUS_DIR:-$W}
mkdir -p "$CDIR" && CDIR=$(cd "$CDIR" && pwd)
fsize() { stat -c %s "$1" 2>/dev/null || echo 0; }
# repeat_to FILE: FILE repeated (whole copies, then cut) up to SIZE bytes, in place
repeat_to() {
    local once reps
    once=$(fsize "$1")
    [ "$once" -gt 0 ] || return 1
    [ "$once" -ge "$SIZE" ] && { truncate -s "$SIZE" "$1"; return 0; }
    reps=$(( (SIZE + once - 1) / once ))
    mv "$1" "$1.once"
    for _ in $(seq "$reps"); do cat "$1.once"; done | head -c "$SIZE" > "$1"
    rm -f "$1.once"
    echo "x$reps"
}
t0=$(now)
if [ "$(fsize "$CDIR/text")" -eq "$SIZE" ]; then
    echo "text: reused $CDIR/text"
else
    # every *.py of the root file system but trees that change from run to run
    find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
        -o -path /var/tmp -o -path /var/cache -o -path /var/log -o -path "$PWD" -o -path "$CDIR" \
        -o -path "$W" \) -prune -o -name '*.py' -type f -print0 2>/dev/null | LC_ALL=C sort -z > "$W/py.list"
    xargs -0 -r cat < "$W/py.list" > "$CDIR/text" 2>/dev/null
    n=$(fsize "$CDIR/text")
    if ! reps=$(repeat_to "$CDIR/text"); then
        echo "no *.py files on this host" >&2
        exit 2
    fi
    echo "text: $(tr -cd '\0' < "$W/py.list" | wc -c) Python files, $(( n >> 20 )) MiB${reps:+, repeated $reps}"
fi
if [ "$(fsize "$CDIR/mixed")" -eq "$SIZE" ]; then
    echo "mixed: reused $CDIR/mixed"
else
    dirs=""
    for d in usr/bin usr/include usr/lib usr/share; do [ -d "/$d" ] && dirs="$dirs $d"; done
    # shellcheck disable=SC2086
    (cd / && find $dirs -xdev \( -type f -o -type d -o -type l \) 2>/dev/null | LC_ALL=C sort \
        | tar --no-recursion --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -T - 2>/dev/null) \
        | head -c "$SIZE" > "$CDIR/mixed"
    reps=$(repeat_to "$CDIR/mixed") || { echo "empty tar of$dirs" >&2; exit 2; }
    echo "mixed: tar of$dirs${reps:+, repeated $reps}"
fi
echo "corpora ready in $(since "$t0") s (in $CDIR)"
corpora="text mixed"

# ---- the daemon ----
# start_daemon MODE: gpucompd --gpu=MODE on a socket in $W; sets SOCK and DPID
start_daemon() {
    SOCK=$W/sock-$1
    # shellcheck disable=SC2086
    "$GPUCOMPD" --socket "$SOCK" --log-level=err --gpu="$1" $DAEMON_ARGS 2>> "$LOGDIR/gpucompd.log" &
    DPID=$!
    for _ in $(seq 1200); do # 60 s: a GPU daemon initialises its devices first
        [ -S "$SOCK" ] && "$GPUCOMP" --socket "$SOCK" --ping > /dev/null 2>&1 && return 0
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "gpucompd --gpu=$1 did not start (see $LOGDIR/gpucompd.log)" >&2
    tail -5 "$LOGDIR/gpucompd.log" >&2
    exit 1 # the EXIT trap stops it if it still runs
}
# bench LOGNAME ARGS...: bench_daemon on $SOCK, output kept and shown; fails the run on error
bench() {
    local log=$LOGDIR/$1.log
    shift
    if ! "$BENCH" "$SOCK" "$@" > "$log" 2>&1; then
        echo "bench_daemon $* FAILED:" >&2
        cat "$log" >&2
        fail=1
        return 1
    fi
    cat "$log"
}
# field LOG WORD: the number after "WORD " in bench_daemon's result row
field() { grep -m1 '^| bzip2-' "$1" | grep -oE "[ (]$2 [0-9]+(\.[0-9]+)?" | head -1 | awk '{ print $NF }'; }

# (a) + (c) + (e) with the GPU daemon, then (b) with the CPU engine
start_daemon "$GPU_MODE"
"$GPUCOMP" --socket "$SOCK" --stats 2>/dev/null | grep -iE 'backend|device|bzip2' | head -5
for c in $corpora; do
    f=$CDIR/$c
    n=$(fsize "$f")
    echo "== $c ($(( n >> 20 )) MiB): gpucompd --gpu=$GPU_MODE"
    if bench "large-$c" bzip2-large "$f" "$LEVEL" "$LARGE_ROUNDS"; then
        L=$LOGDIR/large-$c.log
        be=$(grep -oE 'backend [a-z]+ \(gpu [0-9]+ of [0-9]+\)' "$L" | head -1)
        if [ "$GPU_MODE" != off ] && echo "$be" | grep -q 'gpu 0 of'; then
            echo "WARNING: no request of bzip2-large ran on the GPU ($be): is the GPU visible to gpucompd?" >&2
            notes="${notes}WARNING: $c: no bzip2-large request ran on the GPU. "
        fi
        row "$c" "gpucompd --gpu=$GPU_MODE, 1 client, whole file (memfd)" "$(field "$L" best)" \
            "$(field "$L" ratio)" "best of $LARGE_ROUNDS, median $(field "$L" median); $be"
    fi
    if bench "many-$c" bzip2-many "$f" "$M_CLIENTS" "$M_MIB" "$LEVEL" "$M_ROUNDS"; then
        L=$LOGDIR/many-$c.log
        row "$c" "gpucompd --gpu=$GPU_MODE, $M_CLIENTS clients x $M_MIB MiB" "$(field "$L" aggregate)" \
            "$(field "$L" ratio)" "aggregate of $M_ROUNDS round(s); $(grep -oE 'gpu [0-9]+ of [0-9]+ requests' "$L" | head -1); p50 $(field "$L" p50) ms"
    fi
    # (c) the CLI end to end (its row is written once (e) knows the output size)
    t0=$(now)
    cli_mbs=""
    if "$GPUCOMP" --socket "$SOCK" "-$LEVEL" -c "$f" > /dev/null; then
        cli_mbs=$(mbs "$n" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
    else
        echo "gpucomp -$LEVEL -c $c FAILED" >&2
        fail=1
    fi
    # (e) byte identity with the CPU engine (outside the timed runs)
    if "$GPUCOMP" --socket "$SOCK" -v "-$LEVEL" -c "$f" > "$W/$c.daemon.bz2" 2> "$LOGDIR/cli-$c.log"; then
        sed 's/^/  gpucomp -v: /' "$LOGDIR/cli-$c.log" | head -3
        dn=$(fsize "$W/$c.daemon.bz2")
        [ -n "$cli_mbs" ] && row "$c" "gpucomp -$LEVEL -c (CLI via the daemon)" "$cli_mbs" \
            "$(awk -v n="$n" -v o="$dn" 'BEGIN { printf "%.3f", n / o }')" "wall time, one run, output to /dev/null"
        t0=$(now)
        "$GPUCOMP" --local "-$LEVEL" -c "$f" > "$W/$c.local.bz2"
        s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
        row "$c" "gpucomp --local -$LEVEL (CPU engine in-process, $(nproc) threads)" "$(mbs "$n" "$s")" \
            "$(awk -v n="$n" -v o="$(fsize "$W/$c.local.bz2")" 'BEGIN { printf "%.3f", n / o }')" "wall time"
        if cmp -s "$W/$c.daemon.bz2" "$W/$c.local.bz2"; then
            echo "$c: daemon (--gpu=$GPU_MODE) output byte-identical to gpucomp --local: yes"
            notes="$notes$c: the daemon's stream (--gpu=$GPU_MODE) is byte-identical to gpucomp --local -$LEVEL (cmp). "
        else
            echo "$c: daemon output DIFFERS from gpucomp --local ($(cmp "$W/$c.daemon.bz2" "$W/$c.local.bz2" 2>&1))" >&2
            notes="$notes$c: the daemon's stream DIFFERS from gpucomp --local -$LEVEL. "
            fail=1
        fi
        rm -f "$W/$c.local.bz2"
        if [ "$c" = text ] || [ "${BZIP2_T_ALL:-0}" = 1 ]; then
            t0=$(now)
            if bzip2 -t "$W/$c.daemon.bz2"; then
                echo "$c: bzip2 -t passes ($(since "$t0") s)"
                notes="$notes$c: bzip2 -t passes on it. "
            else
                echo "$c: bzip2 -t FAILED" >&2
                notes="$notes$c: bzip2 -t FAILED. "
                fail=1
            fi
        fi
        rm -f "$W/$c.daemon.bz2"
    else
        echo "gpucomp -v -$LEVEL -c $c FAILED" >&2
        cat "$LOGDIR/cli-$c.log" >&2
        fail=1
    fi
done
stop_daemon
if [ "$GPU_MODE" != off ]; then
    start_daemon off
    for c in $corpora; do
        f=$CDIR/$c
        echo "== $c: gpucompd --gpu=off (CPU engine)"
        if bench "large-cpu-$c" bzip2-large "$f" "$LEVEL" "$CPU_ROUNDS"; then
            L=$LOGDIR/large-cpu-$c.log
            row "$c" "gpucompd --gpu=off (CPU engine, $(nproc) threads), 1 client, whole file" \
                "$(field "$L" best)" "$(field "$L" ratio)" "best of $CPU_ROUNDS"
        fi
    done
    stop_daemon
fi

# ---- (d) CPU competitors ----
skipped=""
have() {
    command -v "$1" > /dev/null 2>&1 && return 0
    case " $skipped " in *" $1 "*) ;; *) skipped="$skipped $1" ;; esac
    return 1
}
# run_tool corpus input-file label note command...: one run of `command... input-file`, output to wc
run_tool() {
    local c=$1 in=$2 label=$3 note=$4 n t0 s out
    shift 4
    n=$(fsize "$in")
    t0=$(now)
    out=$("$@" "$in" | wc -c)
    s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
    row "$c" "$label" "$(mbs "$n" "$s")" "$(awk -v n="$n" -v o="$out" 'BEGIN { printf "%.3f", (o > 0 ? n / o : 0) }')" "$note"
}
echo "== CPU tools"
for c in $corpora; do
    f=$CDIR/$c
    have lbzip2 && run_tool "$c" "$f" "lbzip2 -$LEVEL -n$THREADS" "" lbzip2 "-$LEVEL" -n "$THREADS" -c
    have pbzip2 && run_tool "$c" "$f" "pbzip2 -$LEVEL -p$THREADS" "" pbzip2 "-$LEVEL" "-p$THREADS" -c
    if have bzip2; then
        head -c $(( SLICE_MIB << 20 )) "$f" > "$W/slice"
        sn=$(fsize "$W/slice")
        note="1 thread (slow): first $(( sn >> 20 )) MiB only"
        [ "$sn" -eq "$(fsize "$f")" ] && note="1 thread"
        run_tool "$c" "$W/slice" "bzip2 -$LEVEL" "$note" bzip2 "-$LEVEL" -c
        rm -f "$W/slice"
    fi
done
[ -n "$skipped" ] && echo "note: not installed here, skipped:$skipped"

# ---- table ----
{
    echo
    echo "### bzip2 -$LEVEL compression through gpucompd: $GPU_NAME + $(nproc) CPUs, $DATE"
    echo
    echo "gpucompd --gpu=$GPU_MODE, SIZE_MIB $SIZE_MIB per corpus (text: the host's *.py, mixed: tar of /usr)."
    echo "MB/s = 10^6 input bytes per second of wall time (bench_daemon: best of its rounds, or the"
    echo "aggregate of all clients; CLI and CPU tools: one run); ratio = input / output;"
    echo "vs lbzip2 = MB/s / lbzip2 -$LEVEL -n$THREADS MB/s on the same corpus in this run."
    echo "Every daemon output was decoded by the CPU engine (bench_daemon). $notes"
    [ -n "$skipped" ] && echo "Not installed on this host, skipped:$skipped (no vs lbzip2 column without lbzip2)."
    echo
    echo "| corpus | tool / path | MB/s | ratio | vs lbzip2 -n$THREADS | note |"
    echo "|---|---|---|---|---|---|"
    for c in $corpora; do
        ref=$(awk -F'\t' -v c="$c" '$1 == c && $2 ~ /^lbzip2 / { print $3; exit }' "$rows")
        awk -F'\t' -v c="$c" -v ref="${ref:-0}" '$1 == c {
            vs = (ref > 0 && $3 > 0) ? sprintf("%.2fx", $3 / ref) : "-"
            printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, vs, $5
        }' "$rows"
    done
} | tee "$LOGDIR/table.md"
echo
echo "total $(since "$t_start") s; logs in $LOGDIR; exit $fail"
exit $fail
