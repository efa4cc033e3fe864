#!/bin/sh
# gpu-profile.sh - on a GPU host: Nsight Compute on one data class of the
# kernel benchmark, one line per kernel (time, instructions, issue, shared
# memory wavefronts), summed over the launches of each kernel.
#
#   scripts/gpu-profile.sh [BIN_DIR] [WIDTH] [CLASS] [MiB]
#       defaults: build-gpu/bin 1 1 1024 (class 0 random, 1 short runs, 2 long runs)
# ncu locks the clocks to base and serialises kernels: compare the times
# with each other, not with the benchmark's.
set -eu
BIN=${1:-build-gpu/bin}
W=${2:-1}
C=${3:-1}
MIB=${4:-1024}
LOG=${OUT:-/tmp}/ncu-w$W-c$C.csv
ncu --csv --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$BIN/bench_gpu_rle" --no-pipeline --reps 1 --width "$W" --class "$C" --size "$MIB" >"$LOG" 2>/dev/null
python3 - "$LOG" <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; data = rows[1:]
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
idi = head.index("ID")
per = collections.defaultdict(lambda: collections.defaultdict(list))
launches = collections.defaultdict(set)
for r in data:
    name = re.sub(r"^(void )?", "", r[ki]).replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = name.split("(")[0].split("<")[0].split("::")[-1]
    m = re.search(r"<(\d)>|ILi(\d)E", r[ki])
    name += "<%s>" % (m.group(1) or m.group(2)) if m else ""
    per[name][r[mi]].append(float(r[vi].replace(",", "")))
    launches[name].add(r[idi])
print("| kernel | launches | time us (sum) | warp instr M (sum) | issue active % | warps active % | smem wavefronts M | DRAM % |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name, m in sorted(per.items(), key=lambda kv: -sum(kv[1]["gpu__time_duration.sum"])):
    t = sum(m["gpu__time_duration.sum"]) / 1e3
    avg = lambda k: sum(m[k]) / max(1, len(m[k]))
    print("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.1f | %.0f |" % (name, len(launches[name]), t,
          sum(m["smsp__inst_executed.sum"]) / 1e6, avg("smsp__issue_active.avg.pct_of_peak_sustained_active"),
          avg("sm__warps_active.avg.pct_of_peak_sustained_active"),
          sum(m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]) / 1e6,
          avg("dram__throughput.avg.pct_of_peak_sustained_elapsed")))
PY
