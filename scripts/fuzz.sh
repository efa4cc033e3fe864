#!/bin/bash
# Build the libFuzzer targets for the decoders with clang and run each for a
# while. Usage: scripts/fuzz.sh [SECONDS-PER-TARGET]   (default 30)
# Prints "fuzz-TARGET: 1 passed, 0 failed" (or "0 passed, 1 failed") per target;
# a crash leaves its reproducer in build-fuzz/.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30}
out="$top/build-fuzz"
mkdir -p "$out"
cd "$top"
common="kernels/gc_status.c kernels/cpu/parallel.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Ikernels -Ikernels/cpu -pthread"
declare -A sources=(
    [rle]="tests/fuzz/fuzz_rle_decode.c kernels/cpu/rle.c kernels/cpu/crc32c.c"
    [bzip2]="tests/fuzz/fuzz_bzip2_decode.c $(ls kernels/cpu/bz2_*.c 2>/dev/null | tr '\n' ' ') -lbz2"
)
status=0
for target in rle bzip2; do
    bin="$out/fuzz_$target"
    corpus="$out/corpus-$target"
    rm -rf "$corpus"
    cp -r "tests/fuzz/corpus/$target" "$corpus" 2>/dev/null || mkdir -p "$corpus"
    if clang $flags ${sources[$target]} $common -o "$bin" 2>"$out/build-$target.log" &&
        (cd "$out" && "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 "$corpus" \
            >"$out/run-$target.log" 2>&1); then
        echo "fuzz-$target: 1 passed, 0 failed"
    else
        echo "fuzz-$target: 0 passed, 1 failed"
        tail -30 "$out/build-$target.log" "$out/run-$target.log" >&2
        status=1
    fi
done
exit $status
