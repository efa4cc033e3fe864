#!/bin/bash
# Build the libFuzzer targets with clang and run each for a while: the
# decoders (rle, bzip2; bz2part: the streamed bzip2 decode against the whole
# one, tests/fuzz/fuzz_bz2_part.c), the daemon's frame handling (frame: wire framing,
# request validation and the CPU engine, tests/fuzz/fuzz_frame.c) and the GPU
# bzip2 decoder's host-side framing walk (bz2walk, tests/fuzz/fuzz_bz2_dec_walk.cc).
# Usage: scripts/fuzz.sh [SECONDS-PER-TARGET]   (default 30; FUZZ_TARGETS="frame" runs only those named)
# Prints "fuzz-TARGET: 1 passed, 0 failed" (or "0 passed, 1 failed") per target;
# a crash leaves its reproducer in build-fuzz/.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-30}
out="$top/build-fuzz"
mkdir -p "$out"
cd "$top"
. scripts/engine-files.sh
common="common/gc_status.c common/parallel.c common/scratch.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE $(engine_includes) -pthread"
bz2="$(engine_bz2_sources)"
rle="$(engine_rle_sources)"
# The frame target needs the protobuf-c sources that the build makes with
# protoc-c (proto/proto.am); they are generated into build-fuzz/proto/.
proto() {
    if [ ! -f "$out/proto/gpucomp.pb-c.c" ] || [ proto/gpucomp.proto -nt "$out/proto/gpucomp.pb-c.c" ]; then
        protoc-c -I. --c_out="$out" proto/gpucomp.proto || return 1
    fi
    local pc
    pc=$(pkg-config --cflags --libs libprotobuf-c) || return 1
    echo "-I. -I$out $out/proto/gpucomp.pb-c.c $pc"
}
declare -A sources=(
    [rle]="tests/fuzz/fuzz_rle_decode.c $rle common/crc32c.c"
    [bzip2]="tests/fuzz/fuzz_bzip2_decode.c $bz2 -lbz2"
    [bz2part]="tests/fuzz/fuzz_bz2_part.c $bz2"
    [frame]="$(daemon_includes) tests/fuzz/fuzz_frame.c proto/wire.c daemon/request/assembly.c daemon/request/request.c daemon/sched/engine.c daemon/mem/budget.c daemon/mem/part_cache.c
             daemon/codec.c codecs/rle/codec_rle.c codecs/bzip2/codec_bzip2.c
             daemon/request/fd_payload.c daemon/request/fd_map_cache.c daemon/request/shared_output.c common/gc_mem.c
             $rle common/crc32c.c $bz2"
)
# The GPU bzip2 decoder's framing walk runs on the host: plain C++ (clang++),
# with the CPU engine's first stage standing in for the device's.
build_bz2walk() {
    local objs="" f o
    mkdir -p "$out/o"
    for f in $bz2 $common tests/fuzz/bz2_walk_model.c; do
        o="$out/o/$(basename "$f" .c).o"
        clang $flags -c "$f" -o "$o" || return 1
        objs="$objs $o"
    done
    clang++ $flags -std=c++17 -x c++ tests/fuzz/fuzz_bz2_dec_walk.cc codecs/bzip2/cuda/dec/bz2_dec_walk.cu -x none $objs \
        -o "$1"
}
status=0
for target in ${FUZZ_TARGETS:-rle bzip2 bz2part frame bz2walk}; do
    bin="$out/fuzz_$target"
    corpus="$out/corpus-$target"
    rm -rf "$corpus"
    seeds=$target
    [ "$target" = bz2walk ] && seeds=bzip2
    [ "$target" = bz2part ] && seeds=bzip2 # any first byte is a schedule
    cp -r "tests/fuzz/corpus/$seeds" "$corpus" 2>/dev/null || mkdir -p "$corpus"
    : >"$out/build-$target.log"
    extra="" built=1
    if [ "$target" = frame ]; then
        extra=$(proto 2>>"$out/build-$target.log") || built=0
    fi
    if [ "$target" = bz2walk ]; then
        build_bz2walk "$bin" 2>>"$out/build-$target.log" || built=0
    fi
    if [ $built = 1 ] &&
        { [ "$target" = bz2walk ] || clang $flags ${sources[$target]} $extra $common -o "$bin" 2>>"$out/build-$target.log"; } &&
        (cd "$out" && "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 "$corpus" \
            >"$out/run-$target.log" 2>&1); then
        echo "fuzz-$target: 1 passed, 0 failed"
    else
        echo "fuzz-$target: 0 passed, 1 failed"
        tail -n 30 "$out/build-$target.log" "$out/run-$target.log" >&2
        status=1
    fi
done
exit $status
