#!/bin/bash
# gpu-bzip2-bench.sh - on a GPU host: the CUDA bzip2 encoder against the CPU
# bzip2 compressors, on the same corpora in the same run; one Markdown table last.
#
#   scripts/gpu-bzip2-bench.sh [BIN_DIR]     (from the repo root; default build-gpu/bin,
#                                             made by scripts/build-gpu.sh on any machine with nvcc)
#
# Corpora (deterministic on a given host, made in a temp dir):
#   text       the host's Python sources (*.py under /usr/lib/python3*, /usr/local/lib/python3*),
#              sorted by path, concatenated and repeated up to SIZE_MIB
#   mixed.tar  a tar (names sorted, owner and mtime zeroed) of usr/bin usr/include usr/lib
#              usr/share, truncated to SIZE_MIB
#   zeros, period2, period7, record1k (a random 1 KiB record repeated), fibonacci, random:
#              ADV_MIB each, from bench_gpu_bzip2 --gen
# Tools: bench_gpu_bzip2 (GPU device-resident, GPU batch API as one job and as 16 MiB jobs,
# the CPU engine with all threads; byte identity GPU = CPU engine), then, where installed,
# bzip2 -9 (one thread, on the first 64 MiB of each corpus only, to keep time),
# lbzip2 -9 -n$THREADS, pbzip2 -9 -p$THREADS, zstd -19 -T$THREADS (one run each, output
# piped to wc). A bundle made by ../shared/device/bundle.sh in .device/ is sourced first
# (the GPU host lacks lbzip2, pbzip2 and zstd); missing tools are skipped with a note.
# MB/s = 10^6 input bytes per second of wall time; ratio = input / output bytes.
#
# Environment: SIZE_MIB (default 512; e.g. 128 for a quick run), ADV_MIB (default SIZE_MIB/8,
# so 64), LEVEL (9), REPS (3, GPU runs: best of), THREADS (16), LOGDIR (default $OUT or
# /tmp/gpu-bzip2-bench: logs and the table), KEEP=1 keeps the corpora (path printed).
# Default run: about 3-5 minutes on an H100 host with 16 cores (most of it CPU tools).
# Exit status: non-zero if bench_gpu_bzip2 failed (a GPU stream not identical to the CPU engine's).
set -u
BIN=${1:-build-gpu/bin}
SIZE_MIB=${SIZE_MIB:-512}
ADV_MIB=${ADV_MIB:-$(( SIZE_MIB / 8 > 0 ? SIZE_MIB / 8 : 1 ))}
LEVEL=${LEVEL:-9}
REPS=${REPS:-3}
THREADS=${THREADS:-16}
LOGDIR=${LOGDIR:-${OUT:-/tmp/gpu-bzip2-bench}}
SLICE_MIB=64
mkdir -p "$LOGDIR"
if [ ! -x "$BIN/bench_gpu_bzip2" ]; then
    echo "no $BIN/bench_gpu_bzip2 (build it with scripts/build-gpu.sh)" >&2
    exit 2
fi
if [ -f .device/env.sh ]; then
    . .device/env.sh
    echo "sourced .device/env.sh"
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bzip2-corpora.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
    echo "corpora kept in $W"
else
    trap 'rm -rf "$W"' EXIT
fi
now() { date +%s.%N; }
t_start=$(now)
echo "== $(date -u '+%Y-%m-%d %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null); $(nproc) CPUs"
SIZE=$(( SIZE_MIB << 20 ))

# ---- corpora ----
echo "== corpora: text and mixed.tar ${SIZE_MIB} MiB, adversarial ${ADV_MIB} MiB each, in $W"
find /usr/lib/python3* /usr/local/lib/python3* -name '*.py' -type f 2>/dev/null | LC_ALL=C sort -u > "$W/py.list"
: > "$W/py.once"
while IFS= read -r f; do cat "$f" 2>/dev/null; done < "$W/py.list" >> "$W/py.once"
once=$(wc -c < "$W/py.once")
text_note="$(wc -l < "$W/py.list") Python files, $(( once >> 20 )) MiB"
if [ "$once" -eq 0 ]; then # no Python on this host: text files of /usr/share instead
    find /usr/share/doc /usr/share/common-licenses -type f -size -1M 2>/dev/null | LC_ALL=C sort \
        | while IFS= read -r f; do cat "$f" 2>/dev/null; done > "$W/py.once"
    once=$(wc -c < "$W/py.once")
    text_note="no Python sources: /usr/share/doc text, $(( once >> 20 )) MiB"
fi
if [ "$once" -gt 0 ]; then
    reps=$(( (SIZE + once - 1) / once ))
    [ "$reps" -gt 1 ] && text_note="$text_note, repeated x$reps"
    for _ in $(seq "$reps"); do cat "$W/py.once"; done | head -c "$SIZE" > "$W/text"
fi
rm -f "$W/py.once"
dirs=""
for d in usr/bin usr/include usr/lib usr/share; do [ -d "/$d" ] && dirs="$dirs $d"; done
# shellcheck disable=SC2086
(cd / && find $dirs -xdev \( -type f -o -type d -o -type l \) 2>/dev/null | LC_ALL=C sort \
    | tar --no-recursion --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -T - 2>/dev/null) \
    | head -c "$SIZE" > "$W/mixed.tar"
corpora="text mixed.tar"
for k in zeros period2 period7 record1k fibonacci random; do
    "$BIN/bench_gpu_bzip2" --gen "$k" "$ADV_MIB" "$W/$k" || { echo "--gen $k failed" >&2; exit 1; }
    corpora="$corpora $k"
done
for c in $corpora; do
    [ -s "$W/$c" ] || { echo "note: corpus $c is empty, skipped"; corpora=$(echo " $corpora " | sed "s/ $c / /"); }
done
echo "text: $text_note; mixed.tar: $(( $(wc -c < "$W/mixed.tar") >> 20 )) MiB of$dirs"
echo "corpora made in $(awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"

# ---- GPU and the CPU engine ----
files=""
for c in $corpora; do files="$files $W/$c"; done
echo "== $BIN/bench_gpu_bzip2 --level $LEVEL --reps $REPS"
t0=$(now)
# shellcheck disable=SC2086
"$BIN/bench_gpu_bzip2" --level "$LEVEL" --reps "$REPS" $files > "$LOGDIR/bench_gpu_bzip2.log" 2>&1
brc=$?
grep -E '^(device|==|gpu|cpu|MISMATCH|SKIP)' "$LOGDIR/bench_gpu_bzip2.log"
grep -v -E '^(device|==|gpu|cpu|MISMATCH|RESULT|SKIP|level|###|\||$)' "$LOGDIR/bench_gpu_bzip2.log" | head -20
echo "bench_gpu_bzip2: exit $brc, $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"

# ---- CPU competitors ----
rows="$LOGDIR/rows.txt"
: > "$rows"
# GPU and CPU-engine rows from the benchmark: corpus bytes tool MB/s out-bytes identical
awk -F'\t' '$1 == "RESULT" { print $2 "\t" $3 "\t" $4 "\t" $5 "\t" $6 "\t" ($7 == "-" ? "" : "identical to CPU engine: " $7) }' \
    "$LOGDIR/bench_gpu_bzip2.log" >> "$rows"
skipped=""
have() {
    if command -v "$1" > /dev/null 2>&1; then return 0; fi
    case " $skipped " in *" $1 "*) ;; *) skipped="$skipped $1" ;; esac
    return 1
}
# run_tool corpus input-file tool-label note command...: one run of `command... input-file`,
# its standard output counted by wc
run_tool() {
    local c=$1 in=$2 label=$3 note=$4
    shift 4
    local n t0 t1 out
    n=$(wc -c < "$in")
    t0=$(now)
    out=$("$@" "$in" | wc -c)
    t1=$(now)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$n" "$label" \
        "$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", n / (b - a) / 1e6 }')" "$out" "$note" >> "$rows"
    echo "$c: $label: $(tail -1 "$rows" | cut -f4) MB/s"
}
echo "== CPU tools (threads: $THREADS)"
t0=$(now)
for c in $corpora; do
    f=$W/$c
    if have bzip2; then
        head -c $(( SLICE_MIB << 20 )) "$f" > "$W/slice"
        sn=$(wc -c < "$W/slice")
        note="1 thread; first $(( sn >> 20 )) MiB only"
        [ "$sn" -eq "$(wc -c < "$f")" ] && note="1 thread"
        run_tool "$c" "$W/slice" "bzip2 -$LEVEL" "$note" bzip2 "-$LEVEL" -c
        rm -f "$W/slice"
    fi
    have lbzip2 && run_tool "$c" "$f" "lbzip2 -$LEVEL -n$THREADS" "" lbzip2 "-$LEVEL" -n "$THREADS" -c
    have pbzip2 && run_tool "$c" "$f" "pbzip2 -$LEVEL -p$THREADS" "" pbzip2 "-$LEVEL" "-p$THREADS" -c
    have zstd && run_tool "$c" "$f" "zstd -19 -T$THREADS" "not bzip2" zstd -q -19 "-T$THREADS" -c
done
echo "CPU tools: $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
[ -n "$skipped" ] && echo "note: not installed here, skipped:$skipped"

# ---- tables ----
echo
awk '/^### bzip2 GPU encoder stages/ { p = 1 } /^### bzip2 compression/ { p = 0 } p' "$LOGDIR/bench_gpu_bzip2.log"
{
    echo
    echo "### bzip2 -$LEVEL compression on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) + $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "MB/s = 10^6 input bytes per second (GPU: best of $REPS; CPU tools: one run); ratio = input / output."
    [ -n "$skipped" ] && echo "Not installed on this host, skipped:$skipped."
    echo
    echo "| corpus | MiB | tool | MB/s compress | ratio | note |"
    echo "|---|---|---|---|---|---|"
    for c in $corpora; do awk -F'\t' -v c="$c" '$1 == c' "$rows"; done | awk -F'\t' '{
        ratio = ($5 ~ /^[0-9]+$/ && $5 > 0) ? sprintf("%.3f", $2 / $5) : "-"
        printf "| %s | %.0f | %s | %s | %s | %s |\n", $1, $2 / 1048576, $3, $4, ratio, $6
    }'
} | tee "$LOGDIR/table.md"
echo
echo "total $(awk -v a="$t_start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s; logs in $LOGDIR"
exit $brc
