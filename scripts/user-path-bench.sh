#!/bin/bash
# user-path-bench.sh - what a user of gpucomp gets, against one whole memfd request of the same
# file and against lbzip2, pbzip2 and zstd, for two builds in the same run (old and new).
#
#   scripts/user-path-bench.sh --new DIR [--old DIR] [--size MIB] [--rle-size MIB]
#                              [--rle-corpus NAME] [--corpora "text tar"] [--codecs "bzip2 rle"] [--workdir DIR]
#
#   --new DIR, --old DIR  build trees holding daemon/gpucompd, programs/gpucomp/gpucomp and
#                         tests/bench/bench_daemon (scripts/build-gpud.sh makes one)
#   --size MIB            bzip2 corpora size (default 1024)
#   --rle-size MIB        rle's file (default 4096 MiB)
#   --rle-corpus NAME     its corpus (scripts/bench-corpora.sh; default voxels, what rle is for)
# Environment: DAEMON_ARGS (default "--max-request 16G --max-output 16G"), THREADS (default
# nproc), CUDA_VISIBLE_DEVICES as the caller sets it (the daemon sees those GPUs), REPS
# (default 1: rounds of every gpucompd row, old and new alternating; the table gives medians),
# SETTLE (default 0.5: seconds each row waits first, so the daemon has given back the memory
# of the client before it, a 1 GiB memfd request's mappings, and the row measures its own path).
#
# Rows (MB/s = 10^6 uncompressed bytes per second of wall time, one run each, corpora in page
# cache, after a warm-up round trip per daemon):
#   whole      bench_daemon whole: the file in one memfd request; the request's own time; then
#              the same request again on the same client and memfds ("its memfds reused": the
#              output goes into pages the first made, as for a program reusing the library's)
#   file       gpucomp -c FILE > OUT, gpucomp -dc FILE.bz2 > OUT
#   pipe       cat FILE | gpucomp -c > OUT, gpucomp -dc < FILE.bz2 > OUT (a pipe or a file in,
#              a file out), and the issue's pipes, the output a pipe too: cat FILE | gpucomp -c | cat
#              > OUT, gpucomp -dc < FILE.bz2 | cat > OUT; cat FILE | cat > OUT as their reference
#   decompress rows for our own output and for lbzip2- and pbzip2-made files
#   competitors lbzip2 -n$THREADS, pbzip2 -p$THREADS, zstd -3 -T$THREADS, each its own output
#   rle        cat FILE > /dev/null and cp FILE as the physical reference
# Every timed row writes a fresh output file, as a user usually does (truncating a large old one
# first costs the file system as much as writing it, whichever tool writes).
# Every output is compared with its input (a decompress) or with the whole request's output
# (bzip2 compress must be byte for byte the same); a difference fails the run (exit 1).
# The table's last column is new / new's whole request for the same file and direction.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
export LC_ALL=C
top=$(cd "$(dirname "$0")/.." && pwd)
NEW="" OLD="" SIZE=1024 RLE_SIZE=4096 RLE_CORPUS=voxels CORPORA="text tar" CODECS="bzip2 rle" WORKDIR=${TMPDIR:-/tmp}
while [ $# -gt 0 ]; do
    case $1 in
    --new) NEW=$2; shift ;;
    --old) OLD=$2; shift ;;
    --size) SIZE=$2; shift ;;
    --rle-size) RLE_SIZE=$2; shift ;;
    --rle-corpus) RLE_CORPUS=$2; shift ;;
    --corpora) CORPORA=$2; shift ;;
    --codecs) CODECS=$2; shift ;;
    --workdir) WORKDIR=$2; shift ;;
    *) sed -n '3,12p' "$0" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$NEW" ] || { echo "--new DIR is required" >&2; exit 2; }
[ -f "$top/.device/env.sh" ] && . "$top/.device/env.sh"
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-1}
SETTLE=${SETTLE:-0.5}
DAEMON_ARGS=${DAEMON_ARGS:---max-request 16G --max-output 16G}
W=$(mktemp -d "$WORKDIR/user-path.XXXXXX") || exit 2
DPID=""
stop_daemon() { [ -n "$DPID" ] && { kill "$DPID"; wait "$DPID" 2>/dev/null; DPID=""; }; }
trap 'stop_daemon; rm -rf "$W"' EXIT
fail=0
rows=$W/rows
: >"$rows"
now() { date +%s.%N; }
mbs() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? n / s / 1e6 : 0) }'; }
# timed CMD...: runs it, sets SECS (wall) and RC
timed() {
    local t0
    sleep "$SETTLE"
    t0=$(now)
    "$@"
    RC=$?
    SECS=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
}
# record "CORPUS;DIRECTION;PATH;BUILD" MBS: one measurement (BUILD - for a competitor)
record() { printf '%s;%s\n' "$1" "$2" >>"$rows"; }
bad() { echo "MISMATCH: $*" >&2; fail=1; }
same() { cmp -s "$1" "$2" || bad "$3"; }

start_daemon() { # build dir
    SOCK=$W/sock
    rm -f "$SOCK"
    # shellcheck disable=SC2086
    "$1/daemon/gpucompd" --socket="$SOCK" --log-level=err $DAEMON_ARGS 2>>"$W/daemon.log" &
    DPID=$!
    for _ in $(seq 1200); do
        "$1/programs/gpucomp/gpucomp" --socket="$SOCK" --ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "gpucompd of $1 did not start" >&2
    tail -3 "$W/daemon.log" >&2
    exit 1
}
# whole BUILD IN OUT c|d CODEC LEVEL: sets SECS to the request's own time, and WARM to the same
# request's again on the same client and memfds (its output into pages already there; empty with
# a bench_daemon too old to repeat it)
whole() {
    local b=$1
    shift
    sleep "$SETTLE"
    "$b/tests/bench/bench_daemon" "$SOCK" whole "$@" 2 >"$W/whole.out" 2>>"$W/whole.err" || {
        bad "whole $*"
        SECS=0 WARM=""
        return
    }
    SECS=$(awk '/^WHOLE/ { print $5; exit }' "$W/whole.out")
    WARM=$(awk '/^WHOLE/ && ++n == 2 { print $5 }' "$W/whole.out")
}
# record_whole "CORPUS;DIRECTION" BUILD BYTES: the rows of the last whole call
record_whole() {
    record "$1;whole request;$2" "$(mbs "$3" "$SECS")"
    [ -z "$WARM" ] || record "$1;whole request, its memfds reused;$2" "$(mbs "$3" "$WARM")"
}

corpus_file() { # name size_mib -> path
    local f=$W/$1.$2
    [ -f "$f" ] && { echo "$f"; return; }
    "$top/scripts/bench-corpora.sh" "$W/corp" --size "$2" --only "$1" >/dev/null 2>&1
    mv "$W/corp/$1.dat" "$f"
    echo "$f"
}

competitors() { # corpus file label: lbzip2/pbzip2/zstd rows, and their .bz2 files for later
    local f=$1 k=$2 n
    n=$(stat -c %s "$f")
    for t in lbzip2 pbzip2 zstd; do
        command -v "$t" >/dev/null || { echo "no $t here: skipped"; continue; }
        case $t in
        lbzip2) c=(lbzip2 -9 -n "$THREADS" -c); d=(lbzip2 -d -n "$THREADS" -c) ;;
        pbzip2) c=(pbzip2 -9 "-p$THREADS" -c); d=(pbzip2 -d "-p$THREADS" -c) ;;
        zstd) c=(zstd -3 -q "-T$THREADS" -c); d=(zstd -d -q "-T$THREADS" -c) ;;
        esac
        rm -f "$W/$k.$t"
        timed sh -c '"$@" > "$0"' "$W/$k.$t" "${c[@]}" "$f"
        record "$k;compress;$t, $THREADS threads;-" "$(mbs "$n" "$SECS")"
        rm -f "$W/back"
        timed sh -c '"$@" > "$0"' "$W/back" "${d[@]}" "$W/$k.$t"
        record "$k;decompress;$t own file;-" "$(mbs "$n" "$SECS")"
        same "$W/back" "$f" "$t round trip $k"
    done
}

bzip2_rows() { # build label corpus-file key
    local b=$1 v=$2 f=$3 k=$4 n g
    n=$(stat -c %s "$f")
    g=("$b/programs/gpucomp/gpucomp" --socket="$SOCK" --no-fallback)
    whole "$b" "$f" "$W/whole.bz2" c bzip2 9
    record_whole "$k;compress" "$v" "$n"
    rm -f "$W/file.bz2"
    timed sh -c '"$@" > "$0"' "$W/file.bz2" "${g[@]}" -9 -c "$f"
    record "$k;compress;gpucomp -9 -c FILE;$v" "$(mbs "$n" "$SECS")"
    same "$W/file.bz2" "$W/whole.bz2" "$v file compress $k"
    rm -f "$W/pipe.bz2"
    timed bash -c 'cat "$1" | "${@:3}" -9 -c > "$2"' - "$f" "$W/pipe.bz2" "${g[@]}"
    record "$k;compress;cat FILE | gpucomp -9 -c;$v" "$(mbs "$n" "$SECS")"
    same "$W/pipe.bz2" "$W/whole.bz2" "$v pipe compress $k"
    rm -f "$W/pipe.bz2"
    timed bash -c 'cat "$1" | "${@:3}" -9 -c | cat > "$2"' - "$f" "$W/pipe.bz2" "${g[@]}"
    record "$k;compress;cat FILE | gpucomp -9 -c | cat;$v" "$(mbs "$n" "$SECS")"
    same "$W/pipe.bz2" "$W/whole.bz2" "$v pipe to pipe compress $k"
    cp "$W/whole.bz2" "$W/$k.ours"
    for src in ours lbzip2 pbzip2; do
        [ -f "$W/$k.$src" ] || continue
        whole "$b" "$W/$k.$src" "$W/back" d bzip2 9
        record_whole "$k;decompress $src-made" "$v" "$n"
        same "$W/back" "$f" "$v whole decompress $src $k"
        rm -f "$W/back"
        timed sh -c '"$@" > "$0"' "$W/back" "${g[@]}" -dc "$W/$k.$src"
        record "$k;decompress $src-made;gpucomp -dc FILE;$v" "$(mbs "$n" "$SECS")"
        same "$W/back" "$f" "$v file decompress $src $k"
        rm -f "$W/back"
        timed bash -c '"${@:3}" -dc < "$1" > "$2"' - "$W/$k.$src" "$W/back" "${g[@]}"
        record "$k;decompress $src-made;gpucomp -dc < FILE;$v" "$(mbs "$n" "$SECS")"
        same "$W/back" "$f" "$v pipe decompress $src $k"
        rm -f "$W/back"
        timed bash -c '"${@:3}" -dc < "$1" | cat > "$2"' - "$W/$k.$src" "$W/back" "${g[@]}"
        record "$k;decompress $src-made;gpucomp -dc < FILE | cat;$v" "$(mbs "$n" "$SECS")"
        same "$W/back" "$f" "$v pipe to pipe decompress $src $k"
    done
    rm -f "$W/back" "$W/file.bz2" "$W/pipe.bz2" "$W/whole.bz2"
}

rle_rows() { # build label file
    local b=$1 v=$2 f=$3 n g k="rle $RLE_CORPUS"
    n=$(stat -c %s "$f")
    g=("$b/programs/gpucomp/gpucomp" --socket="$SOCK" --no-fallback -a rle)
    whole "$b" "$f" "$W/whole.rle" c rle 0
    record_whole "$k;compress" "$v" "$n"
    whole "$b" "$W/whole.rle" "$W/back" d rle 0
    record_whole "$k;decompress" "$v" "$n"
    same "$W/back" "$f" "$v rle whole"
    rm -f "$W/whole.rle" "$W/back"
    rm -f "$W/file.rle"
    timed sh -c '"$@" > "$0"' "$W/file.rle" "${g[@]}" -c "$f"
    record "$k;compress;gpucomp -c FILE;$v" "$(mbs "$n" "$SECS")"
    rm -f "$W/back"
    timed sh -c '"$@" > "$0"' "$W/back" "${g[@]}" -dc "$W/file.rle"
    record "$k;decompress;gpucomp -dc FILE;$v" "$(mbs "$n" "$SECS")"
    same "$W/back" "$f" "$v rle file"
    rm -f "$W/file.rle" "$W/back"
}

builds="new"
[ -n "$OLD" ] && builds="old new"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd, -)
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); ${GPU:-no GPU}; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-all}; $(nproc) CPUs"
for k in $CORPORA; do
    case " $CODECS " in *" bzip2 "*) ;; *) continue ;; esac
    f=$(corpus_file "$k" "$SIZE")
    rm -f "$W/copy"
    timed sh -c 'cat "$0" | cat > "$1"' "$f" "$W/copy"
    record "$k;reference;cat FILE | cat > OUT;-" "$(mbs "$(stat -c %s "$f")" "$SECS")"
    same "$W/copy" "$f" "cat | cat $k"
    rm -f "$W/copy"
    competitors "$f" "$k"
    for _ in $(seq "$REPS"); do
        for v in $builds; do
            b=$NEW
            [ "$v" = old ] && b=$OLD
            start_daemon "$b"
            "$b/programs/gpucomp/gpucomp" --socket="$SOCK" -9 -c "$f" | head -c 1 >/dev/null # warm-up
            bzip2_rows "$b" "$v" "$f" "$k"
            stop_daemon
        done
    done
    rm -f "$W/$k".*
done
case " $CODECS " in *" rle "*)
    f=$(corpus_file "$RLE_CORPUS" "$RLE_SIZE")
    n=$(stat -c %s "$f")
    timed sh -c 'cat "$0" > /dev/null' "$f"
    record "rle $RLE_CORPUS;reference;cat FILE > /dev/null;-" "$(mbs "$n" "$SECS")"
    rm -f "$W/copy"
    timed cp "$f" "$W/copy"
    record "rle $RLE_CORPUS;reference;cp FILE COPY;-" "$(mbs "$n" "$SECS")"
    rm -f "$W/copy"
    for _ in $(seq "$REPS"); do
        for v in $builds; do
            b=$NEW
            [ "$v" = old ] && b=$OLD
            start_daemon "$b"
            rle_rows "$b" "$v" "$f"
            stop_daemon
        done
    done
    ;;
esac

echo
echo "| corpus | direction | path | old MB/s | new MB/s | new / new whole |"
echo "|---|---|---|---|---|---|"
awk -F';' '
    function median(list,    x, m, i, j, t) { m = split(list, x, " ")
        for (i = 2; i <= m; i++) for (j = i; j > 1 && x[j - 1] + 0 > x[j] + 0; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
        return m % 2 ? x[(m + 1) / 2] : sprintf("%.0f", (x[m / 2] + x[m / 2 + 1]) / 2) }
    { key = $1 ";" $2 ";" $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
      all[key ";" $4] = all[key ";" $4] " " $5 }
    END { for (k in all) v[k] = median(all[k])
      for (i = 1; i <= n; i++) if (order[i] ";new" in v) { split(order[i], a, ";"); if (a[3] == "whole request") whole[a[1] ";" a[2]] = v[order[i] ";new"] }
      for (i = 1; i <= n; i++) { split(order[i], a, ";"); w = whole[a[1] ";" a[2]]
        o = ((order[i] ";old") in v) ? v[order[i] ";old"] : (((order[i] ";-") in v) ? v[order[i] ";-"] : "")
        nw = ((order[i] ";new") in v) ? v[order[i] ";new"] : ""
        r = (nw != "" && w > 0) ? sprintf("%.2fx", nw / w) : ""
        gsub(/\|/, "\\|", a[3])
        printf "| %s | %s | %s | %s | %s | %s |\n", a[1], a[2], a[3], o, nw, r } }' "$rows"
echo "exit $fail"
exit $fail
