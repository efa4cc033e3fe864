#!/bin/bash
# bench-corpora.sh - the deterministic corpora of scripts/bench.sh, written to DIR.
#
#   scripts/bench-corpora.sh DIR [--size MIB] [--adv-size MIB] [--only "text tar ..."]
#
#   --size MIB      size of each main corpus (default 1024); the adversarial set is smaller
#   --adv-size MIB  size of each adversarial corpus (default 4)
#   --only LIST     make only these corpora (names below)
#
# Writes DIR/NAME.dat per corpus and DIR/corpora.txt (NAME<TAB>bytes<TAB>how, one a line).
# Same bytes on every run on a given host (fixed file lists sorted with LC_ALL=C, fixed seeds);
# different hosts have different files, so text, tar and bz2 differ between hosts.
#   text       the *.py files under /usr/lib/python3* sorted by path, concatenated, repeated
#              whole and cut to MIB (no Python: files under /usr/share under 1 MiB instead)
#   tar        tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner of those of
#              /usr/share/doc /usr/include /usr/lib/python3* /usr/share/man /usr/lib/x86_64-linux-gnu
#              that exist, cut to MIB (repeated whole if shorter)
#   voxels     sparse 512^3 byte volumes like the seed renderer's (scripts/bench-gen.c: gaussian
#              clusters of grayscale points on zeros, about 1.3% non-zero), concatenated, cut
#   int32      a sorted int32 timestamp column with repeats (runs of 1-16 rows, steps 1-1000)
#   float32    a float32 sensor column, a random walk held for runs of 1-64 samples
#   bz2        the .bz2 files under /usr/share (find, sorted), decompressed and concatenated,
#              repeated and cut to MIB; absent when the host has none
#   adv-zeros, adv-period2, adv-record1k (a 1 KiB random block repeated), adv-fibonacci:
#              the adversarial BWT set, --adv-size MIB each
# Needs cc (scripts/bench-gen.c is compiled into DIR on the fly), tar, find, bzip2 for bz2.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
export LC_ALL=C

usage() { sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
DIR=""
SIZE=1024
ADV=4
ONLY="text tar voxels int32 float32 bz2 adv-zeros adv-period2 adv-record1k adv-fibonacci"
while [ $# -gt 0 ]; do
    case $1 in
    --size) SIZE=${2:?--size MIB}; shift ;;
    --size=*) SIZE=${1#*=} ;;
    --adv-size) ADV=${2:?--adv-size MIB}; shift ;;
    --adv-size=*) ADV=${1#*=} ;;
    --only) ONLY=${2:?--only LIST}; shift ;;
    --only=*) ONLY=${1#*=} ;;
    -h | --help) usage ;;
    -*) echo "bench-corpora.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$DIR" ] || usage; DIR=$1 ;;
    esac
    shift
done
[ -n "$DIR" ] || usage
for n in "$SIZE" "$ADV"; do
    case $n in '' | *[!0-9]* | 0) echo "sizes are whole MiB over 0, not '$n'" >&2; exit 2 ;; esac
done
mkdir -p "$DIR" || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
GEN=$DIR/bench-gen
if [ ! -x "$GEN" ] || [ "$HERE/bench-gen.c" -nt "$GEN" ]; then
    cc -O2 -o "$GEN" "$HERE/bench-gen.c" -lm || { echo "cc could not build $HERE/bench-gen.c" >&2; exit 2; }
fi
N=$((SIZE << 20))
NA=$((ADV << 20))
: > "$DIR/corpora.txt"
fail=0
# repeat FILE BYTES: FILE repeated whole and cut to BYTES, on stdout
repeat() { [ -s "$1" ] || return 1; while cat "$1"; do :; done | head -c "$2"; }
record() {
    local s
    s=$(stat -c %s "$DIR/$1.dat" 2>/dev/null || echo 0)
    if [ "$s" -gt 0 ]; then
        printf '%s\t%s\t%s\n' "$1" "$s" "$2" >> "$DIR/corpora.txt"
        echo "  $1: $s bytes ($2)"
    else
        rm -f "$DIR/$1.dat"
        echo "  $1: skipped ($2)"
    fi
}
for c in $ONLY; do
    out=$DIR/$c.dat
    case $c in
    text)
        find /usr/lib/python3* -name '*.py' -type f -print0 2>/dev/null | sort -z > "$DIR/list"
        how="*.py of /usr/lib/python3*"
        if [ ! -s "$DIR/list" ]; then
            find /usr/share -type f -size -1M -print0 2>/dev/null | sort -z | head -z -n 20000 > "$DIR/list"
            how="files under /usr/share"
        fi
        xargs -0 -r cat < "$DIR/list" > "$DIR/base" 2>/dev/null
        how="$how, $(tr -cd '\0' < "$DIR/list" | wc -c) files, $(stat -c %s "$DIR/base") bytes, repeated"
        repeat "$DIR/base" "$N" > "$out"
        rm -f "$DIR/list" "$DIR/base"
        record text "$how" ;;
    tar)
        dirs=()
        for d in /usr/share/doc /usr/include /usr/lib/python3* /usr/share/man /usr/lib/x86_64-linux-gnu; do
            [ -d "$d" ] && dirs+=("$d")
        done
        # tar may stop on SIGPIPE once head has its bytes; a short tar is repeated whole
        tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "${dirs[@]}" 2>/dev/null \
            | head -c "$N" > "$DIR/base"
        repeat "$DIR/base" "$N" > "$out"
        rm -f "$DIR/base"
        record tar "tar of ${dirs[*]}" ;;
    voxels) "$GEN" voxels "$N" > "$out" && record voxels "sparse 512^3 byte volumes, bench-gen.c" ;;
    int32) "$GEN" int32 "$N" > "$out" && record int32 "sorted int32 timestamps with repeats" ;;
    float32) "$GEN" float32 "$N" > "$out" && record float32 "float32 sensor readings held in runs" ;;
    bz2)
        find /usr/share -name '*.bz2' -type f -print0 2>/dev/null | sort -z > "$DIR/list"
        : > "$DIR/base"
        if command -v bzip2 > /dev/null; then
            while IFS= read -r -d '' f; do bzip2 -dc "$f" >> "$DIR/base" 2>/dev/null; done < "$DIR/list"
        fi
        how="$(tr -cd '\0' < "$DIR/list" | wc -c) .bz2 files under /usr/share, decompressed, repeated"
        repeat "$DIR/base" "$N" > "$out"
        rm -f "$DIR/list" "$DIR/base"
        record bz2 "$how" ;;
    adv-*) "$GEN" "${c#adv-}" "$NA" > "$out" && record "$c" "adversarial BWT input, bench-gen.c" ;;
    *) echo "bench-corpora.sh: unknown corpus $c" >&2; fail=1 ;;
    esac
done
exit $fail
