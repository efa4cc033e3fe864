#!/bin/bash
# The README's "From the tree" lines on a fresh minimal Debian 12 (debootstrap
# --variant=minbase: no sudo, no CUDA, no compiler): the tree at HEAD is copied
# into a chroot (git archive), and as root inside it this runs the README's
# lines as written, scripts/setup.sh then scripts/install.sh, then
# `gpucomp --help`, and the README's library example built with
# `cc example.c $(pkg-config --cflags --libs gpucomp-client)` against the
# installed library and run against the installed gpucompd on a private socket.
# systemd does not run in a chroot: install.sh says so and the units stay
# disabled (the socket unit is not exercised here; scripts/test-deb.sh and
# tests/check_activation.sh cover it).
#
# Heavy (a few hundred MB downloaded, a full build): not run by CI.
# Needs root, debootstrap (apt-get install debootstrap) and the network.
# Usage: scripts/test-chroot.sh [DIR] [MIRROR]
#   DIR     the chroot, made afresh (default /tmp/gpucompd-chroot; removed first)
#   MIRROR  default http://deb.debian.org/debian
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/gpucompd-chroot}
mirror=${2:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "test-chroot: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "test-chroot: apt-get install debootstrap" >&2; exit 1; }

mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

rm -rf "$dir"
echo "test-chroot: debootstrap --variant=minbase bookworm $dir $mirror"
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 ||
    { tail -20 "$dir.debootstrap.log"; exit 1; }
for m in proc dev dev/pts; do
    case $m in
        proc) mount -t proc proc "$dir/proc" ;;
        *) mount --bind "/$m" "$dir/$m" ;;
    esac
    mounted+=("$dir/$m")
done
cp /etc/resolv.conf "$dir/etc/resolv.conf"
mkdir -p "$dir/root/gpucompd"
git -C "$top" archive HEAD | tar -x -C "$dir/root/gpucompd"

cat >"$dir/root/test-from-the-tree.sh" <<'EOF'
set -euxo pipefail
cd /root/gpucompd
! command -v sudo
# The README's "From the tree" lines, as written.
scripts/setup.sh
scripts/install.sh
command -v gpucomp gpucompd
gpucomp --help | head -3
getent group gpucomp
ldconfig -p | grep libgpucomp-client.so.0
gpucompd --socket /tmp/gc.sock --workers=2 >/tmp/gpucompd.log 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S /tmp/gc.sock ] && break; sleep 0.1; done
sed -n '/<!-- readme-example begin -->/,/<!-- readme-example end -->/p' README.md |
    sed '1,2d;$d' | sed '$d' >/tmp/example.c
cd /tmp
cc example.c $(pkg-config --cflags --libs gpucomp-client)
GPUCOMP_SOCKET=/tmp/gc.sock ./a.out
seq 1 100000 >/tmp/data
gpucomp --socket /tmp/gc.sock --no-fallback -c /tmp/data | bunzip2 | cmp - /tmp/data
kill "$daemon"
wait "$daemon" || true
echo "test-chroot: all passed"
EOF
chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash /root/test-from-the-tree.sh
