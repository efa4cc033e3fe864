#!/bin/sh
# Our bzip2 output is bzip2 1.0.8's, byte for byte (docs/BZIP2.md): generated
# inputs (tests/bz2_exact_gen.c) at every level, compressed by `bzip2 -N` and by
# the CPU engine in process (tests/bench/bench_bzip2 over bz2_compress, at 1, 2,
# 8 and all threads), by `gpucomp --local`, and through a gpucompd on the CPU
# engine from a pipe and from a file. bzip2 is a test dependency
# (scripts/install-deps.sh).
top=$(pwd)
gen=$top/tests/bz2_exact_gen
enc=$top/tests/bench/bench_bzip2
daemon=${GPUCOMPD:-$top/daemon/gpucompd}
cli=${GPUCOMP:-$top/programs/gpucomp/gpucomp}
command -v bzip2 >/dev/null || { echo "FAIL: bzip2 is not installed (scripts/install-deps.sh)"; exit 1; }
tmp=$(mktemp -d) || exit 1
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
ok=0

"$daemon" --socket "$tmp/sock" --log-level warning 2>"$tmp/dlog" &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/sock" ] && break; sleep 0.05; done
export GPUCOMP_SOCKET="$tmp/sock"

# differ WHAT REF OUT: fail with where they first differ.
differ()
{
    if cmp -s "$2" "$3"; then
        ok=$((ok + 1))
    else
        echo "FAIL: $1: $(cmp "$2" "$3" 2>&1 | head -1) (bzip2 $(wc -c <"$2") bytes, ours $(wc -c <"$3"))"
        fail=1
    fi
}

# check NAME LEVEL [daemon]: every in-process path; through the daemon too if asked.
check()
{
    f=$tmp/$1
    bzip2 -"$2" -c <"$f" >"$tmp/ref"
    for t in 1 2 8 0; do # 8: enough that the plan's tiles are counted first (bz2_rle1.c)
        "$enc" -c -l "$2" -t $t <"$f" >"$tmp/out"
        differ "$1 -$2 bz2_compress, $t threads" "$tmp/ref" "$tmp/out"
    done
    "$cli" --local -"$2" -c <"$f" >"$tmp/out"
    differ "$1 -$2 gpucomp --local" "$tmp/ref" "$tmp/out"
    [ "$3" = daemon ] || return 0
    cat "$f" | "$cli" --no-fallback -"$2" -c >"$tmp/out"
    differ "$1 -$2 gpucomp, a pipe through gpucompd" "$tmp/ref" "$tmp/out"
    cp "$f" "$tmp/file" && rm -f "$tmp/file.bz2"
    "$cli" --no-fallback -"$2" "$tmp/file"
    differ "$1 -$2 gpucomp FILE through gpucompd" "$tmp/ref" "$tmp/file.bz2"
}

: >"$tmp/empty"
printf x >"$tmp/one"
"$gen" random 150000 >"$tmp/random"
"$gen" text 300000 >"$tmp/text"
"$gen" runs 250000 >"$tmp/runs"
head -c 400000 "$daemon" >"$tmp/binary"
for p in 1 2 7; do
    "$gen" period $p 5000 >"$tmp/period$p-small" # bzip2 sorts blocks under 10000 bytes another way
    "$gen" period $p 120000 >"$tmp/period$p"
done
for l in 1 2 3 4 5 6 7 8 9; do
    for f in empty one random text runs binary period1-small period2-small period7-small period1 period2 \
        period7; do
        check $f $l $([ $l = 1 ] || [ $l = 9 ] && echo daemon)
    done
done

# Block edges: sizes around 100000 x level, and runs of 3, 4, 5, 251, 255, 256
# bytes starting 1, 3 and 5 RLE1 bytes before the block limit.
"$gen" text 899981 >"$tmp/text899981"
"$gen" text 900000 >"$tmp/text900000"
check text899981 9 daemon
check text900000 9
for l in 1 2; do
    for d in -21 -19 -18 -14 0 1; do
        "$gen" random $((l * 100000 + d)) >"$tmp/random$l$d"
        check random$l$d $l
    done
done
for r in 3 4 5 251 255 256; do
    for k in 1 3 5; do
        "$gen" edge $((100000 - 19 - k)) $r >"$tmp/edge$r-$k"
        check edge$r-$k 1
    done
done

# A few MiB: many blocks, split among threads and stream parts.
"$gen" text 3500000 >"$tmp/big"
check big 9 daemon
check big 1 daemon

# Past a stream part's 32 MiB read: a block of long runs ending in text near
# the first read's end, then runs too long for a read to hold a block start.
{
    head -c 32505856 /dev/zero
    "$gen" text 4000000
    head -c 50000000 /dev/zero
    "$gen" text 1000000
} >"$tmp/parts"
check parts 9 daemon

echo "$ok comparisons equal"
[ $fail = 0 ] && echo "ok: every output is bzip2's"
exit $fail
