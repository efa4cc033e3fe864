#!/bin/sh
# The Python module (python/): built against this tree's libgpucomp-client,
# then tests/python/test_gpucomp.py run twice: with no daemon (every request
# in process) and with gpucompd on the CPU engine, where STATS must show the
# requests. Skipped (77) without python3's headers or setuptools.
src=$(cd "$(dirname "$0")/.." && pwd)
daemon=${GPUCOMPD:-$(pwd)/daemon/gpucompd}
build=$(dirname "$(dirname "$daemon")")
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d) || exit 1
pid=
trap '[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$tmp"' EXIT

# A copy of python/ in tmp, so a read-only source tree (distcheck) builds too.
cp -r "$src/python" "$tmp/python" && rm -f "$tmp"/python/gpucomp/*.so
mkdir -p "$tmp/scripts" && cp "$src/scripts/build-python.sh" "$tmp/scripts/"
ln -s "$src/libclient" "$tmp/libclient"
PYTHON_WORK_DIR="$tmp" sh "$tmp/scripts/build-python.sh" "$build"
rc=$?
[ $rc = 77 ] && { echo "SKIP: $py has no headers or setuptools (python3-dev, python3-setuptools)"; exit 77; }
[ $rc = 0 ] || { echo "FAIL: the module did not build"; exit 1; }

export LD_LIBRARY_PATH="$build/libclient/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A sanitizer build's library needs its runtime loaded first, before python3
# (which is not instrumented); python3's own allocations are not ours to leak-check.
asan=$(ldd "$build/libclient/.libs/libgpucomp-client.so" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    ubsan=$(ldd "$build/libclient/.libs/libgpucomp-client.so" | awk '/libubsan/ { print $3 }')
    export LD_PRELOAD="$asan${ubsan:+ $ubsan}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
export PYTHONPATH="$tmp/python"
fail=0
run_tests() {
    (cd "$src/tests/python" && "$py" -m unittest -v test_gpucomp) >"$tmp/out" 2>&1 || fail=1
    tail -n 4 "$tmp/out"
    [ $fail = 0 ] || cat "$tmp/out"
}

echo "== no daemon: in process"
GPUCOMP_SOCKET="$tmp/none.sock" GPUCOMP_EXPECT_BACKEND="cpu (in process)" run_tests

echo "== gpucompd on the CPU engine"
sock="$tmp/gpucompd.sock"
"$daemon" --socket "$sock" --log-level warning &
pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { echo "FAIL: gpucompd did not start"; exit 1; }
GPUCOMP_SOCKET="$sock" GPUCOMP_EXPECT_BACKEND=cpu run_tests
GPUCOMP_SOCKET="$sock" "$py" -c '
import gpucomp, sys
s = gpucomp.stats()
print("daemon STATS: requests_ok=%d cpu_requests=%d backend=%s" % (s["requests_ok"], s["cpu_requests"], s["backend"]))
sys.exit(0 if s["requests_ok"] >= 100 and s["cpu_requests"] >= 100 else 1)' || { echo "FAIL: STATS does not show the requests"; fail=1; }
[ $fail = 0 ] && echo "ok: the Python module passes with no daemon and through gpucompd"
exit $fail
