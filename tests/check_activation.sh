#!/bin/sh
# Socket activation: systemd-socket-activate listens on a socket
# and starts gpucompd on the first connection with LISTEN_FDS, as
# gpucompd.socket does. The daemon must take that socket (not create its
# own), answer, and compress what bunzip2 reads. Skips (77) without
# systemd-socket-activate.
if ! command -v systemd-socket-activate >/dev/null 2>&1; then
    echo "SKIP: systemd-socket-activate not found; socket activation was not checked"
    exit 77
fi
daemon=${GPUCOMPD:-$(pwd)/daemon/gpucompd}
cli=${GPUCOMP:-$(pwd)/programs/gpucomp/gpucomp}
tmp=$(mktemp -d) || exit 1
systemd-socket-activate -l "$tmp/sock" "$daemon" --log-level=info >"$tmp/log" 2>&1 &
act=$!
trap 'kill $act 2>/dev/null; pkill -f "gpucompd --log-level=info" -P $act 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [ -S "$tmp/sock" ] && break; sleep 0.05; done
fail=0
if "$cli" --socket "$tmp/sock" --no-fallback --ping >"$tmp/ping" 2>&1; then
    echo "ok: $(cat "$tmp/ping")"
else
    echo "FAIL: no answer through the activated socket:"; cat "$tmp/ping" "$tmp/log"; fail=1
fi
seq 1 200000 >"$tmp/f"
if "$cli" --socket "$tmp/sock" --no-fallback -c "$tmp/f" | bunzip2 | cmp -s - "$tmp/f"; then
    echo "ok: bzip2 round trip through the activated daemon"
else
    echo "FAIL: round trip through the activated daemon"; fail=1
fi
if grep -q "using the socket passed by systemd" "$tmp/log"; then
    echo "ok: the daemon took the passed socket"
else
    echo "FAIL: the daemon did not say it took the passed socket:"; cat "$tmp/log"; fail=1
fi
kill "$act" 2>/dev/null
wait "$act" 2>/dev/null
exit $fail
