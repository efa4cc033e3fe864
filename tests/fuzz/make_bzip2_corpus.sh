#!/bin/sh
# Regenerate the small seed corpus for tests/fuzz/fuzz_bzip2_decode.c with
# the bzip2 command: a few KB of streams covering empty input, tiny input,
# runs, text, binary, levels 1 and 9, and two concatenated streams.
set -eu
dir=$(dirname "$0")/corpus/bzip2
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '' > "$tmp/empty"
printf 'a' > "$tmp/one"
printf 'hello, hello, hello world\n' > "$tmp/hello"
awk 'BEGIN { for (i = 0; i < 300; i++) printf "%c", 65 + (i < 260 ? 0 : i % 3) }' > "$tmp/runs"
awk 'BEGIN { for (i = 0; i < 400; i++) printf "line %d of the seed corpus\n", i * 7 % 13 }' > "$tmp/text"
awk 'BEGIN { srand(7); for (i = 0; i < 1500; i++) printf "%c", int(rand() * 256) }' LC_ALL=C > "$tmp/binary"
awk 'BEGIN { for (i = 0; i < 256; i++) printf "%c", i }' LC_ALL=C > "$tmp/allbytes"
for f in empty one hello runs text binary allbytes; do
    bzip2 -9 -c "$tmp/$f" > "$dir/$f.bz2"
done
bzip2 -1 -c "$tmp/text" > "$dir/text-level1.bz2"
cat "$dir/hello.bz2" "$dir/one.bz2" > "$dir/concat.bz2"
