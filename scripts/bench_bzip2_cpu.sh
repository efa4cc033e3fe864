#!/bin/sh
# bench_bzip2_cpu.sh - compare the bzip2 CPU codec with bzip2 -9, lbzip2 -9
# and pbzip2 -9 on the same files in the same run; prints a markdown table.
#
# usage: scripts/bench_bzip2_cpu.sh [BENCH_BINARY | BUILD_DIR] [THREADS...]
#   BENCH_BINARY: tests/bench/bench_bzip2 of a build (`make` builds it), or
#   BUILD_DIR, a build tree holding it; default: build/tests/bench/bench_bzip2
#   when it exists, else built into $TMPDIR from the sources with gcc -O2.
#   THREADS default "1 .. nproc". For the thread-count table against the
#   daemon, lbzip2 and pbzip2 on large corpora: scripts/cpu-scaling-bench.sh.
# Corpora (built in $TMPDIR, a few MB each): text from /usr/share/doc,
# a tar of /usr/include, the largest files of /usr/bin.
# MB/s = 10^6 uncompressed bytes per second, best of 3 runs;
# ratio = uncompressed / compressed.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
work=${TMPDIR:-/tmp}/bench_bzip2.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
bench=${1:-}
[ $# -gt 0 ] && shift
[ -n "$bench" ] && [ -d "$bench" ] && bench=$bench/tests/bench/bench_bzip2
if [ -z "$bench" ] && [ -x "$here/build/tests/bench/bench_bzip2" ]; then
    bench=$here/build/tests/bench/bench_bzip2
fi
if [ -n "$bench" ] && [ ! -x "$bench" ]; then
    echo "bench_bzip2_cpu.sh: $bench is not an executable (make tests/bench/bench_bzip2 in a build)" >&2
    exit 2
fi
if [ -z "$bench" ]; then
    bench=$work/bench_bzip2
    . "$here/scripts/engine-files.sh"
    gcc -std=c11 -O2 -D_GNU_SOURCE -pthread $(engine_includes "$here") \
        "$here/tests/bench/bench_bzip2.c" $(engine_bz2_sources "$here") \
        "$here/common/gc_status.c" "$here/common/parallel.c" "$here/common/scratch.c" -o "$bench"
fi
threads=${*:-$(seq 1 "$(nproc)")}

size=${BENCH_SIZE:-8000000}
(find /usr/share/doc -type f \( -name '*.txt' -o -name 'README*' -o -name 'copyright' -o -name '*.md' \) -size -200k 2>/dev/null | sort | xargs cat 2>/dev/null || true) | head -c "$size" > "$work/text"
tar cf - -C / usr/include 2>/dev/null | head -c "$size" > "$work/include.tar" || true
(ls -S /usr/bin/* | head -60 | xargs cat 2>/dev/null || true) | head -c "$size" > "$work/binaries"

now() { date +%s.%N; }
# best-of-3 wall time of a shell command
best() {
    b=""
    for _ in 1 2 3; do
        t0=$(now); sh -c "$1" > /dev/null 2>&1; t1=$(now)
        b=$(echo "$t0 $t1 $b" | awk '{ d = $2 - $1; if ($3 == "" || d < $3) print d; else print $3 }')
    done
    echo "$b"
}
mbps() { echo "$1 $2" | awk '{ printf "%.1f", $1 / $2 / 1e6 }'; }
ratio() { echo "$1 $2" | awk '{ printf "%.3f", $1 / $2 }'; }

echo "| file | tool | threads | compress MB/s | decompress MB/s | ratio | size vs bzip2 -9 |"
echo "|---|---|---|---|---|---|---|"
for f in text include.tar binaries; do
    in=$work/$f
    n=$(wc -c < "$in")
    bzip2 -9 -c "$in" > "$work/ref.bz2"
    ref=$(wc -c < "$work/ref.bz2")
    row() { # tool threads csec dsec csize
        echo "| $f | $1 | $2 | $(mbps "$n" "$3") | $(mbps "$n" "$4") | $(ratio "$n" "$5") | $(echo "$5 $ref" | awk '{ printf "%+.2f%%", ($1 / $2 - 1) * 100 }') |"
    }
    row "bzip2 -9" 1 "$(best "bzip2 -9 -c $in")" "$(best "bzip2 -dc $work/ref.bz2")" "$ref"
    for t in $threads; do
        out=$("$bench" -b -l 9 -t "$t" -r 3 "$in")
        set -- $out
        echo "| $f | gpucompd cpu | $t | $1 | $2 | $(ratio "$n" "$3") | $(echo "$3 $ref" | awk '{ printf "%+.2f%%", ($1 / $2 - 1) * 100 }') |"
        lbzip2 -9 -n "$t" -c "$in" > "$work/l.bz2"
        row "lbzip2 -9" "$t" "$(best "lbzip2 -9 -n $t -c $in")" "$(best "lbzip2 -d -n $t -c $work/l.bz2")" "$(wc -c < "$work/l.bz2")"
        pbzip2 -9 -p"$t" -c "$in" > "$work/p.bz2"
        row "pbzip2 -9" "$t" "$(best "pbzip2 -9 -p$t -c $in")" "$(best "pbzip2 -d -p$t -c $work/p.bz2")" "$(wc -c < "$work/p.bz2")"
    done
done
