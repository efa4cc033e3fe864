#!/bin/bash
# gpu-bzip2-dec-bench.sh - on a GPU host: the CUDA bzip2 DECODER against the CPU bzip2
# decompressors, on the same .bz2 files in the same run; one Markdown table last.
#
#   scripts/gpu-bzip2-dec-bench.sh [BIN_DIR]   (from the repo root; BIN_DIR holds bench_gpu_bzip2_dec,
#                                               default build-gpu/bin, made by scripts/build-gpu.sh)
#
# Corpora (deterministic on a given host, made as scripts/gpu-bzip2-daemon-bench.sh makes them;
# in a temp dir, or reused from / kept in CORPUS_DIR):
#   text   the host's *.py files (find / -xdev, temporary and per-run trees pruned, sorted by
#          path), concatenated and repeated up to SIZE_MB MiB
#   mixed  a tar (names sorted, owner and mtime zeroed) of usr/bin usr/include usr/lib usr/share
#          (those present), cut to SIZE_MB MiB (repeated if the host has less)
# Parts (what a stream's part holds, where a GPU decode is one walk's latency, not throughput):
#   mixed-tail the tar's last 12 MB (hardly compressible: about a dozen blocks)
#   text-head  the text's first 8 MB (9 blocks)
#   each bzip2 -9 only, decoded by the in-process benches below (not by the CPU tools).
# Encoders (each corpus, untimed): bzip2 -9 (one stream, one thread: run in the background, the
# slow part of the setup), lbzip2 -9 -n$THREADS (one stream) and pbzip2 -9 -p$THREADS (a stream
# per 900 kB). With CORPUS_DIR the .bz2 files are kept there and reused.
# Decoders, on every .bz2 (MB/s = 10^6 bytes of decompressed OUTPUT per second of wall time):
#   bzip2 -d (one thread) and pbzip2 -d -p$THREADS (which decodes a single-stream file, as both
#     encoders write, with one thread): on the first PREFIX_MIB MiB of output only when the
#     output is longer (the pipe is cut there; the table says so); output compared with cmp in
#     the timed pipeline (cmp is far faster than these);
#   lbzip2 -d -n$THREADS: timed to /dev/null, then a second run piped into cmp;
#   (SKIP_CPU_TOOLS=1 leaves out these three);
#   bench_gpu_bzip2_dec --reps $REPS --blocks1: the CPU engine in-process (all CPUs, one run),
#     the GPU device-resident decoder (best and median of $REPS after a warm-up, per-stage ms),
#     the GPU batch API from pageable host memory with a realloc grow; every output compared
#     with the CPU engine's, whose output is the original (it decodes what bzip2 wrote); plus
#     the latency of one 900 kB block (its own table);
#   with OLD_BIN (another build's bench_gpu_bzip2_dec, for example today's main): the same
#     bench of that build right after, its rows' tools prefixed "old:", and a table of old
#     against new last;
#   if $GPUD_DIR/daemon/gpucompd and $GPUD_DIR/programs/gpucomp/gpucomp exist (scripts/build-gpud.sh):
#     gpucomp -d -c through gpucompd --gpu=$GPU_MODE and through gpucompd --gpu=off (the CPU
#     engine): one verified run piped into cmp (it also warms up), then one timed run to
#     /dev/null; the backend gpucomp -v reports is in the note; and, if
#     $GPUD_DIR/tests/bench/bench_daemon has the bzip2-dec-many mode, $MANY (clients, MiB,
#     rounds) decompressions at once through each daemon (every client's slice compressed by
#     the CPU engine -9 in-process first; aggregate MB/s).
# "x lbzip2" = MB/s over lbzip2 -d -n$THREADS's MB/s on the same corpus and encoder in this run.
# A bundle made by ../shared/device/bundle.sh in .device/ is sourced first (lbzip2, pbzip2);
# missing tools are skipped with a note.
#
# Environment: SIZE_MB (MiB of output per corpus, default 1024; SIZE_MIB is the same), REPS (3),
#   THREADS (16), PREFIX_MIB (64), GPUD_DIR (build-gpud), GPU_MODE (auto), MANY ("64 16 1"),
#   DAEMON_ARGS ("--max-request 16G --max-output 16G --memory-budget 32G"), CORPUS_DIR,
#   LOGDIR (default $OUT or /tmp/gpu-bzip2-dec-bench: logs and table.md).
# Default run: aimed at under 8 minutes on an H100 host with 16 cores (about 2 of them the
# bzip2 -9 encodes of the setup).
# Exit status: non-zero if an output differed from the original or a decoder under test failed.
set -u
BIN=${1:-build-gpu/bin}
SIZE_MB=${SIZE_MB:-${SIZE_MIB:-1024}}
REPS=${REPS:-3}
THREADS=${THREADS:-16}
OLD_BIN=${OLD_BIN:-}
PREFIX_MIB=${PREFIX_MIB:-64}
GPUD_DIR=${GPUD_DIR:-build-gpud}
GPU_MODE=${GPU_MODE:-auto}
read -r M_CLIENTS M_MIB M_ROUNDS <<<"${MANY:-64 16 1}"
DAEMON_ARGS=${DAEMON_ARGS:---max-request 16G --max-output 16G --memory-budget 32G}
LOGDIR=${LOGDIR:-${OUT:-/tmp/gpu-bzip2-dec-bench}}
BENCH=$BIN/bench_gpu_bzip2_dec
GPUCOMPD=$GPUD_DIR/daemon/gpucompd
GPUCOMP=$GPUD_DIR/programs/gpucomp/gpucomp
BENCH_DAEMON=$GPUD_DIR/tests/bench/bench_daemon
mkdir -p "$LOGDIR"
if [ -f .device/env.sh ]; then
    # shellcheck disable=SC1091
    . .device/env.sh
    echo "sourced .device/env.sh"
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bzip2-dec.XXXXXX")
DPID=""
BGPIDS=""
stop_daemon() {
    if [ -n "$DPID" ]; then
        kill "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        DPID=""
    fi
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    stop_daemon
    for p in $BGPIDS; do kill "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? n / s / 1e6 : 0) }'; }
fsize() { stat -c %s "$1" 2>/dev/null || echo 0; }
t_start=$(now)
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$GPU_NAME" ] || GPU_NAME="no GPU (nvidia-smi: none)"
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
echo "== $DATE; $GPU_NAME; $(nproc) CPUs; SIZE_MB $SIZE_MB; logs in $LOGDIR"
SIZE=$(( SIZE_MB << 20 ))
PREFIX=$(( PREFIX_MIB << 20 ))
fail=0
notes=""
rows="$LOGDIR/rows.txt"
: > "$rows"
# row corpus encoder tool MB/s note
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$rows"; echo "$1 [$2]: $3: $4 MB/s${5:+ ($5)}"; }
skipped=""
have() {
    command -v "$1" > /dev/null 2>&1 && return 0
    case " $skipped " in *" $1 "*) ;; *) skipped="$skipped $1" ;; esac
    return 1
}

# ---- corpora (as gpu-bzip2-daemon-bench.sh) ----
CDIR=${CORPUS_DIR:-$W}
mkdir -p "$CDIR" && CDIR=$(cd "$CDIR" && pwd)
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
# encode CORPUS: bzip2 -9 of it in the background (its pid in BGPIDS), unless kept from a run before
encode_bzip2_bg() {
    local f=$CDIR/$1 out=$CDIR/$1.bzip2-9.bz2
    [ -s "$out" ] && [ "$out" -nt "$f" ] && { echo "$1: reused $out"; return 0; }
    have bzip2 || return 0
    (bzip2 -9 -c "$f" > "$out.tmp" && mv "$out.tmp" "$out") &
    BGPIDS="$BGPIDS $!"
}
t0=$(now)
if [ "$(fsize "$CDIR/text")" -eq "$SIZE" ]; then
    echo "text: reused $CDIR/text"
else
    rm -f "$CDIR"/text.*.bz2
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
encode_bzip2_bg text # while the tar is made
if [ "$(fsize "$CDIR/mixed")" -eq "$SIZE" ]; then
    echo "mixed: reused $CDIR/mixed"
else
    rm -f "$CDIR"/mixed.*.bz2
    dirs=""
    for d in usr/bin usr/include usr/lib usr/share; do [ -d "/$d" ] && dirs="$dirs $d"; done
    # shellcheck disable=SC2086
    (cd / && find $dirs -xdev \( -type f -o -type d -o -type l \) 2>/dev/null | LC_ALL=C sort \
        | tar --no-recursion --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -T - 2>/dev/null) \
        | head -c "$SIZE" > "$CDIR/mixed"
    reps=$(repeat_to "$CDIR/mixed") || { echo "empty tar of$dirs" >&2; exit 2; }
    echo "mixed: tar of$dirs${reps:+, repeated $reps}"
fi
encode_bzip2_bg mixed
echo "corpora ready in $(since "$t0") s (in $CDIR)"
corpora="text mixed"

# ---- encoders: lbzip2 now, while bzip2 -9 runs in the background ----
t0=$(now)
encoders=""
have bzip2 && encoders="bzip2-9"
if have lbzip2; then
    encoders="$encoders lbzip2-9"
    for c in $corpora; do
        out=$CDIR/$c.lbzip2-9.bz2
        [ -s "$out" ] && [ "$out" -nt "$CDIR/$c" ] && continue
        lbzip2 -9 -n "$THREADS" -c "$CDIR/$c" > "$out.tmp" && mv "$out.tmp" "$out"
    done
fi
if have pbzip2; then
    encoders="$encoders pbzip2-9"
    for c in $corpora; do
        out=$CDIR/$c.pbzip2-9.bz2
        [ -s "$out" ] && [ "$out" -nt "$CDIR/$c" ] && continue
        pbzip2 -9 "-p$THREADS" -c "$CDIR/$c" > "$out.tmp" && mv "$out.tmp" "$out"
    done
fi
for p in $BGPIDS; do
    wait "$p" || { echo "bzip2 -9 failed" >&2; exit 1; }
done
BGPIDS=""
[ -n "$encoders" ] || { echo "neither bzip2 nor lbzip2 here: nothing to decode" >&2; exit 2; }
for c in $corpora; do
    for e in $encoders; do
        echo "$c.$e.bz2: $(( $(fsize "$CDIR/$c.$e.bz2") >> 20 )) MiB, ratio $(awk -v n="$(fsize "$CDIR/$c")" \
            -v z="$(fsize "$CDIR/$c.$e.bz2")" 'BEGIN { printf "%.3f", n / z }')"
    done
done
echo "encoded in $(since "$t0") s"
enc_label() {
    case $1 in
    bzip2-9) echo "bzip2 -9" ;;
    lbzip2-9) echo "lbzip2 -9 -n$THREADS" ;;
    pbzip2-9) echo "pbzip2 -9 -p$THREADS" ;;
    *) echo "$1" ;;
    esac
}

# ---- CPU decoders ----
# run_prefix corpus encoder label note command...: `command... FILE.bz2` to a pipe cut after
# PREFIX bytes of output (all of it if shorter), compared with the original's first bytes in the
# pipeline; the time runs until the comparison ends (the decoder is then killed by SIGPIPE)
run_prefix() {
    local c=$1 e=$2 label=$3 note=$4 f=$CDIR/$1 z=$CDIR/$1.$2.bz2 n p t0 t1 rc
    shift 4
    n=$(fsize "$f")
    p=$n
    [ "$n" -gt "$PREFIX" ] && { p=$PREFIX; note="${note:+$note; }first $PREFIX_MIB MiB of output only"; }
    rm -f "$W/t_end" "$W/cmp.rc"
    t0=$(now)
    timeout 600 "$@" "$z" 2>/dev/null | {
        head -c "$p" | cmp -n "$p" - "$f" > "$W/cmp.out" 2>&1
        echo $? > "$W/cmp.rc"
        now > "$W/t_end"
    }
    t1=$(cat "$W/t_end")
    rc=$(cat "$W/cmp.rc")
    if [ "$rc" != 0 ]; then
        echo "$c [$e]: $label: output DIFFERS from the original: $(cat "$W/cmp.out")" >&2
        note="${note:+$note; }MISMATCH"
        fail=1
    fi
    row "$c" "$(enc_label "$e")" "$label" "$(mbs "$p" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")" "$note"
}
# run_full corpus encoder label note command...: timed to /dev/null, then a second run into cmp
run_full() {
    local c=$1 e=$2 label=$3 note=$4 f=$CDIR/$1 z=$CDIR/$1.$2.bz2 n t0 s
    shift 4
    n=$(fsize "$f")
    t0=$(now)
    if ! "$@" "$z" > /dev/null; then
        echo "$c [$e]: $label FAILED" >&2
        fail=1
        return 1
    fi
    s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
    if ! "$@" "$z" | cmp - "$f" > "$W/cmp.out" 2>&1; then
        echo "$c [$e]: $label: output DIFFERS from the original: $(cat "$W/cmp.out")" >&2
        note="${note:+$note; }MISMATCH"
        fail=1
    fi
    row "$c" "$(enc_label "$e")" "$label" "$(mbs "$n" "$s")" "$note"
}
echo "== CPU decoders (threads: $THREADS)"
t0=$(now)
[ "${SKIP_CPU_TOOLS:-0}" = 1 ] && notes="${notes}CPU tools not run (SKIP_CPU_TOOLS=1). "
for c in $corpora; do
    [ "${SKIP_CPU_TOOLS:-0}" = 1 ] && break
    for e in $encoders; do
        have lbzip2 && run_full "$c" "$e" "lbzip2 -d -n$THREADS" "" lbzip2 -d -n "$THREADS" -c
        have pbzip2 && run_prefix "$c" "$e" "pbzip2 -d -p$THREADS" "" pbzip2 -d "-p$THREADS" -c
        have bzip2 && run_prefix "$c" "$e" "bzip2 -d" "1 thread" bzip2 -d -c
    done
done
echo "CPU decoders: $(since "$t0") s"

# ---- the GPU decoder and the CPU engine, in-process ----
files=""
for c in $corpora; do for e in $encoders; do files="$files $CDIR/$c.$e.bz2"; done; done
if have bzip2; then
    tail -c 12000000 "$CDIR/mixed" > "$CDIR/mixed-tail"
    head -c 8000000 "$CDIR/text" > "$CDIR/text-head"
    for c in mixed-tail text-head; do
        bzip2 -9 -c "$CDIR/$c" > "$CDIR/$c.bzip2-9.bz2" && files="$files $CDIR/$c.bzip2-9.bz2"
    done
fi
# gpu_bench BENCH LOG PREFIX: BENCH --reps REPS --blocks1 on every file; its RESULT rows, tools prefixed
gpu_bench() {
    local bench=$1 log=$2 prefix=$3 brc t0
    echo "== $bench --reps $REPS --blocks1"
    t0=$(now)
    # shellcheck disable=SC2086
    "$bench" --reps "$REPS" --blocks1 $files > "$log" 2>&1
    brc=$?
    grep -E '^(device|==|gpu|cpu|one block|MISMATCH|SKIP)' "$log"
    grep -v -E '^(device|==|gpu|cpu|one block|MISMATCH|RESULT|SKIP|MB =|###|\||$)' "$log" | head -20
    echo "$bench: exit $brc, $(since "$t0") s"
    if [ "$brc" = 77 ]; then
        notes="${notes}$bench found no CUDA device (exit 77): no in-process rows. "
    elif [ "$brc" != 0 ]; then
        fail=1
        notes="${notes}$bench FAILED (exit $brc, see its log). "
    fi
    # RESULT file bytes tool MB/s note; file = corpus.encoder.bz2
    awk -F'\t' '$1 == "RESULT" { f = $2; sub(/\.bz2$/, "", f); c = f; sub(/\..*/, "", c); e = f; sub(/^[^.]*\./, "", e)
        print c "\t" e "\t" $4 "\t" $5 "\t" $6 }' "$log" | while IFS=$'\t' read -r c e t m note; do
        row "$c" "$(enc_label "$e")" "$prefix$t" "$m" "$note" > /dev/null
    done
}
if [ -x "$BENCH" ]; then
    gpu_bench "$BENCH" "$LOGDIR/bench_gpu_bzip2_dec.log" ""
    [ -n "$OLD_BIN" ] && gpu_bench "$OLD_BIN/bench_gpu_bzip2_dec" "$LOGDIR/bench_gpu_bzip2_dec.old.log" "old: "
else
    echo "no $BENCH (build it with scripts/build-gpu.sh): no in-process rows" >&2
    notes="${notes}No bench_gpu_bzip2_dec in $BIN: no in-process rows. "
    fail=1
fi

# ---- through the daemon ----
SOCK=""
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
    stop_daemon
    return 1
}
# daemon_rows MODE: gpucomp -d -c on every .bz2 through the running daemon, then bzip2-dec-many
daemon_rows() {
    local mode=$1 c e f z n t0 s be note L
    for c in $corpora; do
        f=$CDIR/$c
        n=$(fsize "$f")
        for e in $encoders; do
            z=$CDIR/$c.$e.bz2
            # verified run first (also the warm-up), then the timed run
            if ! "$GPUCOMP" --socket "$SOCK" --no-fallback -v -d -c "$z" 2> "$W/cli.err" | cmp - "$f" > "$W/cmp.out" 2>&1; then
                echo "$c [$e]: gpucomp -d via gpucompd --gpu=$mode: output DIFFERS or failed: $(cat "$W/cmp.out") $(tail -2 "$W/cli.err")" >&2
                fail=1
                continue
            fi
            be=$(grep -oE '\((gpu|cpu)\)' "$W/cli.err" | tail -1)
            t0=$(now)
            if ! "$GPUCOMP" --socket "$SOCK" --no-fallback -d -c "$z" > /dev/null; then
                echo "$c [$e]: gpucomp -d via gpucompd --gpu=$mode FAILED" >&2
                fail=1
                continue
            fi
            s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
            note="one timed run after a verified one; backend ${be:-not reported}"
            row "$c" "$(enc_label "$e")" "gpucomp -d via gpucompd --gpu=$mode" "$(mbs "$n" "$s")" "$note"
        done
        if [ "$dec_many" = 1 ]; then
            L=$LOGDIR/dec-many-$mode-$c.log
            if "$BENCH_DAEMON" "$SOCK" bzip2-dec-many "$f" "$M_CLIENTS" "$M_MIB" "$M_ROUNDS" > "$L" 2>&1; then
                cat "$L"
                row "$c" "CPU engine -9, $M_MIB MiB streams" "bench_daemon bzip2-dec-many via gpucompd --gpu=$mode" \
                    "$(grep -m1 '^| bzip2-dec-many' "$L" | grep -oE 'aggregate [0-9.]+' | awk '{ print $2 }')" \
                    "$M_CLIENTS clients x $M_MIB MiB x $M_ROUNDS round(s) at once; $(grep -m1 '^| bzip2-dec-many' "$L" | grep -oE 'gpu [0-9]+ of [0-9]+ requests|p50 [0-9.]+ ms' | tr '\n' ' ')"
            else
                echo "bench_daemon bzip2-dec-many via gpucompd --gpu=$mode FAILED:" >&2
                cat "$L" >&2
                fail=1
            fi
        fi
    done
}
if [ -x "$GPUCOMPD" ] && [ -x "$GPUCOMP" ]; then
    dec_many=0
    if [ -x "$BENCH_DAEMON" ] && grep -q 'bzip2-dec-many' "$BENCH_DAEMON" 2>/dev/null; then
        dec_many=1
    else
        notes="${notes}$BENCH_DAEMON has no bzip2-dec-many mode (rebuild with scripts/build-gpud.sh): skipped. "
    fi
    t0=$(now)
    modes="$GPU_MODE"
    [ "$GPU_MODE" != off ] && modes="$modes off"
    for m in $modes; do
        echo "== gpucompd --gpu=$m"
        if start_daemon "$m"; then
            "$GPUCOMP" --socket "$SOCK" --stats 2>/dev/null | grep -iE 'backend|device|bzip2' | head -5
            daemon_rows "$m"
            stop_daemon
        else
            fail=1
        fi
    done
    echo "daemon: $(since "$t0") s"
else
    echo "no $GPUCOMPD or $GPUCOMP (scripts/build-gpud.sh): no daemon rows"
    notes="${notes}No daemon binaries in $GPUD_DIR: no daemon rows. "
fi
[ -n "$skipped" ] && echo "note: not installed here, skipped:$skipped"

# ---- tables ----
echo
awk '/^### bzip2 decode/ { p = 1 } p' "$LOGDIR/bench_gpu_bzip2_dec.log" 2>/dev/null
{
    echo
    echo "### bzip2 decompression: $GPU_NAME + $(nproc) CPUs, $DATE"
    echo
    echo "SIZE_MB $SIZE_MB MiB of output per corpus (text: the host's *.py; mixed: tar of /usr). MB/s = 10^6"
    echo "bytes of decompressed output per second of wall time (GPU bench: best of $REPS after a warm-up;"
    echo "CPU engine in-process, CPU tools and gpucomp: one run). x lbzip2 = MB/s / lbzip2 -d -n$THREADS MB/s"
    echo "on the same corpus and encoder in this run. Every output was compared with the original. $notes"
    [ -n "$skipped" ] && echo "Not installed on this host, skipped:$skipped."
    echo
    echo "| corpus | encoder | tool | MB/s of output | x lbzip2 -d -n$THREADS | note |"
    echo "|---|---|---|---|---|---|"
    for c in $corpora; do
        awk -F'\t' -v c="$c" '$1 == c { print $2 }' "$rows" | awk '!seen[$0]++' | while IFS= read -r e; do
            ref=$(awk -F'\t' -v c="$c" -v e="$e" '$1 == c && $2 == e && $3 ~ /^lbzip2 / { print $4; exit }' "$rows")
            awk -F'\t' -v c="$c" -v e="$e" -v ref="${ref:-0}" '$1 == c && $2 == e {
                vs = (ref > 0 && $4 > 0) ? sprintf("%.2fx", $4 / ref) : "-"
                printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, vs, $5
            }' "$rows"
        done
    done
} | tee "$LOGDIR/table.md"
if [ -n "$OLD_BIN" ]; then
    echo
    echo "### old ($OLD_BIN) against new ($BIN): GPU device-resident MB/s (best of $REPS), one block ms (best)"
    echo
    echo "| file | old MB/s | new MB/s | new / old | old one block ms | new one block ms | CPU engine one block ms |"
    echo "|---|---|---|---|---|---|---|"
    for f in $files; do
        b=$(basename "$f")
        # which build a line is from goes by its log's whole name (a LOGDIR may hold "old" too)
        awk -F'\t' -v f="$b" -v oldlog="$LOGDIR/bench_gpu_bzip2_dec.old.log" '
            { old = FILENAME == oldlog }
            old && $1 == "RESULT" && $2 == f && $4 ~ /device-resident/ { om = $5 }
            !old && $1 == "RESULT" && $2 == f && $4 ~ /device-resident/ { nm = $5 }
            old && $1 == "RESULT1" && $2 == f { ob = $6 }
            !old && $1 == "RESULT1" && $2 == f { nb = $6; cb = $4 }
            END { printf "| %s | %s | %s | %s | %s | %s | %s |\n", f, om, nm, (om > 0 ? sprintf("%.2fx", nm / om) : "-"), ob, nb, cb }' \
            "$LOGDIR/bench_gpu_bzip2_dec.old.log" "$LOGDIR/bench_gpu_bzip2_dec.log"
    done
fi
echo
echo "total $(since "$t_start") s; logs in $LOGDIR; exit $fail"
exit $fail
