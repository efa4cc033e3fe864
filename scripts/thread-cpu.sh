#!/bin/bash
# thread-cpu.sh - where a process's CPU time goes while a command runs: its threads' user +
# system seconds, summed by thread name (gpucompd names them gcd-io, gcd-lane, gcd-worker,
# gcd-trim, gc-codec; the event loop keeps the program's name), against the command's wall time.
#
#   scripts/thread-cpu.sh PID COMMAND [ARGS...]
#
# A thread group near "wall" seconds per thread is saturated. Threads that start or end during
# the command count from their first or to their last sample (taken before and after only).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
[ $# -ge 2 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
pid=$1
shift
tick=$(getconf CLK_TCK)
# sample: one line per thread, "tid name ticks"; the name may hold spaces, so cut around "(...)"
sample() {
    local t stat
    for t in /proc/"$pid"/task/*; do
        stat=$(cat "$t/stat" 2>/dev/null) || continue
        name=${stat#*(}; name=${name%)*}
        set -- ${stat##*) }
        echo "${t##*/} ${name// /_} $(( ${12} + ${13} ))"
    done
}
before=$(sample)
t0=$(date +%s.%N)
"$@"
rc=$?
t1=$(date +%s.%N)
after=$(sample)
awk -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v tick="$tick" '
    NR == FNR { start[$1] = $3; next }
    { used = ($3 - ($1 in start ? start[$1] : 0)) / tick; sec[$2] += used; n[$2]++
      if (used > most[$2]) most[$2] = used }
    END { printf "wall %.2f s\n", wall
          for (k in sec) printf "  %-16s %3d threads  %7.2f CPU s  busiest %.2f s (%.0f%% of wall)\n", k, n[k], sec[k], most[k], 100 * most[k] / wall }
' <(echo "$before") <(echo "$after")
exit $rc
