#!/bin/bash
# streams-ab.sh - many gpucomp file streams at once through one daemon, for A/B runs of two
# builds in one session (run it once per build, alternating): each of $PROCS gpucomp commands
# compresses its own slice of a text corpus, file to file, then decompresses it; every slice
# is compared with its round trip. Prints one line per workload: MB/s of uncompressed data
# over the wall time, and the daemon's CPU ticks (user + system) and minor page faults; with
# THR=1 also its threads' CPU per wall second, by thread name (gcd-io, gc-copy, gcd-lane...).
#
#   scripts/streams-ab.sh BIN_DIR LABEL       (BIN_DIR holds daemon/gpucompd and
#                                              programs/gpucomp/gpucomp, as build-gpud/ does)
#
# Environment: MIB (4096: corpus size), PROCS (16), CODECS ("rle bzip2"), REPS (2: rounds of
#   each codec), DARGS (more gpucompd options, e.g. "--io-threads 8"), GPU (auto; off for the
#   CPU engine), THR (unset), CORPUS (/tmp/streams-ab.text: made from the host's *.py files if
#   missing), OUTDIR (/dev/shm/streams-ab: outputs, on tmpfs so no disk writeback runs beside
#   the next workload), LOG (${OUT:-.}/streams-ab.txt: the lines are appended there too).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
[ $# -eq 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
BIN=$1 LABEL=$2
MIB=${MIB:-4096} PROCS=${PROCS:-16} REPS=${REPS:-2} CODECS=${CODECS:-rle bzip2}
CORPUS=${CORPUS:-/tmp/streams-ab.text} W=${OUTDIR:-/dev/shm/streams-ab} LOG=${LOG:-${OUT:-.}/streams-ab.txt}
G=$BIN/programs/gpucomp/gpucomp
BYTES=$(( MIB << 20 ))
mkdir -p "$W"
if [ "$(stat -c %s "$CORPUS" 2>/dev/null || echo 0)" -ne "$BYTES" ]; then
    find /usr -xdev -name '*.py' -type f -print0 2>/dev/null | sort -z | xargs -0 -r cat > "$W/once"
    reps=$(( BYTES / $(stat -c %s "$W/once") + 1 ))
    for _ in $(seq "$reps"); do cat "$W/once"; done | head -c "$BYTES" > "$CORPUS"
    rm -f "$W/once" "$CORPUS".slice.*
fi
[ -f "$CORPUS.slice.00" ] || split -n "$PROCS" -d -a 2 "$CORPUS" "$CORPUS.slice."
SOCK=$W/sock
rm -f "$SOCK"
# shellcheck disable=SC2086
"$BIN/daemon/gpucompd" --socket "$SOCK" --log-level=warning --gpu="${GPU:-auto}" --max-request 16G \
    --max-output 16G ${DARGS:-} 2>> "$W/gpucompd-$LABEL.log" &
DP=$!
trap 'kill $DP 2>/dev/null; wait $DP 2>/dev/null' EXIT
for _ in $(seq 400); do [ -S "$SOCK" ] && "$G" --socket "$SOCK" --ping > /dev/null 2>&1 && break; sleep 0.05; done
say() { echo "$*" | tee -a "$LOG"; }
cpu() { awk '{ print $14 + $15, $10 }' "/proc/$DP/stat"; }
# the daemon's threads' ticks, summed by thread name
threads() {
    local t st n
    for t in /proc/"$DP"/task/*; do
        st=$(cat "$t/stat" 2>/dev/null) || continue
        n=${st#*(}; n=${n%%)*}
        set -- ${st##*) }
        echo "${n// /_} $(( ${12} + ${13} ))"
    done | awk '{ a[$1] += $2 } END { for (k in a) print k, a[k] }' | sort
}
# run CODEC c|d: every slice at once
run() {
    local a=$1 d=$2 s b t0 t1 c0 c1 th0 fail=0
    local -a pids=() opt=(-a "$a")
    [ "$a" = bzip2 ] && opt+=(-9)
    th0=$(threads); c0=$(cpu); t0=$(date +%s.%N)
    for s in "$CORPUS".slice.*; do
        b=$W/$(basename "$s")
        if [ "$d" = c ]; then "$G" --socket "$SOCK" --no-fallback "${opt[@]}" -c "$s" > "$b.$a" &
        else "$G" --socket "$SOCK" --no-fallback -dc "$b.$a" > "$b.back" & fi
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail=1; done
    t1=$(date +%s.%N); c1=$(cpu)
    if [ "$THR" = 1 ]; then
        join <(echo "$th0") <(threads) | awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
            '{ d = $3 - $2; if (d > 5) printf "  %s %.2f CPUs\n", $1, d / 100 / w }' | tee -a "$LOG"
    fi
    say "$LABEL $PROCS x $a $d: $(awk -v n="$BYTES" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }') MB/s;" \
        "daemon $(echo "$c0 $c1" | awk '{ printf "%d ticks, %d faults", $3 - $1, $4 - $2 }')$([ $fail = 0 ] || echo '; a gpucomp FAILED')"
    if [ "$d" = d ]; then
        for s in "$CORPUS".slice.*; do
            cmp -s "$s" "$W/$(basename "$s").back" || { say "$LABEL $a: $(basename "$s") DIFFERS"; fail=1; }
        done
        rm -f "$W"/*.back
    fi
    return $fail
}
THR=${THR:-0}
status=0
for a in $CODECS; do
    for _ in $(seq "$REPS"); do run "$a" c || status=1; run "$a" d || status=1; done
done
rm -f "$W"/*.slice.*
exit $status
