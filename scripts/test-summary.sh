#!/bin/bash
# Add up the Check totals that the suites wrote into their logs, plus any
# extra "name: N passed, N failed" lines given on stdin, and print
# "N passed, N failed" alone on the last line. Exit 1 if anything failed or
# nothing ran. Usage: scripts/test-summary.sh LOGFILE... < extra-results
set -uo pipefail
passed=0
failed=0
for log in "$@"; do
    # Check prints e.g. "100%: Checks: 23, Failures: 0, Errors: 0"
    while read -r checks failures errors; do
        passed=$((passed + checks - failures - errors))
        failed=$((failed + failures + errors))
    done < <(sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' "$log")
done
if [ ! -t 0 ]; then
    while read -r p f; do
        passed=$((passed + p))
        failed=$((failed + f))
    done < <(sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p')
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
