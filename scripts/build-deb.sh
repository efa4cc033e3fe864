#!/bin/bash
# Build a gpucompd .deb with dpkg-deb from `make install DESTDIR=...` (issue 17):
# daemon, client tool and library, headers, pkg-config file, systemd units,
# sysusers.d snippet, /etc/gpucompd.conf (a conffile) and man pages. postinst
# creates group gpucomp (systemd-sysusers), reloads systemd and enables the socket.
#
# Usage: scripts/build-deb.sh [BUILDDIR] [configure options...]
#   default BUILDDIR build-deb; e.g. scripts/build-deb.sh build-deb --without-cuda
# The package is written to BUILDDIR/gpucompd_VERSION_ARCH.deb.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build-deb}
shift || true
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cd "$dir"
# --prefix=/usr puts the units in systemd's own directory (configure.ac).
[ -f Makefile ] || "$top/configure" --prefix=/usr --sysconfdir=/etc --localstatedir=/var \
    --libdir=/usr/lib/"$(dpkg-architecture -qDEB_HOST_MULTIARCH)" "$@" >configure.out \
    || { tail -30 configure.out; exit 1; }
make -j"$(nproc)" >make.out 2>&1 || { tail -60 make.out; exit 1; }

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' config.h)
arch=$(dpkg --print-architecture)
stage=$dir/deb-stage
root=$stage/root
rm -rf "$stage"
mkdir -p "$root"
make install DESTDIR="$root" >install.out 2>&1 || { tail -30 install.out; exit 1; }
find "$root" -name '*.la' -delete
# Debian policy: stripped binaries, compressed man pages, a copyright file.
find "$root" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c \
    'file -b "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;
find "$root/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} \; 2>/dev/null || true
docdir=$root/usr/share/doc/gpucompd
mkdir -p "$docdir"
for f in "$root"/usr/share/doc/gpucompd/*; do [ -f "$f" ] && gzip -9n "$f" || true; done 2>/dev/null
printf 'gpucompd, built from its source tree by scripts/build-deb.sh.\n' > "$docdir/copyright"

mkdir -p "$root/DEBIAN"
# Shared-library dependencies, as dpkg-shlibdeps computes them.
mkdir -p "$stage/debian"
printf 'Source: gpucompd\n\nPackage: gpucompd\nArchitecture: any\n' > "$stage/debian/control"
bins=$(find "$root" -type f \( -perm -u+x -o -name '*.so.*' \) -exec sh -c 'file -b "$1" | grep -q ELF && echo "$1"' _ {} \;)
depends=$(cd "$stage" && dpkg-shlibdeps -O -l"$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)" $bins 2>/dev/null \
          | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || depends="libc6, libevent-2.1-7, libevent-pthreads-2.1-7, libprotobuf-c1, libsystemd0"
installed_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)

cat > "$root/DEBIAN/control" <<CONTROL
Package: gpucompd
Version: $version
Architecture: $arch
Maintainer: gpucompd developers <gpucompd@localhost>
Installed-Size: $installed_kb
Depends: $depends, procps
Recommends: systemd
Section: utils
Priority: optional
Description: GPU compression daemon and client
 gpucompd serves compress/decompress requests on a Unix socket, on NVIDIA GPUs
 when present and on its CPU engine otherwise (byte-identical output). The
 package holds the daemon, its socket-activated systemd units, the gpucomp
 client tool, the client library with its header and pkg-config file, and the
 man pages. Members of group gpucomp may use the daemon.
CONTROL
# Only real files under /etc are conffiles.
(cd "$root" && find etc -type f | sed 's|^|/|') > "$root/DEBIAN/conffiles"
[ -s "$root/DEBIAN/conffiles" ] || rm "$root/DEBIAN/conffiles"

cat > "$root/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    # group gpucomp (sysusers.d/gpucompd.conf), which owns the socket
    if command -v systemd-sysusers >/dev/null 2>&1; then
        systemd-sysusers gpucompd.conf || true
    elif ! getent group gpucomp >/dev/null; then
        addgroup --system gpucomp || true
    fi
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
        systemctl enable gpucompd.socket || true
        # a running daemon picks up the new binary; else the socket starts it on demand
        if systemctl is-active --quiet gpucompd.service; then
            systemctl restart gpucompd.service || true
        else
            systemctl start gpucompd.socket || true
        fi
    fi
fi
SCRIPT
cat > "$root/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    systemctl stop gpucompd.service gpucompd.socket || true
    systemctl disable gpucompd.socket || true
fi
SCRIPT
cat > "$root/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
SCRIPT
echo 'activate-noawait ldconfig' > "$root/DEBIAN/triggers"
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/triggers"
[ -f "$root/DEBIAN/conffiles" ] && chmod 0644 "$root/DEBIAN/conffiles"

deb=$dir/gpucompd_${version}_${arch}.deb
fakeroot dpkg-deb --build -Zxz "$root" "$deb" >/dev/null
echo "built $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
