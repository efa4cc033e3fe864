#!/bin/bash
# Install gpucompd from the tree, as root or as a user with sudo: build in the
# build directory (scripts/build.sh's, default build/; configured first if
# missing), `make install` from it (through sudo unless root), which also runs
# ldconfig and creates group gpucomp (scripts/post-install.sh), then enable and
# start gpucompd.socket where systemd runs (not in a container or chroot).
# Usage: scripts/install.sh [BUILDDIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
cd "$top"
if [ -f "$dir/Makefile" ]; then
    make -C "$dir" -j"$(nproc)" >/dev/null
else
    scripts/build.sh "$dir"
fi
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO make -C "$dir" install >"$dir/install.out" 2>&1 || { tail -40 "$dir/install.out"; exit 1; }
grep '^post-install:' "$dir/install.out" || true
prefix=$(sed -n 's/^prefix = //p' "$dir/Makefile")
echo "install: gpucompd installed under $prefix (log: $dir/install.out)"
if [ -d /run/systemd/system ]; then
    $SUDO systemctl daemon-reload
    $SUDO systemctl enable --now gpucompd.socket
    echo "install: gpucompd.socket enabled and listening on /run/gpucompd/gpucompd.sock"
else
    echo "install: systemd is not running here (a container or chroot): the units are installed" \
         "but not enabled; start the daemon by hand, e.g. gpucompd --socket /tmp/gc.sock"
fi
