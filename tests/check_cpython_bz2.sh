#!/bin/sh
# CPython's own bz2 test suite (Debian's python3 and libpython3.11-testsuite)
# with libgpucomp-bz2 preloaded in place of libbz2: once with no daemon (every
# call runs in process) and once against a gpucompd on the CPU engine with the
# daemon threshold at 1 byte, where STATS must show the compressions it served.
# Skips (77) when the test suite or Debian's python is missing.
top=$(pwd)
shim=$top/bz2compat/.libs/libgpucomp-bz2.so.1
daemon=${GPUCOMPD:-$top/daemon/gpucompd}
cli=$top/programs/gpucomp/gpucomp
py=/usr/bin/python3
[ -x "$py" ] || { echo "skip: no $py"; exit 77; }
"$py" -c 'import test.test_bz2' 2>/dev/null || { echo "skip: CPython's test suite (libpython3.11-testsuite) is not installed"; exit 77; }
"$py" -c 'import _bz2' 2>/dev/null || { echo "skip: $py has no _bz2"; exit 77; }
# A sanitizer build's shim needs its runtime loaded first, before python3 (which is not
# instrumented); python3's own allocations are not ours to leak-check.
pre=$shim
asan=$(ldd "$shim" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    ubsan=$(ldd "$shim" | awk '/libubsan/ { print $3 }')
    pre="$asan${ubsan:+ $ubsan} $shim"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
export LD_LIBRARY_PATH="$top/libclient/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d) || exit 1
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0

# The preload must really serve _bz2's stream calls (else the runs prove nothing):
# each one the process resolves lies in the shim's mapping.
LD_PRELOAD="$pre" "$py" -c 'import bz2, ctypes, sys
spans = [[int(x, 16) for x in l.split()[0].split("-")] for l in open("/proc/self/maps") if "libgpucomp-bz2" in l]
names = ["BZ2_bzCompressInit", "BZ2_bzCompress", "BZ2_bzCompressEnd",
         "BZ2_bzDecompressInit", "BZ2_bzDecompress", "BZ2_bzDecompressEnd"]
g = ctypes.CDLL(None)
bad = [n for n in names if not any(a <= ctypes.cast(getattr(g, n), ctypes.c_void_p).value < b for a, b in spans)]
print("not from the shim:", bad); sys.exit(1 if bad else 0)' \
    && echo "ok: the stream calls come from the shim" || { echo "FAIL: libbz2 still serves the stream calls"; exit 1; }

GPUCOMP_SOCKET=$tmp/none; export GPUCOMP_SOCKET
if LD_PRELOAD="$pre" "$py" -m test test_bz2 >"$tmp/nodaemon.log" 2>&1; then
    echo "ok: test_bz2 with no daemon"
else
    cat "$tmp/nodaemon.log"; echo "FAIL: test_bz2 with no daemon"; fail=1
fi

"$daemon" --socket "$tmp/sock" --log-level warning 2>"$tmp/dlog" &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/sock" ] && break; sleep 0.05; done
GPUCOMP_SOCKET=$tmp/sock
if LD_PRELOAD="$pre" GPUCOMP_BZ2_THRESHOLD=1 "$py" -m test test_bz2 >"$tmp/daemon.log" 2>&1; then
    echo "ok: test_bz2 through gpucompd"
else
    cat "$tmp/daemon.log"; echo "FAIL: test_bz2 through gpucompd"; fail=1
fi
"$cli" --stats --json >"$tmp/stats" 2>&1
"$py" -c 'import json, sys
s = json.load(open(sys.argv[1]))
n = s["requests_ok"]
print("daemon requests:", n); sys.exit(0 if n > 0 else 1)' "$tmp/stats" \
    && echo "ok: STATS shows the daemon served requests" || { cat "$tmp/stats"; echo "FAIL: no requests in STATS"; fail=1; }
exit $fail
