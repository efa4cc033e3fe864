#!/bin/bash
# The test command: every suite in a normal build (CUDA too when a toolkit is
# present) and again under AddressSanitizer/UndefinedBehaviorSanitizer, the
# decoder fuzzers for a short run, make distcheck, and the Debian packages
# (scripts/test-deb.sh: as root only, it skips otherwise). The last line is the
# total over everything: "N passed, N failed". Exits non-zero on any failure.
# Usage: scripts/test.sh        (FUZZ_SECONDS=30, SKIP_DISTCHECK=1 and SKIP_DEB=1 are honoured)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
extra=$(mktemp)
trap 'rm -f "$extra"' EXIT

# Run `make check` in a build dir; print the per-program results.
check_in() {
    local dir=$1
    shift
    if ! scripts/build.sh "$dir" "$@"; then
        echo "build-$dir: 0 passed, 1 failed" >>"$extra"
        return
    fi
    (cd "$dir" && make -j2 check >check.out 2>&1)
    grep -E '^(PASS|FAIL|ERROR|SKIP):' "$dir/check.out"
    grep -q '^# FAIL:  *0$' "$dir/check.out" && grep -q '^# ERROR: *0$' "$dir/check.out" ||
        { echo "check-$dir: 0 passed, 1 failed" >>"$extra"; tail -n 40 "$dir"/tests/*.log | grep -v '^$' | tail -60; }
}

echo "== make check"
check_in build
echo "== make check under ASan/UBSan"
ASAN_OPTIONS=detect_leaks=1 check_in build-asan --enable-sanitizers --without-cuda
echo "== fuzzers"
scripts/fuzz.sh "${FUZZ_SECONDS:-30}" | tee -a "$extra"
if [ "${SKIP_DISTCHECK:-0}" != 1 ]; then
    echo "== make distcheck"
    if (cd build && make distcheck DISTCHECK_CONFIGURE_FLAGS=--without-cuda >distcheck.out 2>&1); then
        echo "distcheck: 1 passed, 0 failed" | tee -a "$extra"
    else
        tail -n 40 build/distcheck.out
        echo "distcheck: 0 passed, 1 failed" | tee -a "$extra"
    fi
fi
echo "== Debian packages (build, lintian, install, run, purge; skips unless root)"
mkdir -p build-deb
scripts/test-deb.sh build-deb | tee build-deb/test-deb.log | grep -v '^deb: [0-9]'
grep -q '^deb: ' build-deb/test-deb.log || echo "deb: 0 passed, 1 failed (scripts/test-deb.sh gave no result)" >>build-deb/test-deb.log
grep '^deb: [0-9]' build-deb/test-deb.log | tee -a "$extra"
echo "== totals"
scripts/test-summary.sh build/tests/*.log build-asan/tests/*.log <"$extra"
