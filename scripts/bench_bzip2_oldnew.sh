#!/bin/sh
# bench_bzip2_oldnew.sh - the bzip2 CPU engine's compress speed at two
# revisions in the same run: each revision's engine is built from `git
# archive` with gcc -O2 (as scripts/bench_bzip2_cpu.sh builds it) and timed by
# tests/bench/bench_bzip2 -b on the same files, turn about, at each thread
# count. Prints "file threads old_MB/s new_MB/s new/old".
#
# usage: scripts/bench_bzip2_oldnew.sh OLD_REV [NEW_REV] [THREADS...]
#   NEW_REV default HEAD; THREADS default "1 2 nproc".
# Corpora (BENCH_SIZE bytes each, default 8000000): text from /usr/share/doc,
# a tar of /usr/include, the largest files of /usr/bin. MB/s = 10^6
# uncompressed bytes per second, best of 3 (bench_bzip2's own timing).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
old=${1:?usage: bench_bzip2_oldnew.sh OLD_REV [NEW_REV] [THREADS...]}
new=${2:-HEAD}
[ $# -gt 2 ] && shift 2 || set --
threads=${*:-1 2 $(nproc)}
work=${TMPDIR:-/tmp}/bench_oldnew.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

build() { # REV NAME
    mkdir -p "$work/$2"
    git -C "$here" archive "$1" | tar -x -C "$work/$2"
    (
        . "$work/$2/scripts/engine-files.sh"
        gcc -std=c11 -O2 -D_GNU_SOURCE -pthread $(engine_includes "$work/$2") \
            "$work/$2/tests/bench/bench_bzip2.c" $(engine_bz2_sources "$work/$2") \
            "$work/$2/common/gc_status.c" "$work/$2/common/parallel.c" "$work/$2/common/scratch.c" \
            -o "$work/$2.bin"
    )
}
build "$old" old
build "$new" new

size=${BENCH_SIZE:-8000000}
(find /usr/share/doc -type f \( -name '*.txt' -o -name 'README*' -o -name 'copyright' -o -name '*.md' \) \
    -size -200k 2>/dev/null | sort | xargs cat 2>/dev/null || true) | head -c "$size" >"$work/text"
tar cf - -C / usr/include 2>/dev/null | head -c "$size" >"$work/include.tar" || true
(ls -S /usr/bin/* | head -60 | xargs cat 2>/dev/null || true) | head -c "$size" >"$work/binaries"

echo "file threads old_MB/s new_MB/s new/old"
for f in text include.tar binaries; do
    for t in $threads; do
        o=$("$work/old.bin" -b -l 9 -t "$t" -r 3 "$work/$f" | awk '{ print $1 }')
        n=$("$work/new.bin" -b -l 9 -t "$t" -r 3 "$work/$f" | awk '{ print $1 }')
        echo "$f $t $o $n $(echo "$o $n" | awk '{ printf "%.3f", $2 / $1 }')"
    done
done
