#!/bin/bash
# The benchmark scripts that only a GPU host runs for real, run here on stand-in devices at
# small sizes, so that one of them failing or hanging shows up before device time is spent
# on it: scripts/multi-gpu-bench.sh (one and two --gpu=emulate devices, every row and the
# host reference; it once hung a GPU host for 8 minutes) and scripts/thread-cpu.sh (the
# daemon's threads by name around a gpucomp).
src=$(cd "$(dirname "$0")/.." && pwd)
daemon=${GPUCOMPD:-$(pwd)/daemon/gpucompd}
build=$(dirname "$(dirname "$daemon")")
gpucomp=$build/programs/gpucomp/gpucomp
command -v python3 >/dev/null || { echo "SKIP: no python3 (the script reads STATS as JSON)"; exit 77; }
tmp=$(mktemp -d) || exit 1
dpid=""
trap '[ -n "$dpid" ] && kill "$dpid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0

# multi-gpu-bench: every workload row with a figure for 1 and 2 devices, no FAILED row
if ! EMULATE=2 BIN_DIR="$build" BIG_MIB=8 CLIENTS=4 MIB=2 ROUNDS=1 BZ2_ROUNDS=1 PROCS=4 PROC_TIMEOUT=120 \
    SKIP_FAULT=1 LOGDIR="$tmp/mg" CORPUS_DIR="$tmp/corpus" TMPDIR="$tmp" \
    timeout 900 bash "$src/scripts/multi-gpu-bench.sh" >"$tmp/mg.out" 2>&1; then
    tail -30 "$tmp/mg.out"
    echo "FAIL: scripts/multi-gpu-bench.sh exited non-zero (or ran past 900 s)"
    fail=1
fi
table=$tmp/mg/table.md
rows=$(grep '^| [a-z0-9]' "$table" 2>/dev/null | grep -vc '^| workload ')
full=$(grep -cE '^\| [^|]+ \| [0-9]+ \| [0-9]+ \| [0-9.]+x \|' "$table" 2>/dev/null)
cat "$table" 2>/dev/null
[ "${rows:-0}" -ge 16 ] || { echo "FAIL: the table has ${rows:-0} workload rows, not 16 or more"; fail=1; }
[ "${full:-0}" = "${rows:-0}" ] || { echo "FAIL: $full of $rows rows have a figure for 1 and 2 devices"; fail=1; }
grep -q FAILED "$table" && { echo "FAIL: a FAILED row"; fail=1; }
grep -Eq '^host reference, no gpucompd: .* [0-9]+ MB/s; 4 such copies at once [0-9]+ MB/s$' "$table" ||
    { echo "FAIL: no host reference line"; fail=1; }

# thread-cpu: wall time and the daemon's named thread groups around one gpucomp
head -c 3000000 "$tmp/corpus/text-8" >"$tmp/in" 2>/dev/null || seq 1 400000 >"$tmp/in"
"$daemon" --socket "$tmp/sock" --gpu=off --log-level=warning 2>"$tmp/d.log" &
dpid=$!
for _ in $(seq 200); do "$gpucomp" --socket "$tmp/sock" --ping >/dev/null 2>&1 && break; sleep 0.05; done
if ! bash "$src/scripts/thread-cpu.sh" "$dpid" sh -c '"$1" --socket "$2" -c "$3" > "$3.bz2"' sh "$gpucomp" "$tmp/sock" \
    "$tmp/in" >"$tmp/tc.out" 2>&1; then
    echo "FAIL: thread-cpu.sh around gpucomp exited non-zero"
    fail=1
fi
cat "$tmp/tc.out"
grep -Eq '^wall [0-9]+\.[0-9]+ s$' "$tmp/tc.out" || { echo "FAIL: no wall time"; fail=1; }
for name in gcd-io gcd-worker gpucompd; do
    grep -Eq "^  $name +[0-9]+ threads +[0-9.]+ CPU s" "$tmp/tc.out" || { echo "FAIL: no $name line"; fail=1; }
done
# the compress ran on the CPU engine's pool, so some named thread used CPU time
busy=$(awk '/ threads / && $4 > 0 { n++ } END { print n + 0 }' "$tmp/tc.out")
[ "$busy" -ge 1 ] || { echo "FAIL: no thread group used CPU time"; fail=1; }
[ $fail = 0 ] && echo "ok: multi-gpu-bench.sh on stand-in devices and thread-cpu.sh"
exit $fail
