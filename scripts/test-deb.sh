#!/bin/bash
# The Debian packages end to end, for CI on a fresh Debian 12 run as
# root: build them (scripts/build-deb.sh, lintian errors fail), install them
# with apt, check what installation did (group gpucomp, units, socket enabled,
# service not enabled, conffile), start the installed /usr/sbin/gpucompd on
# its installed config and a private socket, compress and decompress through
# the installed gpucomp (as root and as a member of gpucomp), build the README
# example against the -dev package (shared and static), then purge and check
# that the packages' files are gone.
#
# Prints "deb: 1 passed, 0 failed" (or "0 passed, 1 failed") last, for
# scripts/test-summary.sh; prints "deb: SKIP ..." and exits 0 where it cannot
# run: not root, no dpkg/apt, the packaging tools missing, gpucompd already
# installed from elsewhere (it would be replaced, then purged), or SKIP_DEB=1.
# Usage: scripts/test-deb.sh [OUTDIR]   (default build-deb)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${1:-build-deb}
pkgs="gpucompd libgpucomp-client0 libgpucomp-client-dev gpucomp-bzip2 python3-gpucomp"

skip() { echo "deb: SKIP: $*"; exit 0; }
[ "${SKIP_DEB:-0}" = 1 ] && skip "SKIP_DEB=1"
[ "$(id -u)" -eq 0 ] || skip "not root (installing packages needs root); run as root on a throwaway Debian machine"
for t in dpkg apt-get dpkg-buildpackage dh lintian fakeroot; do
    command -v "$t" >/dev/null || skip "$t not found (scripts/install-deps.sh installs the packaging tools)"
done
for p in $pkgs; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        skip "$p is already installed here; this test installs and purges its own build"
    fi
done

failures=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
tmp=$(mktemp -d)
daemon_pid=
installed=0
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
    if [ "$installed" = 1 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $pkgs >/dev/null 2>&1
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
finish() {
    if [ "$failures" -eq 0 ]; then echo "deb: 1 passed, 0 failed"; else echo "deb: 0 passed, 1 failed"; fi
    exit 0
}

echo "-- build"
t0=$(date +%s)
if ! scripts/build-deb.sh "$out"; then
    bad "scripts/build-deb.sh"
    finish
fi
ok "packages built and lintian-clean of errors in $(($(date +%s) - t0)) s"
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
arch=$(dpkg --print-architecture)
debs=()
for p in $pkgs; do debs+=("$(cd "$out" && pwd)/${p}_${version}_${arch}.deb"); done

echo "-- install"
installed=1
if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" >"$tmp/apt.log" 2>&1; then
    ok "apt-get install ./gpucompd_*.deb ./libgpucomp-client*.deb"
else
    cat "$tmp/apt.log"
    bad "apt-get install"
    finish
fi

if getent group gpucomp >/dev/null; then ok "group gpucomp exists ($(getent group gpucomp))"; else bad "no group gpucomp after installation"; fi
for f in /lib/systemd/system/gpucompd.service /lib/systemd/system/gpucompd.socket \
         /usr/lib/sysusers.d/gpucompd.conf /usr/lib/tmpfiles.d/gpucompd.conf /etc/gpucompd.conf \
         /usr/sbin/gpucompd /usr/bin/gpucomp /usr/share/man/man8/gpucompd.8.gz \
         /usr/share/man/man1/gpucomp.1.gz /usr/share/man/man3/libgpucomp-client.3.gz \
         /usr/include/gpucomp.h /usr/share/doc/gpucompd/README.md.gz \
         /usr/share/doc/libgpucomp-client-dev/examples/stream_pipe.c; do
    [ -e "$f" ] || bad "$f not installed"
done
ok "units, snippets, config, programs, man pages, header, README and examples in place"
# gpucomp-bzip2: the names, opt-in; Debian's bzip2 stays what /bin/bzip2 is.
if [ "$(readlink -f /usr/lib/gpucomp/bin/bunzip2)" = /usr/bin/gpucomp ] && ! cmp -s /bin/bzip2 /usr/bin/gpucomp &&
    seq 1 5000 | bzip2 | PATH=/usr/lib/gpucomp/bin:$PATH bunzip2 2>/dev/null | cmp -s - <(seq 1 5000); then
    ok "gpucomp-bzip2: bunzip2 in /usr/lib/gpucomp/bin decompresses; /bin/bzip2 untouched"
else
    bad "gpucomp-bzip2: links missing, /bin/bzip2 replaced, or bunzip2 does not decompress"
fi
# python3-gpucomp: Debian's python3 imports the installed module (not the tree's), and what
# it compresses (in process: no daemon is listening on this socket) bz2 decodes.
if (cd / && GPUCOMP_SOCKET=$tmp/none /usr/bin/python3 -c 'import bz2, gpucomp, sys
assert gpucomp.__file__.startswith("/usr/lib/python3/dist-packages/"), gpucomp.__file__
data = b"python3-gpucomp " * 50000
sys.exit(0 if bz2.decompress(gpucomp.compress(data)) == data and gpucomp.decompress(bz2.compress(data)) == data else 1)'); then
    ok "python3-gpucomp: the installed module compresses and decompresses as bz2 does"
else
    bad "python3-gpucomp: the installed module does not import or round-trip"
fi
if zgrep -n -e '\$(' -e '@[a-zA-Z_]*@' /usr/share/man/man8/gpucompd.8.gz; then
    bad "the installed gpucompd(8) has a build-time name left in it"
elif zgrep -q '^\.I /etc/gpucompd.conf$' /usr/share/man/man8/gpucompd.8.gz; then
    ok "the installed gpucompd(8) names /etc/gpucompd.conf"
else
    bad "the installed gpucompd(8) does not name /etc/gpucompd.conf"
fi
if dpkg-query -W -f='${Conffiles}\n' gpucompd | grep -q '^ /etc/gpucompd.conf '; then
    ok "/etc/gpucompd.conf is a conffile"
else
    bad "/etc/gpucompd.conf is not a conffile"
fi
# Enabled = the [Install] symlink exists (what systemctl is-enabled reads; it
# also answers without a running systemd, in a container or chroot).
if [ -L /etc/systemd/system/sockets.target.wants/gpucompd.socket ]; then
    ok "gpucompd.socket enabled (sockets.target.wants symlink)"
else
    bad "gpucompd.socket not enabled"
fi
if command -v systemctl >/dev/null; then
    state=$(systemctl is-enabled gpucompd.socket 2>&1)
    [ "$state" = enabled ] && ok "systemctl is-enabled gpucompd.socket: $state" ||
        bad "systemctl is-enabled gpucompd.socket: $state"
fi
if [ -e /etc/systemd/system/multi-user.target.wants/gpucompd.service ]; then
    bad "gpucompd.service enabled (only the socket should be)"
else
    ok "gpucompd.service not enabled (the socket starts it)"
fi
# postinst ran systemd-tmpfiles on the package's snippet.
if [ "$(stat -c '%a %U %G' /run/gpucompd 2>/dev/null)" = "755 root root" ]; then
    ok "/run/gpucompd made by tmpfiles.d (0755 root root)"
else
    bad "/run/gpucompd missing or not 0755 root root: $(stat -c '%a %U %G' /run/gpucompd 2>&1)"
fi
# The units as installed: systemd-analyze verify, and the sandbox's exposure target.
if command -v systemd-analyze >/dev/null; then
    units="/lib/systemd/system/gpucompd.socket /lib/systemd/system/gpucompd.service"
    if vout=$(systemd-analyze verify --man=no $units 2>&1) && [ -z "$vout" ]; then
        ok "systemd-analyze verify on the installed units"
    else
        echo "$vout"
        bad "systemd-analyze verify on the installed units"
    fi
    level=$(systemd-analyze security --offline=true --no-pager /lib/systemd/system/gpucompd.service 2>&1 |
            sed -n 's/.*Overall exposure level for gpucompd.service: \([0-9.]*\).*/\1/p')
    if [ -n "$level" ] && awk -v l="$level" 'BEGIN { exit !(l <= 2.5) }'; then
        ok "installed gpucompd.service exposure $level <= 2.5"
    else
        bad "installed gpucompd.service exposure '${level}' (target at most 2.5)"
    fi
    grep -q '^ExecStart=/usr/sbin/gpucompd --config=/etc/gpucompd.conf$' /lib/systemd/system/gpucompd.service &&
        ok "the unit runs /usr/sbin/gpucompd --config=/etc/gpucompd.conf" ||
        bad "ExecStart is not /usr/sbin/gpucompd --config=/etc/gpucompd.conf"
fi
if [ -d /run/systemd/system ]; then
    if systemctl is-active --quiet gpucompd.socket; then ok "gpucompd.socket active"; else bad "gpucompd.socket not active under systemd"; fi
fi

# Reinstalling (what an upgrade's maintainer scripts do) keeps a local change to the
# conffile and the socket's enablement.
echo "# local change (scripts/test-deb.sh)" >>/etc/gpucompd.conf
if dpkg -i "${debs[0]}" >"$tmp/reinstall.log" 2>&1 && grep -q '^# local change' /etc/gpucompd.conf &&
   [ -L /etc/systemd/system/sockets.target.wants/gpucompd.socket ]; then
    ok "reinstall keeps the edited /etc/gpucompd.conf and the enabled socket"
else
    cat "$tmp/reinstall.log"
    bad "reinstall over an edited /etc/gpucompd.conf"
fi

echo "-- the installed daemon"
seq 1 300000 >"$tmp/data"
/usr/sbin/gpucompd --config=/etc/gpucompd.conf --socket="$tmp/gc.sock" --workers=2 >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 200); do [ -S "$tmp/gc.sock" ] && break; sleep 0.05; done
if [ ! -S "$tmp/gc.sock" ]; then
    cat "$tmp/daemon.log"
    bad "/usr/sbin/gpucompd did not create its socket"
    finish
fi
ok "/usr/sbin/gpucompd --config=/etc/gpucompd.conf listening on a private socket"
g() { gpucomp --socket "$tmp/gc.sock" --no-fallback "$@"; }
if g -c "$tmp/data" >"$tmp/data.bz2" && bunzip2 -c "$tmp/data.bz2" | cmp -s - "$tmp/data" &&
   g -d -c "$tmp/data.bz2" | cmp -s - "$tmp/data"; then
    ok "gpucomp compress (bunzip2 reads it) and decompress through the installed daemon"
else
    bad "round trip through the installed daemon"
fi
if g -a rle -w 4 -c "$tmp/data" >"$tmp/data.rle" && g -d -a rle -c "$tmp/data.rle" | cmp -s - "$tmp/data"; then
    ok "rle round trip"
else
    bad "rle round trip"
fi
g --stats >"$tmp/stats" 2>&1 && ok "gpucomp --stats: $(grep -iE 'backend' "$tmp/stats" | head -1 | tr -s ' ' | sed 's/^ //')" || bad "gpucomp --stats"
# A user of group gpucomp (not root): the socket file is 0660 group gpucomp.
chmod 0755 "$tmp"
chmod 0644 "$tmp/data"
if setpriv --reuid=nobody --regid=gpucomp --clear-groups \
       gpucomp --socket "$tmp/gc.sock" --no-fallback -c "$tmp/data" 2>"$tmp/member.err" | bunzip2 | cmp -s - "$tmp/data"; then
    ok "uid nobody with group gpucomp is served"
else
    cat "$tmp/member.err"
    bad "uid nobody with group gpucomp"
fi
if setpriv --reuid=nobody --regid=nogroup --clear-groups \
       gpucomp --socket "$tmp/gc.sock" --no-fallback -c "$tmp/data" >/dev/null 2>&1; then
    bad "uid nobody outside group gpucomp was served"
else
    ok "uid nobody outside group gpucomp is refused"
fi

echo "-- libgpucomp-client-dev"
sed -n '/<!-- readme-example begin -->/,/<!-- readme-example end -->/p' README.md | sed '1,2d;$d' | sed '$d' >"$tmp/example.c"
if cc -o "$tmp/example" "$tmp/example.c" $(pkg-config --cflags --libs gpucomp-client) 2>"$tmp/cc.err" &&
   GPUCOMP_SOCKET=$tmp/gc.sock "$tmp/example"; then
    ok "README example built with pkg-config gpucomp-client (shared library) and run"
else
    cat "$tmp/cc.err"
    bad "README example against the shared library"
fi
if cc -o "$tmp/example-static" "$tmp/example.c" $(pkg-config --cflags gpucomp-client) \
       -Wl,-Bstatic -lgpucomp-client -Wl,-Bdynamic $(pkg-config --libs-only-l --static gpucomp-client | sed 's/-lgpucomp-client//') \
       -pthread 2>"$tmp/cc.err" &&
   ! ldd "$tmp/example-static" | grep -q libgpucomp-client &&
   GPUCOMP_SOCKET=$tmp/gc.sock "$tmp/example-static" >/dev/null; then
    ok "README example linked with the static library and run"
else
    cat "$tmp/cc.err"
    bad "README example against the static library"
fi

kill -TERM "$daemon_pid"
for _ in $(seq 100); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$daemon_pid" 2>/dev/null; then bad "daemon still running 10 s after SIGTERM"; else ok "daemon exited on SIGTERM"; fi
daemon_pid=

echo "-- purge"
if DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $pkgs >"$tmp/purge.log" 2>&1; then
    installed=0
    ok "apt-get purge"
else
    cat "$tmp/purge.log"
    bad "apt-get purge"
fi
left=
for f in /usr/sbin/gpucompd /usr/bin/gpucomp /etc/gpucompd.conf /lib/systemd/system/gpucompd.service \
         /lib/systemd/system/gpucompd.socket /etc/systemd/system/sockets.target.wants/gpucompd.socket \
         /usr/lib/sysusers.d/gpucompd.conf /usr/lib/tmpfiles.d/gpucompd.conf /usr/include/gpucomp.h \
         /usr/share/man/man8/gpucompd.8.gz /usr/share/doc/gpucompd \
         /var/lib/systemd/deb-systemd-helper-enabled/gpucompd.socket.dsh-also; do
    [ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
ls /usr/lib/*/libgpucomp-client* >/dev/null 2>&1 && left="$left $(echo /usr/lib/*/libgpucomp-client*)"
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv 'not-installed' && left="$left (package $p)"
done
if [ -z "$left" ]; then
    ok "nothing of the packages left after purge (group gpucomp stays, as Debian does with system groups)"
else
    bad "left after purge:$left"
fi
finish
