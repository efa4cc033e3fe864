#!/bin/bash
# cpu-ab-bench.sh - the bzip2 CPU engine of two source trees, in-process, in one run: old and
# new alternate run by run (so drift and a noisy neighbour hit both alike) and the table gives
# each one's median and new / old. For targets such as "within 5% of today's engine".
#
#   scripts/cpu-ab-bench.sh --old TREE --new TREE [--threads "1 2"] [--reps N] [--level L] FILE...
#
#   TREE    a source tree (a git worktree of the old commit, and this one); each is built here
#           with gcc -O2 from its own sources, as bench_bzip2_cpu.sh builds one
#   FILE    the corpora (scripts/bench-corpora.sh makes them); kept in page cache by a warm-up
# Each run is `bench_bzip2 -b -l L -t T -r 1 FILE`: one compress and one decompress, the
# output decoded and compared with the input outside the timing (a mismatch fails the run).
# MB/s = 10^6 uncompressed bytes per second.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -eu
export LC_ALL=C
OLD="" NEW="" THREADS="1 2" REPS=9 LEVEL=9
while [ $# -gt 0 ]; do
    case $1 in
    --old) OLD=$2; shift ;;
    --new) NEW=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --level) LEVEL=$2; shift ;;
    -*) echo "cpu-ab-bench.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
if [ -z "$OLD" ] || [ -z "$NEW" ] || [ $# -eq 0 ]; then
    echo "usage: cpu-ab-bench.sh --old TREE --new TREE [--threads LIST] [--reps N] [--level L] FILE..." >&2
    exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/cpu-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT

build() { # build TREE OUT: bench_bzip2 from TREE's own engine sources
    (cd "$1" && . scripts/engine-files.sh &&
        gcc -std=c11 -O2 -D_GNU_SOURCE -pthread $(engine_includes "$1") tests/bench/bench_bzip2.c \
            $(engine_bz2_sources "$1") common/gc_status.c common/parallel.c common/scratch.c -o "$2")
}
build "$(cd "$OLD" && pwd)" "$work/old"
build "$(cd "$NEW" && pwd)" "$work/new"

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "| file | threads | old compress | new compress | new / old | old decompress | new decompress | new / old |"
echo "|---|---|---|---|---|---|---|---|"
for f in "$@"; do
    cat "$f" > /dev/null
    for t in $THREADS; do
        : > "$work/old.txt"
        : > "$work/new.txt"
        for r in $(seq 1 "$REPS"); do
            for b in old new; do
                "$work/$b" -b -l "$LEVEL" -t "$t" -r 1 "$f" >> "$work/$b.txt"
            done
        done
        oc=$(cut -d' ' -f1 "$work/old.txt" | median) nc=$(cut -d' ' -f1 "$work/new.txt" | median)
        od=$(cut -d' ' -f2 "$work/old.txt" | median) nd=$(cut -d' ' -f2 "$work/new.txt" | median)
        awk -v f="$(basename "$f")" -v t="$t" -v oc="$oc" -v nc="$nc" -v od="$od" -v nd="$nd" 'BEGIN {
            printf "| %s | %s | %.1f | %.1f | %.3f | %.1f | %.1f | %.3f |\n", f, t, oc, nc, nc / oc, od, nd, nd / od }'
    done
done
echo
echo "$REPS runs each, old and new alternating; medians, MB/s. Level $LEVEL. $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
