#!/bin/sh
# scripts/demo.sh, the README's main job, end to end on a small sample: it
# succeeds, verifies both round trips, and prints what it promises (ratio,
# speed and the backend) for each codec.
src=$(cd "$(dirname "$0")/.." && pwd)
daemon=${GPUCOMPD:-$(pwd)/daemon/gpucompd}
build=$(dirname "$(dirname "$daemon")")
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
seq 1 400000 | head -c 2097152 >"$tmp/sample"
if ! bash "$src/scripts/demo.sh" "$build" "$tmp/sample" >"$tmp/out" 2>&1; then
    cat "$tmp/out"; echo "FAIL: scripts/demo.sh exited non-zero"; exit 1
fi
cat "$tmp/out"
fail=0
for algo in bzip2 rle; do
    grep -Eq "^$algo: round trip verified; compress [0-9]+\.[0-9] MB/s, decompress [0-9]+\.[0-9] MB/s " "$tmp/out" \
        || { echo "FAIL: no verified round trip with speeds for $algo"; fail=1; }
done
[ "$(grep -Ec '[0-9]\.[0-9]{3}:1, .* saved, 2097152 in, [0-9]+ out\. \((cpu|gpu)\)$' "$tmp/out")" = 2 ] \
    || { echo "FAIL: not one ratio line with its backend per codec"; fail=1; }
grep -q '^  backend: ' "$tmp/out" || { echo "FAIL: no --stats at the end"; fail=1; }
[ $fail = 0 ] && echo "ok: scripts/demo.sh prints ratio, speed and backend for bzip2 and rle"
exit $fail
