#!/bin/sh
# Checks the systemd units: `systemd-analyze verify` passes on the
# built units, and `systemd-analyze security --offline` rates gpucompd.service
# at most $MAX_EXPOSURE ("OK"; docs/SECURITY.md lists what remains exposed).
# Skips (77) where systemd-analyze is missing.
MAX_EXPOSURE=${MAX_EXPOSURE:-2.5}
srcdir=${srcdir:-.}
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze not found; the units were not checked"
    exit 77
fi
unit=systemd/gpucompd.service
[ -f "$unit" ] || { echo "FAIL: $unit not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# verify insists that ExecStart= exists: point it at the built daemon.
daemon=${GPUCOMPD:-$(pwd)/daemon/gpucompd}
sed -e "s|^ExecStart=[^ ]*|ExecStart=$daemon|" "$unit" > "$tmp/gpucompd.service"
cp "$srcdir/systemd/gpucompd.socket" "$tmp/gpucompd.socket"
fail=0
if ! out=$(systemd-analyze verify --man=no "$tmp/gpucompd.socket" "$tmp/gpucompd.service" 2>&1); then
    echo "FAIL: systemd-analyze verify:"; echo "$out"; fail=1
elif [ -n "$out" ]; then
    echo "FAIL: systemd-analyze verify warned:"; echo "$out"; fail=1
else
    echo "ok: systemd-analyze verify"
fi
report=$(systemd-analyze security --offline=true --no-pager "$tmp/gpucompd.service" 2>&1)
level=$(printf '%s\n' "$report" | sed -n 's/.*Overall exposure level for gpucompd.service: \([0-9.]*\).*/\1/p')
if [ -z "$level" ]; then
    echo "FAIL: no exposure level in:"; echo "$report"; fail=1
elif awk -v l="$level" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(l > m) }'; then
    printf '%s\n' "$report" | grep -v '✓'
    echo "FAIL: exposure $level > $MAX_EXPOSURE"; fail=1
else
    echo "ok: exposure $level <= $MAX_EXPOSURE"
    printf '%s\n' "$report" | grep '✗' || true
fi
# The socket outlives the service: the service must not own /run/gpucompd.
if grep -q '^RuntimeDirectory=' "$unit" && ! grep -q '^RuntimeDirectoryPreserve=yes' "$unit"; then
    echo "FAIL: RuntimeDirectory= without RuntimeDirectoryPreserve=yes deletes the socket on stop"; fail=1
fi
for key in Type=notify WatchdogSec= Restart=on-failure LimitNOFILE= DevicePolicy=closed; do
    grep -q "^$key" "$unit" || { echo "FAIL: $unit lacks $key"; fail=1; }
done
exit $fail
