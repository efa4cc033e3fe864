#!/bin/sh
# gpu-source-profile.sh - on a GPU host: where one kernel's warps stall, by
# SASS instruction (Nsight Compute source counters), on one data class of the
# kernel benchmark: the stall reasons over the whole kernel, then the
# instructions with the most stall samples and each one's two main reasons.
#
#   scripts/gpu-source-profile.sh KERNEL [BIN_DIR] [WIDTH] [CLASS] [MiB] [TOP]
#       KERNEL: a regex for the kernel name (dec_expand, enc_emit, enc_analyze, ...)
#       defaults: build-gpu/bin 1 1 256 30 (class 0 random, 1 short runs, 2 long runs)
# The full per-instruction table is kept as $OUT (or /tmp)/src-KERNEL-wW-cC.csv.
set -eu
K=${1:?usage: gpu-source-profile.sh KERNEL [BIN_DIR] [WIDTH] [CLASS] [MiB] [TOP]}
BIN=${2:-build-gpu/bin}
W=${3:-1}
C=${4:-1}
MIB=${5:-256}
TOP=${6:-30}
LOG=${OUT:-/tmp}/src-$K-w$W-c$C.csv
ncu -k "regex:$K" -c 1 --section SourceCounters --section WarpStateStats --page source --csv \
    --print-source sass "$BIN/bench_gpu_rle" --no-pipeline --reps 1 --width "$W" --class "$C" \
    --size "$MIB" >"$LOG" 2>/dev/null
python3 - "$LOG" "$TOP" <<'PY'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"Address","Source"')]
if not start:
    sys.exit("no source counters in %s (did the kernel name match?)" % sys.argv[1])
rows = list(csv.reader(lines[start[0]:]))
head, data = rows[0], rows[1:]
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
reasons = [c for c in head if c.startswith("stall_") and "Not Issued" not in c]
col = {c: head.index(c) for c in head}
total = {c: sum(num(r[col[c]]) for r in data) for c in reasons}
samples = sum(total.values()) or 1.0
executed = sum(num(r[col["Instructions Executed"]]) for r in data)
print("warp instructions executed: %.0f M" % (executed / 1e6))
print("stalls: " + ", ".join("%s %.0f%%" % (c[6:], 100 * v / samples)
                             for c, v in sorted(total.items(), key=lambda kv: -kv[1]) if v / samples >= 0.01))
print("| address | stall samples | executed | instruction | main reasons |")
print("| --- | --- | --- | --- | --- |")
allc = col["Warp Stall Sampling (All Samples)"]
for r in sorted(data, key=lambda r: -num(r[allc]))[:int(sys.argv[2])]:
    s = num(r[allc])
    top = sorted(((num(r[col[c]]), c[6:]) for c in reasons), reverse=True)[:2]
    print("| %s | %.1f%% | %.2f%% | `%s` | %s |" % (r[col["Address"]][-5:], 100 * s / samples,
          100 * num(r[col["Instructions Executed"]]) / max(executed, 1), r[col["Source"]].strip()[:60],
          ", ".join("%s %.0f%%" % (n, 100 * v / max(s, 1)) for v, n in top)))
PY
