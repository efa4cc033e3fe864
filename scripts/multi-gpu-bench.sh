#!/bin/bash
# multi-gpu-bench.sh - on a GPU host: does gpucompd use every GPU? The same workloads
# through the daemon on the first 1, 2, ... GPUs (CUDA_VISIBLE_DEVICES), in one run; then a
# fault-injection run on all of them; one Markdown table last.
#
#   scripts/multi-gpu-bench.sh          (from the repo root; binaries from $BIN_DIR, default
#                                        build-gpud, made by scripts/build-gpud.sh)
#
# Per GPU count G (GPU_COUNTS, default "1 ALL": one GPU, then every GPU nvidia-smi lists), a
# fresh daemon with CUDA_VISIBLE_DEVICES=0..G-1 runs, each with bench_daemon (every output is
# checked there against its input):
#   rle c      manyfd     $CLIENTS clients x $MIB MiB in memfds (runs of mean 8), $ROUNDS rounds
#   rle d      manyfd-dec the same frames decompressed
#   bzip2 c    bzip2-many each client its own $MIB MiB slice of the text corpus, level 9
#   bzip2 d    bzip2-dec-many the same slices as CPU-engine -9 streams (3-4 MB each: under the
#              default decompress break-even; the default routing sends them to the GPUs by load
#              when the CPU pool is queued; BZ2_DEC_MIN=SIZE passes --gpu-min-bytes-bzip2-decompress)
#   16 gpucomp $PROCS gpucomp commands at once, each on its own 1/$PROCS of the corpus, file to
#              file, both codecs and directions (outputs compared, outside the time)
#   1 client   rle: large $BIG_MIB (one memfd request each way, cold and warm); bzip2: whole
#              (the $BIG_MIB MiB text corpus as one request, compress, then its output
#              decompressed, cmp'd with the corpus)
#   1 stream   the gpucomp command on the text corpus (bzip2 -9 and rle), -c to a file, then -dc
#              of that to a file (timed) and cmp against the corpus (not timed): one client whose
#              stream's 32 MiB parts are routed one by one, so it can use every GPU
# Then the CPU engine alone (--gpu=off) runs the bzip2 d many-client load: the figure the GPUs'
# decompression under load is compared with.
# After each workload the daemon's STATS give the requests and bytes each device served (the
# spread over devices), how busy each GPU was (its lanes' batch time and kernel time per second
# of the workload: "STATS shows the GPUs busy") and the summed H2D / kernel / D2H times (what
# limits the one-client case).
# Then, on all GPUs: --fail-device 0:2 (the first GPU's lanes fail their second batch, as a
# device failure; with one GPU, --fail-device 0.1:2, its second lane only): the rle 64-client
# run again, which must lose no request, with exactly those lanes retired and the others still
# serving (STATS checked). The host's topology (nvidia-smi topo -m, NUMA
# nodes) is printed first.
# MB/s = 10^6 uncompressed bytes per second of wall time, aggregate over clients.
#
# Environment: BIN_DIR (build-gpud), GPU_COUNTS ("1 ALL"), CLIENTS (64), MIB (16), ROUNDS (4),
#   BZ2_ROUNDS (2), BIG_MIB (4096), BZ2_DEC_MIN (unset), PROCS (16), PROC_TIMEOUT (300: seconds
#   before one of the PROCS gpucomp counts as hung and fails the row), DAEMON_ARGS ("--max-request 16G
#   --max-output 16G --memory-budget 48G"), CORPUS_DIR (keep / reuse the text corpus there),
#   LOGDIR (default $OUT or /tmp/multi-gpu-bench), SKIP_BIG=1 (no one-client runs),
#   SKIP_FAULT=1 (no fault-injection run), SKIP_PROCS=1 (no PROCS-gpucomp rows), SKIP_CPU=1 (no
#   --gpu=off row), EMULATE=N (no GPU needed: N stand-in devices of
#   --gpu=emulate instead of GPUs, to try the script on a CPU machine with small sizes).
# Exit status: non-zero if a run failed, a round trip differed, or the fault run lost a request
# or did not retire exactly GPU 0.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
export LC_ALL=C
BIN_DIR=${BIN_DIR:-build-gpud}
CLIENTS=${CLIENTS:-64}
MIB=${MIB:-16}
ROUNDS=${ROUNDS:-4}
BZ2_ROUNDS=${BZ2_ROUNDS:-2}
BIG_MIB=${BIG_MIB:-4096}
BZ2_DEC_MIN=${BZ2_DEC_MIN:-}
PROCS=${PROCS:-16}
PROC_TIMEOUT=${PROC_TIMEOUT:-300}
DAEMON_ARGS=${DAEMON_ARGS:---max-request 16G --max-output 16G --memory-budget 48G}
LOGDIR=${LOGDIR:-${OUT:-/tmp/multi-gpu-bench}}
GPUCOMPD=$BIN_DIR/daemon/gpucompd
GPUCOMP=$BIN_DIR/programs/gpucomp/gpucomp
BENCH=$BIN_DIR/tests/bench/bench_daemon
for b in "$GPUCOMPD" "$GPUCOMP" "$BENCH"; do
    [ -x "$b" ] || { echo "no $b (scripts/build-gpud.sh, or set BIN_DIR)" >&2; exit 2; }
done
command -v python3 > /dev/null || { echo "needs python3 (STATS JSON)" >&2; exit 2; }
mkdir -p "$LOGDIR"
if [ -f .device/env.sh ]; then
    # shellcheck disable=SC1091
    . .device/env.sh
fi
if [ -n "${EMULATE:-}" ]; then
    NGPU=$EMULATE DEV=emulated GPU_NAME="stand-in devices (--gpu=emulate)"
else
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    DEV=gpu GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
fi
[ "$NGPU" -ge 1 ] || { echo "no GPU (nvidia-smi -L lists none)" >&2; exit 2; }
COUNTS=""
for g in ${GPU_COUNTS:-1 ALL}; do
    [ "$g" = ALL ] && g=$NGPU
    [ "$g" -le "$NGPU" ] && case " $COUNTS " in *" $g "*) ;; *) COUNTS="$COUNTS $g" ;; esac
done
W=$(mktemp -d "${TMPDIR:-/tmp}/multi-gpu.XXXXXX")
DPID=""
stop_daemon() {
    [ -n "$DPID" ] || return 0
    kill "$DPID" 2>/dev/null
    wait "$DPID" 2>/dev/null
    DPID=""
}
trap 'stop_daemon; rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
fail=0
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); $NGPU x $GPU_NAME;" \
     "$(nproc) CPUs; GPU counts:$COUNTS; $CLIENTS clients x $MIB MiB; one client $BIG_MIB MiB"
nvidia-smi topo -m 2>/dev/null | sed -n '1,12p'
lscpu 2>/dev/null | grep -E '^NUMA node' | head -4

# ---- the text corpus: the host's *.py files, concatenated, repeated to BIG_MIB ----
CDIR=${CORPUS_DIR:-$W}
mkdir -p "$CDIR"
TEXT=$CDIR/text-$BIG_MIB
BIG=$(( BIG_MIB << 20 ))
if [ "$(stat -c %s "$TEXT" 2>/dev/null || echo 0)" -ne "$BIG" ]; then
    find /usr -xdev -name '*.py' -type f -print0 2>/dev/null | sort -z | xargs -0 -r cat > "$W/once" 2>/dev/null
    [ -s "$W/once" ] || { echo "no *.py files under /usr" >&2; exit 2; }
    reps=$(( BIG / $(stat -c %s "$W/once") + 1 ))
    for _ in $(seq "$reps"); do cat "$W/once"; done | head -c "$BIG" > "$TEXT"
    rm -f "$W/once"
fi
sync # the corpus's writeback would otherwise run beside the first measurements
echo "text corpus: $TEXT ($BIG_MIB MiB)"

# start_daemon G [ARGS...]: gpucompd on GPUs 0..G-1; sets SOCK and DPID
start_daemon() {
    local g=$1 vis devices
    shift
    vis=$(seq -s, 0 $(( g - 1 )))
    devices="--gpu=auto"
    [ "$DEV" = emulated ] && devices="--gpu=emulate --emulated-devices=$g"
    [ "$g" = 0 ] && devices="--gpu=off" vis=""
    [ -n "$BZ2_DEC_MIN" ] && devices="$devices --gpu-min-bytes-bzip2-decompress $BZ2_DEC_MIN"
    SOCK=$W/sock-$g
    rm -f "$SOCK"
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$vis "$GPUCOMPD" --socket "$SOCK" --log-level=warning $devices \
        $DAEMON_ARGS "$@" 2>> "$LOGDIR/gpucompd-$g.log" &
    DPID=$!
    for _ in $(seq 1200); do
        [ -S "$SOCK" ] && "$GPUCOMP" --socket "$SOCK" --ping > /dev/null 2>&1 && return 0
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "gpucompd on $g GPU(s) did not start:" >&2
    tail -5 "$LOGDIR/gpucompd-$g.log" >&2
    exit 1
}
stats() { "$GPUCOMP" --socket "$SOCK" --stats --json; }
# spread BEFORE AFTER: per GPU (its lanes summed), requests and MiB served between two STATS
# snapshots, and how busy it was meanwhile: "busy" is its lanes' batch wall time per second
# (0 to the lanes per GPU: batches in flight on average), "kernels" the same for kernel time
spread() {
    python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
secs = max(b["uptime_ms"] - a["uptime_ms"], 1) / 1e3
keys = ("requests", "bytes_in", "wall_ns", "kernel_ns")
per = {}
for sign, snap in ((1, b), (-1, a)):
    for d in snap["lanes"]:
        gpu = d["name"].split()[0].split(".")[0]          # "gpu1.0 (NVIDIA ...)" -> "gpu1"
        acc = per.setdefault(gpu, dict.fromkeys(keys, 0))
        for k in keys:
            acc[k] += sign * d[k]
cpu = b["cpu_requests"] - a["cpu_requests"]
print(", ".join(f"{g} {v['requests']} req {v['bytes_in'] / 2**20:.0f} MiB busy {v['wall_ns'] / 1e9 / secs:.2f}"
                f" kernels {v['kernel_ns'] / 1e9 / secs:.2f}" for g, v in sorted(per.items())) + f"; cpu {cpu} req")
PY
}
# row G LABEL MB/s NOTE: one cell of the table
row() { printf '%s\t%s\t%s\t%s\n' "$2" "$1" "$3" "$4" >> "$W/rows"; echo "$1 GPU(s): $2: $3 MB/s; $4"; }
# number LOG RE: in LOG's result row, the first "X GB/s" or "X MB/s" of RE's first match, in MB/s
number() {
    grep -m1 '^| [a-z0-9-]*:' "$1" | grep -oE "$2" | head -1 | grep -oE '[0-9]+(\.[0-9]+)? [GM]B/s' | head -1 |
        awk '{ printf "%.0f", $2 == "GB/s" ? $1 * 1000 : $1 }'
}
# run_bench G NAME ARGS...: bench_daemon ARGS on $SOCK into $LOGDIR/G-NAME.log, STATS around it
# (SPREAD: the work per device); false on failure
run_bench() {
    local g=$1 name=$2
    shift 2
    LOG=$LOGDIR/$g-$name.log
    stats > "$W/before.json"
    if ! "$BENCH" "$SOCK" "$@" > "$LOG" 2>&1; then
        echo "bench_daemon $* FAILED on $g GPU(s):" >&2
        tail -5 "$LOG" >&2
        fail=1
        return 1
    fi
    stats > "$W/after.json"
    SPREAD=$(spread "$W/before.json" "$W/after.json")
    grep -E '^\| .*device:' "$LOG" | sed 's/^/    /' | head -4
}
# many G LABEL NAME ARGS...: a many-client bench_daemon run, its aggregate as one row
many() {
    local g=$1 label=$2 name=$3
    shift 3
    if run_bench "$g" "$name" "$@"; then
        row "$g" "$label" "$(number "$LOG" 'aggregate [0-9.]+ [GM]B/s')" "$SPREAD"
    else
        row "$g" "$label" FAILED ""
    fi
}
# stream G LABEL BYTES OUT ARGS...: the gpucomp command (one client, a stream) into OUT, timed;
# MB/s of BYTES (the uncompressed size)
stream() {
    local g=$1 label=$2 bytes=$3 out=$4 t0 t1
    shift 4
    stats > "$W/before.json"
    t0=$(date +%s.%N)
    if ! "$GPUCOMP" --socket "$SOCK" --no-fallback "$@" > "$out" 2>> "$LOGDIR/$g-gpucomp.err"; then
        echo "gpucomp $* FAILED on $g GPU(s): $(tail -n 1 "$LOGDIR/$g-gpucomp.err")" >&2
        fail=1
        row "$g" "$label" FAILED ""
        return 1
    fi
    t1=$(date +%s.%N)
    stats > "$W/after.json"
    row "$g" "$label" "$(awk -v n="$bytes" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }')" \
        "$(spread "$W/before.json" "$W/after.json")"
}
# whole G LABEL c|d IN OUT: one request of all of IN, MB/s of uncompressed bytes
whole() {
    local g=$1 label=$2 op=$3 in=$4 out=$5 line bytes
    stats > "$W/before.json"
    if ! line=$("$BENCH" "$SOCK" whole "$in" "$out" "$op" bzip2 9 2> "$LOGDIR/$g-whole-$op.err"); then
        echo "whole $op FAILED on $g GPU(s): $(tail -2 "$LOGDIR/$g-whole-$op.err")" >&2
        fail=1
        printf '%s\t%s\t%s\t%s\n' "$label" "$g" "FAILED" "" >> "$W/rows"
        return
    fi
    stats > "$W/after.json"
    # WHOLE <op> <in> <out> <seconds> <backend>; uncompressed = in (compress) or out (decompress)
    bytes=$(echo "$line" | awk -v op="$op" '{ print op == "c" ? $3 : $4 }')
    mbs=$(echo "$line" | awk -v n="$bytes" '{ printf "%.0f", n / $5 / 1e6 }')
    printf '%s\t%s\t%s\t%s\n' "$label" "$g" "$mbs" "$(echo "$line" | awk '{ print $6 }'); $(spread "$W/before.json" "$W/after.json")" >> "$W/rows"
    echo "$g GPU(s): $label: $mbs MB/s ($line)"
}

# procs G CODEC: PROCS gpucomp commands at once on the slices, compress then decompress, file to file
procs() {
    local g=$1 codec=$2 t0 t1 i dir bad pid
    local -a opt=(-a "$codec") pids
    [ "$codec" = bzip2 ] && opt+=(-9)
    for dir in c d; do
        stats > "$W/before.json"
        pids=()
        t0=$(date +%s.%N)
        for i in $(seq "$PROCS"); do
            if [ "$dir" = c ]; then
                timeout "$PROC_TIMEOUT" "$GPUCOMP" --socket "$SOCK" --no-fallback "${opt[@]}" -c "$W/slice.$i" \
                    > "$W/slice.$i.z" 2>> "$LOGDIR/$g-procs.err" &
            else
                timeout "$PROC_TIMEOUT" "$GPUCOMP" --socket "$SOCK" --no-fallback -dc "$W/slice.$i.z" \
                    > "$W/slice.$i.back" 2>> "$LOGDIR/$g-procs.err" &
            fi
            pids+=($!)
        done
        # each by its pid: `wait -n` also counts the daemon, a child too, and may miss a
        # gpucomp that ended before it was called (the run then waits for the daemon)
        bad=0
        for pid in "${pids[@]}"; do wait "$pid" || bad=1; done
        t1=$(date +%s.%N)
        stats > "$W/after.json"
        if [ "$bad" != 0 ]; then
            echo "a gpucomp of $PROCS FAILED on $g GPU(s): $(tail -n 1 "$LOGDIR/$g-procs.err")" >&2
            "$GPUCOMP" --socket "$SOCK" --stats > "$LOGDIR/$g-$codec-$dir-failed.stats" 2>&1
            fail=1
        fi
        row "$g" "$codec $dir, $PROCS gpucomp at once" \
            "$(awk -v n="$BIG" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }')" \
            "$(spread "$W/before.json" "$W/after.json")"
    done
    for i in $(seq "$PROCS"); do
        cmp -s "$W/slice.$i" "$W/slice.$i.back" || { echo "$codec gpucomp slice $i DIFFERS on $g GPU(s)" >&2; fail=1; }
        rm -f "$W/slice.$i.z" "$W/slice.$i.back"
    done
}
# the corpus cut into PROCS slice files, for procs
split -n "$PROCS" -d -a 3 "$TEXT" "$W/part."
i=0
for f in "$W"/part.*; do i=$((i + 1)); mv "$f" "$W/slice.$i"; done

# the host's own reference: what writing the outputs costs without gpucompd (one file of the
# corpus, then PROCS slices at once, each a fresh file from page cache, as the gpucomp rows write)
copy_rate() { # BYTES CMD...: MB/s of BYTES for CMD
    local bytes=$1 t0 t1
    shift
    t0=$(date +%s.%N)
    "$@"
    t1=$(date +%s.%N)
    awk -v n="$bytes" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) / 1e6 }'
}
copy_all() {
    local i pids=()
    for i in $(seq "$PROCS"); do cat "$W/slice.$i" > "$W/copy.$i" & pids+=($!); done
    wait "${pids[@]}"
}
REF_ONE=$(copy_rate "$BIG" sh -c 'cat "$1" > "$2"' sh "$TEXT" "$W/copy")
rm -f "$W/copy"
REF_PROCS=$(copy_rate "$BIG" copy_all)
rm -f "$W"/copy.*
REFERENCE="host reference, no gpucompd: \`cat FILE > OUT\` $REF_ONE MB/s; $PROCS such copies at once $REF_PROCS MB/s"
echo "$REFERENCE"

: > "$W/rows"
for g in $COUNTS; do
    echo "== $g GPU(s): CUDA_VISIBLE_DEVICES=$(seq -s, 0 $(( g - 1 )))"
    start_daemon "$g"
    stats | python3 -c 'import json,sys; print("  lanes:", ", ".join(d["name"] for d in json.load(sys.stdin)["lanes"]))'
    many "$g" "rle c, $CLIENTS clients" rle-c manyfd "$CLIENTS" "$MIB" "$ROUNDS"
    many "$g" "rle d, $CLIENTS clients" rle-d manyfd-dec "$CLIENTS" "$MIB" "$ROUNDS"
    many "$g" "bzip2 c, $CLIENTS clients" bzip2-c bzip2-many "$TEXT" "$CLIENTS" "$MIB" 9 "$BZ2_ROUNDS"
    many "$g" "bzip2 d, $CLIENTS clients" bzip2-d bzip2-dec-many "$TEXT" "$CLIENTS" "$MIB" "$BZ2_ROUNDS"
    if [ "${SKIP_BIG:-0}" != 1 ]; then
        # one client, rle: the warm figures (output memfd reused) of each direction
        if run_bench "$g" rle-large large "$BIG_MIB"; then
            grep -m1 '^| large:' "$LOG" | sed 's/^/    /'
            row "$g" "rle c, 1 client" "$(number "$LOG" 'cold, [0-9.]+ GB/s warm; decompress')" "$SPREAD"
            row "$g" "rle d, 1 client" "$(number "$LOG" 'cold, [0-9.]+ GB/s warm; ratio')" "(both directions)"
        else
            row "$g" "rle c, 1 client" FAILED ""
        fi
        whole "$g" "bzip2 c, 1 client" c "$TEXT" "$W/big.bz2"
        whole "$g" "bzip2 d, 1 client" d "$W/big.bz2" "$W/big.back"
        if [ -f "$W/big.back" ] && ! cmp -s "$W/big.back" "$TEXT"; then
            echo "bzip2 one-client round trip DIFFERS on $g GPU(s)" >&2
            fail=1
        fi
        rm -f "$W/big.bz2" "$W/big.back"
        sync
        for codec in bzip2 rle; do
            opt=(-a "$codec")
            [ "$codec" = bzip2 ] && opt+=(-9)
            if stream "$g" "$codec c, 1 client, stream (gpucomp -c FILE)" "$BIG" "$W/stream.z" "${opt[@]}" -c "$TEXT"; then
                sync
                stream "$g" "$codec d, 1 client, stream (gpucomp -dc FILE)" "$BIG" "$W/stream.back" -dc "$W/stream.z"
                if ! cmp -s "$W/stream.back" "$TEXT"; then
                    echo "$codec gpucomp -c | gpucomp -dc DIFFERS from the corpus on $g GPU(s)" >&2
                    fail=1
                fi
            fi
            rm -f "$W/stream.z" "$W/stream.back"
            sync
        done
    fi
    if [ "${SKIP_PROCS:-0}" != 1 ]; then
        procs "$g" bzip2
        procs "$g" rle
    fi
    stats > "$LOGDIR/stats-$g.json"
    stop_daemon
done

if [ "${SKIP_CPU:-0}" != 1 ]; then
    echo "== the CPU engine alone (--gpu=off): bzip2 d, $CLIENTS clients"
    start_daemon 0
    many cpu "bzip2 d, $CLIENTS clients" bzip2-d-cpu bzip2-dec-many "$TEXT" "$CLIENTS" "$MIB" "$BZ2_ROUNDS"
    stop_daemon
fi

fault=""
if [ "${SKIP_FAULT:-0}" != 1 ]; then
    # the failing lanes: all of GPU 0's, or with one GPU its second lane (${DEV}0.1)
    failing=0:2 victim=${DEV}0 what="GPU 0 fails"
    [ "$NGPU" -eq 1 ] && failing=0.1:2 victim=${DEV}0.1 what="GPU 0's lane 1 fails"
    echo "== fault injection: $NGPU GPU(s), --fail-device $failing"
    start_daemon "$NGPU" --fail-device "$failing"
    many "$NGPU" "rle c, $CLIENTS clients, $what" rle-c-fault manyfd "$CLIENTS" "$MIB" "$ROUNDS"
    stats > "$LOGDIR/stats-fault.json"
    fault=$(python3 - "$LOGDIR/stats-fault.json" "$victim" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); victim = sys.argv[2]
# "gpu0.1 (NVIDIA ...)" is lane gpu0.1 of device gpu0: a victim names either
hit = lambda d: d["name"].split()[0] == victim or d["name"].split()[0].split(".")[0] == victim
bad = [d for d in s["lanes"] if hit(d)]
rest = [d for d in s["lanes"] if not hit(d)]
ok = s["requests_failed"] == 0 and bad and all(d["retired"] for d in bad) and not any(d["retired"] for d in rest)
ok = ok and rest and sum(d["requests"] for d in rest) > 0
print(("ok" if ok else "FAILED") + f": requests failed {s['requests_failed']}, ok {s['requests_ok']}; "
      f"{victim}: lanes retired {sum(d['retired'] for d in bad)} of {len(bad)}, fell back {sum(d['fallbacks'] for d in bad)}; "
      f"other lanes retired {sum(d['retired'] for d in rest)} of {len(rest)}, served {sum(d['requests'] for d in rest)}; "
      f"backend {s['backend']}")
PY
)
    echo "fault injection: $fault"
    case $fault in ok*) ;; *) fail=1 ;; esac
    stop_daemon
fi

# ---- the table: one row per workload, one column per GPU count, the speed-up over 1 GPU ----
python3 - "$W/rows" "$COUNTS" > "$LOGDIR/table.md" <<'PY'
import sys
rows, counts = sys.argv[1], sys.argv[2].split()
data, order = {}, []
for line in open(rows):
    label, g, mbs, spread = (line.rstrip("\n").split("\t") + [""])[:4]
    if label not in data:
        data[label] = {}; order.append(label)
    data[label][g] = (mbs, spread)
cpu = any("cpu" in v for v in data.values())
head = "| workload | " + " | ".join(f"{g} GPU MB/s" for g in counts)
head += f" | {counts[-1]} / {counts[0]}" if len(counts) > 1 else ""
head += " | CPU engine alone MB/s" if cpu else ""
head += f" | work per device ({counts[-1]} GPUs) |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
for label in order:
    got = data[label]
    cells = [got.get(g, ("", ""))[0] for g in counts]
    ratio = ""
    try:
        ratio = f"{float(cells[-1]) / float(cells[0]):.2f}x" if len(counts) > 1 else ""
    except (ValueError, ZeroDivisionError):
        pass
    spread = got.get(counts[-1], ("", ""))[1] or next((v[1] for v in got.values()), "")
    cpu_cell = f" | {got.get('cpu', ('', ''))[0]}" if cpu else ""
    print(f"| {label} | " + " | ".join(cells) + (f" | {ratio}" if len(counts) > 1 else "") + cpu_cell + f" | {spread} |")
PY
echo "$REFERENCE" >> "$LOGDIR/table.md"
echo
cat "$LOGDIR/table.md"
[ -n "$fault" ] && echo "fault injection ($NGPU GPUs, --fail-device $failing): $fault"
exit $fail
